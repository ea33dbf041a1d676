"""Every command answers bad input with one line naming what and where, and exit status 2: no traceback."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from robot_rl.cli import COMMANDS, main
from robot_rl.core.errors import RobotRLError

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


class ProbeError(RobotRLError, ValueError):
    """A user error no list in the CLI names: caught because of its base alone."""


def _refuses(path: str = "probe.yaml") -> int:
    """A subcommand that refuses its input."""
    raise ProbeError(f"{path}: key 'gain' must be positive, got -1")


def _has_a_bug() -> int:
    """A subcommand with a bug."""
    raise ValueError("not a user error")


@pytest.fixture
def probe_commands(monkeypatch):
    probe = types.ModuleType("robot_rl_cli_probe")
    probe.refuses, probe.has_a_bug = _refuses, _has_a_bug
    monkeypatch.setitem(sys.modules, probe.__name__, probe)
    monkeypatch.setitem(COMMANDS, "probe", {"refuses": f"{probe.__name__}:refuses",
                                            "bug": f"{probe.__name__}:has_a_bug"})


def test_any_robot_rl_error_from_a_subcommand_is_one_line_and_status_2(probe_commands, capsys):
    assert main(["probe", "refuses", "--path", "gains.yaml"]) == 2
    assert capsys.readouterr().err == "error: gains.yaml: key 'gain' must be positive, got -1\n"


def test_other_errors_keep_their_traceback(probe_commands):
    with pytest.raises(ValueError, match="not a user error"):
        main(["probe", "bug"])


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
