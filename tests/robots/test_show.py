"""robot show: every spec renders as tables holding its facts."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from robot_rl.robots.show import print_spec, render_spec
from robot_rl.robots.spec import UnitreeDdsInterfaceSpec, available_robots, load_robot


def rendered_text(name: str) -> str:
    console = Console(record=True, width=160, file=io.StringIO())
    console.print(render_spec(load_robot(name)))
    return console.export_text()


@pytest.mark.parametrize("name", available_robots())
def test_renders_every_joint_and_the_header(name: str):
    spec = load_robot(name)
    text = rendered_text(name)
    for joint in spec.joints:
        assert joint.name in text
    assert spec.spec_hash in text
    assert spec.sim_model.path in text
    assert spec.interface.type in text
    assert f"{spec.timing.decimation} physics steps per policy step" in text
    assert f"policy {1 / spec.timing.policy_period_s:g} Hz" in text
    for key in ("ramp_duration_s", "damping_kd", "max_target_rate_rad_s"):
        assert key in text


@pytest.mark.parametrize("name", available_robots())
def test_joint_rows_hold_the_spec_values_in_order(name: str):
    spec = load_robot(name)
    rows = [line for line in rendered_text(name).splitlines() if any(f" {j.name} " in line for j in spec.joints)]
    assert len(rows) == spec.num_joints
    for i, (row, joint) in enumerate(zip(rows, spec.joints, strict=True)):
        cells = [c.strip() for c in row.strip("│┃ ").split("│")]
        assert cells[0] == str(i) and cells[1] == joint.name
        assert float(cells[2]) == pytest.approx(joint.default_position, abs=5e-4)
        assert float(cells[3]) == joint.kp and float(cells[4]) == joint.kd
        assert float(cells[5]) == joint.effort_limit and float(cells[6]) == joint.velocity_limit
        assert float(cells[7]) == pytest.approx(joint.position_limit[0], abs=5e-5)
        assert float(cells[8]) == pytest.approx(joint.position_limit[1], abs=5e-5)
        if isinstance(spec.interface, UnitreeDdsInterfaceSpec):
            assert spec.interface.motor_slots[int(cells[9])] == joint.name


def test_print_spec_writes_to_the_given_console():
    out = io.StringIO()
    print_spec(load_robot("go2"), Console(file=out, width=160))
    assert "FR_calf_joint" in out.getvalue() and "unitree_go" in out.getvalue()
