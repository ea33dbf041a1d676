"""Small user-facing commands: robot listing and display, the stand check, and the demo (main job)."""

from __future__ import annotations

from typing import Literal

from rich.console import Console
from rich.table import Table

from robot_rl.core.validate import positive
from robot_rl.robots.spec import available_robots, load_robot


def robot_list() -> int:
    """List the robots whose specs are in hardware/robots."""
    console = Console()
    table = Table(title="robots (hardware/robots/*.yaml)")
    for col in ("name", "kind", "joints", "policy Hz", "interface", "sim model"):
        table.add_column(col)
    for name in available_robots():
        spec = load_robot(name)
        table.add_row(
            name,
            spec.kind,
            str(spec.num_joints),
            f"{1 / spec.timing.policy_period_s:g}",
            spec.interface.type,
            f"{spec.sim_model.source}:{spec.sim_model.path}",
        )
    console.print(table)
    return 0


def robot_show(name: str, /) -> int:
    """Print a robot spec as tables (joints, gains, limits, rates, safety, interface), checked against its
    sim model when the model is on this machine (a spec joint missing from the model: exit 2)."""
    from robot_rl.robots.show import model_check, print_spec

    spec = load_robot(name)
    lines = model_check(spec)
    print_spec(spec)
    for line in lines:
        print(line)
    return 0


def _embedded_robots() -> list[str]:
    """Robots whose sim model ships with an installed package (no download needed)."""
    from robot_rl.robots.assets import CHECKOUT_SOURCES

    return [n for n in available_robots() if load_robot(n).sim_model.source not in CHECKOUT_SOURCES]


def stand(
    robot: str = "all",
    simulator: Literal["mujoco", "pybullet", "both"] = "both",
    duration_s: float = 2.0,
) -> int:
    """Stand check: hold each robot's default pose under PD in MuJoCo and PyBullet; print a table."""
    from robot_rl.robots.stand_check import stand_check

    positive(duration_s=duration_s)
    robots = _embedded_robots() if robot == "all" else [robot]
    sims = ["mujoco", "pybullet"] if simulator == "both" else [simulator]
    console = Console()
    table = Table(title=f"stand check: default pose under the spec's PD for {duration_s:g} s")
    for col in ("robot", "sim", "base height (m)", "nominal (m)", "max |q − q0| (rad)", "limits", "wall (s)", "result"):
        table.add_column(col, justify="right" if "(" in col else "left")
    all_passed = True
    for name in robots:
        spec = load_robot(name)
        for sim in sims:
            result = stand_check(spec, sim, duration_s=duration_s)
            all_passed &= result.passed
            table.add_row(
                name,
                sim,
                "—" if result.base_height_final is None else f"{result.base_height_final:.3f}",
                "—" if result.base_height_nominal is None else f"{result.base_height_nominal:.3f}",
                f"{result.max_joint_error_rad:.4f}",
                f"past by {result.max_limit_violation_rad:.3f} rad" if result.joint_past_limit else "ok",
                f"{result.sim_wall_time_s:.2f}",
                "[green]PASS[/green]" if result.passed else "[red]FAIL[/red]",
            )
    console.print(table)
    return 0 if all_passed else 1
