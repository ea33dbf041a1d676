"""Every command answers bad input with one line naming what and where, and exit status 2: no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from robot_rl.cli import main

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "unknown robot": ["stand", "--robot", "nope"],
    "arm over Unitree DDS": ["bridge", "--robot", "panda"],
    "unknown task": ["train", "--task", "nope"],
    "no envs": ["train", "--task", "a1-flat", "--num-envs", "0"],
    "no demos": ["collect-demos", "--episodes", "0"],
    "expert's task": ["collect-demos", "--task", "panda-reach"],
    "missing log": ["log", "summarize", "/nonexistent/run.mcap"],
    "missing policy": ["sim2sim", "--policy", "/nonexistent/policy.onnx"],
    "residual bound": ["finetune", "--policy", "policies/a1_flat/policy.onnx", "--fraction", "2"],
    "bad shift": ["finetune", "--policy", "policies/a1_flat/policy.onnx", "--shift", "kp=abc"],
}


@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_and_status_2(argv, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the shipped policy, by the path a user types
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
