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


FINETUNE_OPTIONS = {"-h", "--policy", "--robot", "--interface", "--transitions", "--shift", "--run-dir", "--resume",
                    "--init-from", "--eval-every", "--eval-episodes", "--seed", "--teleop", "--fifo-priority",
                    "--fraction", "--lr", "--utd", "--actor-warmup", "--anchor-penalty", "--calibrate-chain"}


@pytest.mark.parametrize("preset", [[], ["scratch"], ["calibrated"]], ids=["default", "scratch", "calibrated"])
def test_finetune_help_lists_at_most_20_options(preset, capsys):
    """The product's options: what a user picks per run. Variants the benchmarks did not support are gone and
    measured settings are presets (robot-rl finetune calibrated), not flags."""
    import re

    with pytest.raises(SystemExit) as done:
        main(["finetune", *preset, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    options = re.findall(r"^[^\w\s-]?\s{1,2}(--?[a-z][\w-]*)", out, re.MULTILINE)  # each option's first flag
    assert len(options) == len(set(options)) <= 20, options
    assert set(options) == FINETUNE_OPTIONS
    assert "calibrated" in out and "scratch" in out  # the presets are named in the help
