"""``robot-rl deploy --log``: an existing log is never replaced unless --overwrite says so, and the refusal
comes before the robot is touched. The default policy is the shipped one, from any directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from robot_rl.cli import main
from robot_rl.data.mcap_log_reader import summarize_log

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


@pytest.mark.skipif(not POLICY.exists(), reason=f"no shipped A1 policy at {POLICY}")
def test_the_default_policy_is_found_from_outside_the_checkout(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("mujoco")
    monkeypatch.chdir(tmp_path)  # policies/a1_flat/policy.onnx is not relative to here
    assert main(["deploy", "--duration-s", "0.2"]) == 0
    assert "deploy: robot a1, policy policies/a1_flat/policy.onnx" in capsys.readouterr().out


@pytest.mark.skipif(not POLICY.exists(), reason=f"no shipped A1 policy at {POLICY}")
def test_garbage_is_collected_once_before_arming_never_between_the_run_and_its_damping(tmp_path, capsys) -> None:
    """A full collection holds the GIL for tens of milliseconds (every thread of the deploy stalls, the DDS
    re-publish thread included): it happens before the first tick, and not again before the damping loop."""
    import gc
    import time

    from robot_rl.data.mcap_log import TIMING
    from robot_rl.data.mcap_log_reader import read_log

    pytest.importorskip("mujoco")
    log = tmp_path / "run.mcap"
    collections: list[tuple[float, int]] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append((time.perf_counter(), info["generation"]))

    gc.callbacks.append(note)
    try:
        assert main(["deploy", "--policy", str(POLICY), "--duration-s", "0.4", "--log", str(log)]) == 0
    finally:
        gc.callbacks.remove(note)
    ticks = [r.data["t"] for r in read_log(log, (TIMING,))]
    assert len(ticks) == round(0.4 / 0.02) + round(0.5 / 0.02)  # the run's ticks, then the damping ticks
    assert any(t < ticks[0] and gen == 2 for t, gen in collections)  # the one before the loop
    assert [c for c in collections if ticks[0] <= c[0] <= ticks[-1]] == []
    assert "slowest tick: " in capsys.readouterr().out  # the tick trace's account of the worst tick
