"""The main job (``robot-rl demo`` / ``make demo``): the shipped A1 policy through the sim2sim gate.

With ``policies/a1_flat/policy.onnx`` in place, the demo runs it through the deploy runtime in MuJoCo and
PyBullet over the gate's scripted scenario (stand, walk, turn, sidestep, back up, stop, two shoves),
prints the gate's table and writes ``reports/demo/report.md`` and ``report.png``. Without a policy it says
so and falls back to the stand check (every embedded robot holding its default pose in both simulators).
"""

from __future__ import annotations

import time
from typing import Literal

from rich.console import Console

from robot_rl.core.validate import positive
from robot_rl.policy.onnx_policy import resolve_policy

DEFAULT_POLICY = "policies/a1_flat/policy.onnx"


def demo(
    policy: str = DEFAULT_POLICY,
    out_dir: str = "reports/demo",
    simulators: tuple[Literal["mujoco", "pybullet"], ...] = ("mujoco", "pybullet"),
    time_scale: float = 1.0,
) -> int:
    """The main job: the shipped A1 policy through the sim2sim gate in MuJoCo and PyBullet (stand check without one).

    Args:
        policy: the exported policy to run.
        out_dir: where the gate writes report.md, report.png and gate.json.
        simulators: which simulators to run.
        time_scale: stretch or shrink the gate's scripted scenario.
    """
    from robot_rl.evaluation.sim2sim import sim2sim

    positive(time_scale=time_scale)
    console = Console()
    start = time.perf_counter()
    found = resolve_policy(policy)
    if found is None:
        from robot_rl.commands import stand

        console.print(
            f"[yellow]note:[/yellow] no trained policy at {policy} (a policy comes from `robot-rl train --task "
            "a1-flat` and an ONNX export to that path). Running the stand check instead: every embedded robot "
            "holds its default pose under the spec's PD in both simulators."
        )
        code = stand()
    else:
        code = sim2sim(str(found), out_dir=out_dir, simulators=simulators, time_scale=time_scale)
    console.print(f"demo finished in {time.perf_counter() - start:.1f} s")
    return code
