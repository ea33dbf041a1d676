"""robot show: every spec renders as tables holding its facts."""

from __future__ import annotations

import io
from pathlib import Path

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


# --- robot show through the command line: a broken spec file is one line; the spec is checked against its model

def _show(argv: list[str], capsys) -> tuple[int, str, str]:
    from robot_rl.cli import main

    status = main(["robot", "show", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_binary_spec_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "a1.yaml"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    status, _, err = _show([str(path)], capsys)
    assert status == 2 and err.startswith(f"error: {path}: ") and "not a YAML text file" in err
    assert len(err.splitlines()) == 1


def test_a_spec_that_is_not_a_mapping_is_one_line(tmp_path, capsys):
    path = tmp_path / "a1.yaml"
    path.write_text("just a sentence\n")
    status, _, err = _show([str(path)], capsys)
    assert status == 2 and err.startswith(f"error: {path}: ") and len(err.splitlines()) == 1


def _a1_with(tmp_path, old: str, new: str, count: int = -1):
    text = (REPO / "hardware/robots/a1.yaml").read_text()
    assert old in text
    path = tmp_path / "a1.yaml"
    path.write_text(text.replace(old, new, count))
    return path


REPO = Path(__file__).resolve().parents[2]


def test_a_spec_joint_missing_from_the_model_is_one_line_naming_file_and_joint(tmp_path, capsys):
    pytest.importorskip("mujoco")
    pytest.importorskip("pybullet_data")
    path = _a1_with(tmp_path, "FL_upper_joint", "FL_thigh_joint")  # renamed everywhere in the spec
    status, out, err = _show([str(path)], capsys)
    assert status == 2 and out == ""
    assert err.startswith(f"error: {path}: joints[4].name 'FL_thigh_joint' is not a joint of the model "), err
    assert "(model joints no spec joint uses: FL_upper_joint)" in err and len(err.splitlines()) == 1


def test_limits_that_differ_from_the_model_are_reported(tmp_path, capsys):
    pytest.importorskip("mujoco")
    pytest.importorskip("pybullet_data")
    path = _a1_with(tmp_path, "position_limit: [-0.802851, 0.802851]", "position_limit: [-0.9, 0.802851]",
                    count=1)  # the first joint, FR_hip_joint
    status, out, _ = _show([str(path)], capsys)
    assert status == 0
    assert "all 12 spec joints and the sim_model bodies are in the model" in out
    assert "FR_hip_joint: spec [-0.9000, +0.8029], model [-0.8029, +0.8029]  WIDER than the model" in out
    status, out, _ = _show(["a1"], capsys)
    assert status == 0 and "position limits: as in the model file" in out


def test_a_model_that_is_not_on_this_machine_skips_the_check(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ROBOT_RL_MENAGERIE_DIR", str(tmp_path / "no_menagerie"))
    status, out, _ = _show(["go2"], capsys)
    assert status == 0 and "model check skipped: the model is not on this machine" in out
