"""``robot-rl deploy --log``: an existing log is never replaced unless --overwrite says so, and the refusal
comes before the robot is touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from robot_rl.cli import main
from robot_rl.data.mcap_log import summarize_log

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies/a1_flat/policy.onnx"


def test_an_existing_log_is_refused_in_one_line_and_kept(tmp_path, capsys) -> None:
    log = tmp_path / "yesterday.mcap"
    log.write_bytes(b"the run before the incident")
    assert main(["deploy", "--policy", str(POLICY), "--log", str(log)]) == 2
    captured = capsys.readouterr()
    assert captured.err == (f"error: --log {log}: a file is already there; choose another path, or pass "
                            "--overwrite to replace it\n")
    assert "deploy:" not in captured.out  # refused before the policy was loaded or the robot connected
    assert log.read_bytes() == b"the run before the incident"


@pytest.mark.skipif(not POLICY.exists(), reason=f"no shipped A1 policy at {POLICY}")
def test_overwrite_replaces_the_log_with_the_new_run(tmp_path, capsys) -> None:
    pytest.importorskip("mujoco")
    log = tmp_path / "run.mcap"
    log.write_bytes(b"an old run")
    assert main(["deploy", "--policy", str(POLICY), "--duration-s", "0.2", "--log", str(log), "--overwrite"]) == 0
    assert f"log: {log}" in capsys.readouterr().out
    summary = summarize_log(log)
    assert summary["closed_cleanly"] and not summary["truncated"] and summary["messages"]["/robot/state"] > 0
