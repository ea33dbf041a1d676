"""The main job: with a policy, the gate runs and writes its report; without one, a clear note and the
stand check."""

from __future__ import annotations

from robot_rl.evaluation.demo import DEFAULT_POLICY, demo, resolve_policy
from robot_rl.robots.spec import REPO_ROOT

from .conftest import SHORT


def test_demo_without_a_policy_says_so_and_runs_the_stand_check(tmp_path, capsys):
    code = demo(policy=str(tmp_path / "policy.onnx"), out_dir=str(tmp_path / "demo"))
    out = capsys.readouterr().out
    assert "no trained policy at" in out and "stand check" in out
    assert "PASS" in out and code == 0  # every embedded robot stands
    assert not (tmp_path / "demo").exists()


def test_demo_with_a_policy_runs_the_gate(untrained_a1_policy, tmp_path, capsys):
    code = demo(policy=str(untrained_a1_policy), out_dir=str(tmp_path / "demo"), simulators=("mujoco",),
                time_scale=SHORT)
    out = capsys.readouterr().out
    assert code == 1 and "sim2sim gate" in out and "verdict" in out
    assert (tmp_path / "demo" / "report.md").is_file() and (tmp_path / "demo" / "report.png").is_file()


def test_default_policy_path_resolves_from_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run from elsewhere: the repository's policies/ is still found
    shipped = REPO_ROOT / DEFAULT_POLICY
    assert resolve_policy(DEFAULT_POLICY) == (shipped if shipped.is_file() else None)
    assert resolve_policy(str(tmp_path / "missing.onnx")) is None
