"""A robot spec as tables a person can check against a datasheet (``robot-rl robot show NAME``).

Everything printed is read from the RobotSpec; nothing about a robot is restated here.
"""

from __future__ import annotations

import dataclasses

from rich.console import Console, Group, RenderableType
from rich.table import Table

from robot_rl.robots.spec import RobotSpec, UnitreeDdsInterfaceSpec


def _hz(period_s: float) -> str:
    return f"{1.0 / period_s:g} Hz"


def _interface_summary(spec: RobotSpec) -> str:
    iface = spec.interface
    parts = [iface.type]
    for f in dataclasses.fields(iface):
        if f.name in ("type", "motor_slots"):
            continue
        parts.append(f"{f.name}={getattr(iface, f.name)}")
    if isinstance(iface, UnitreeDdsInterfaceSpec):
        used = sum(1 for name in iface.motor_slots if name)
        parts.append(f"motor slots {used} of {len(iface.motor_slots)} used")
    return ", ".join(parts)


def _sim_model_summary(spec: RobotSpec) -> str:
    m = spec.sim_model
    text = f"{m.source}: {m.path}"
    text += f" (base {m.base_body}, IMU {m.imu_body}"
    if m.foot_bodies:
        text += f", feet {' '.join(m.foot_bodies)}"
    if m.end_effector_body:
        text += f", end effector {m.end_effector_body}"
    if m.base_height is not None:
        text += f", base height {m.base_height:g} m"
    return text + ")"


def _header_table(spec: RobotSpec) -> Table:
    t = spec.timing
    table = Table(title=f"robot {spec.name}", show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    table.add_row("name", spec.name)
    table.add_row("description", spec.description)
    table.add_row("kind", spec.kind)
    table.add_row("command mode", spec.command_mode)
    table.add_row(
        "rates",
        f"policy {_hz(t.policy_period_s)} / physics {_hz(t.physics_period_s)} / hardware {_hz(t.hardware_period_s)}",
    )
    table.add_row("decimation", f"{t.decimation} physics steps per policy step")
    table.add_row("interface", _interface_summary(spec))
    table.add_row("sim model", _sim_model_summary(spec))
    if spec.policy_joints:
        table.add_row("policy joints", f"{spec.num_policy_joints} of {spec.num_joints} ({spec.policy_joints[0]} … "
                      f"{spec.policy_joints[-1]}); the others held at their default pose")
    table.add_row("spec hash", spec.spec_hash)
    if spec.source_file:
        table.add_row("file", spec.source_file)
    return table


def _joint_table(spec: RobotSpec) -> Table:
    slots: dict[str, int] = {}
    if isinstance(spec.interface, UnitreeDdsInterfaceSpec):
        slots = {name: i for i, name in enumerate(spec.interface.motor_slots) if name}
    table = Table(title=f"joints ({spec.num_joints})", title_justify="left")
    columns = ["#", "name", "default", "kp", "kd", "effort N·m", "velocity rad/s", "lower", "upper"]
    if slots:
        columns.append("motor slot")
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 1 else "right")
    for i, j in enumerate(spec.joints):
        lo, hi = j.position_limit
        row = [
            str(i),
            j.name,
            f"{j.default_position:+.3f}",
            f"{j.kp:g}",
            f"{j.kd:g}",
            f"{j.effort_limit:g}",
            f"{j.velocity_limit:g}",
            f"{lo:+.4f}",
            f"{hi:+.4f}",
        ]
        if slots:
            row.append(str(slots[j.name]))
        table.add_row(*row)
    return table


def _safety_table(spec: RobotSpec) -> Table:
    table = Table(title="safety", show_header=False, title_justify="left")
    table.add_column("parameter", style="bold")
    table.add_column("value", justify="right")
    for f in dataclasses.fields(spec.safety):
        value = getattr(spec.safety, f.name)
        table.add_row(f.name, "none" if value is None else f"{value:g}")
    return table


def model_check(spec: RobotSpec) -> list[str]:
    """The spec checked against its sim model when the model is on this machine: lines to print. A spec
    joint or body missing from the model raises ModelBuildError (one line: spec file, joint, closest names);
    limits that differ from the model file's are reported, not refused (specs may narrow them on purpose)."""
    try:
        from robot_rl.robots.mujoco_model import check_spec_against_model
    except ImportError as exc:
        return [f"model check skipped: {exc.name} is not installed"]
    from robot_rl.robots.assets import ModelSourceError

    try:
        path, mismatches = check_spec_against_model(spec)
    except ModelSourceError as exc:
        return [f"model check skipped: the model is not on this machine ({str(exc).split('. ')[0]})"]
    lines = [f"model check: {path}: all {spec.num_joints} spec joints and the sim_model bodies are in the model"]
    if mismatches:
        lines.append(f"position limits that differ from the model file ({len(mismatches)}):")
        for m in mismatches:
            lines.append(f"  {m.joint}: spec [{m.spec[0]:+.4f}, {m.spec[1]:+.4f}], model [{m.model[0]:+.4f}, "
                         f"{m.model[1]:+.4f}]" + ("  WIDER than the model" if m.wider else "  (narrower)"))
    else:
        lines.append("position limits: as in the model file")
    return lines


def render_spec(spec: RobotSpec) -> RenderableType:
    """The spec as three tables: header (rates, interface, sim model, hash), joints, safety."""
    return Group(_header_table(spec), _joint_table(spec), _safety_table(spec))


def print_spec(spec: RobotSpec, console: Console | None = None) -> None:
    (console or Console()).print(render_spec(spec))


__all__ = ["model_check", "print_spec", "render_spec"]
