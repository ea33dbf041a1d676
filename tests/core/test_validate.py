"""core.validate: range checks that name the flag; and every numeric flag of the commands outside learn/ and
evaluation/ refuses a nonsense value with one line naming it, exit 2, before anything runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from robot_rl.cli import main
from robot_rl.core.errors import RobotRLError
from robot_rl.core.validate import ArgumentError, flag, in_range, non_negative, positive

ROOT = Path(__file__).resolve().parents[2]


def test_flag_is_the_spelling_tyro_shows() -> None:
    assert flag("duration_s") == "--duration-s" and flag("seed") == "--seed"


@pytest.mark.parametrize(("check", "value", "message"), [
    (positive, 0.0, "--x must be a finite number > 0, got 0.0"),
    (positive, -1, "--x must be a finite number > 0, got -1"),
    (positive, math.nan, "--x must be a finite number > 0, got nan"),
    (positive, math.inf, "--x must be a finite number > 0, got inf"),
    (non_negative, -1e-9, "--x must be a finite number >= 0, got -1e-09"),
    (non_negative, -math.inf, "--x must be a finite number >= 0, got -inf"),
    (positive, "3", "--x must be a number > 0, got '3'"),
    (positive, True, "--x must be a number > 0, got True"),
])
def test_out_of_range_values_are_refused_naming_the_flag(check, value, message) -> None:
    with pytest.raises(ArgumentError) as info:
        check(x=value)
    assert str(info.value) == message
    assert isinstance(info.value, RobotRLError) and isinstance(info.value, ValueError)


def test_in_range_and_accepted_values() -> None:
    positive(a=1e-9, b=3, c=None)
    non_negative(a=0, b=0.0, c=None)
    in_range(0.0, 1.0, p=0.0, q=1.0, r=None)
    with pytest.raises(ArgumentError, match=r"^--drop must be a finite number in \[0, 1\], got 1\.5$"):
        in_range(0.0, 1.0, drop=1.5)
    with pytest.raises(ArgumentError, match="--q"):
        in_range(0, 1, p=0.5, q=-0.5)  # the first bad one is named


NONSENSE = {
    "stand duration negative": (["stand", "--duration-s", "-1"], "--duration-s"),
    "stand duration nan": (["stand", "--duration-s", "nan"], "--duration-s"),
    "stand duration inf": (["stand", "--duration-s", "inf"], "--duration-s"),
    "deploy duration zero": (["deploy", "--duration-s", "0"], "--duration-s"),
    "deploy duration nan": (["deploy", "--duration-s", "nan"], "--duration-s"),
    "deploy domain negative": (["deploy", "--domain-id", "-1"], "--domain-id"),
    "deploy domain too large": (["deploy", "--domain-id", "233"], "--domain-id"),
    "deploy fifo priority": (["deploy", "--fifo-priority", "1000"], "--fifo-priority"),
    "bridge duration": (["bridge", "--duration-s", "-1"], "--duration-s"),
    "bridge drop": (["bridge", "--drop", "1.5"], "--drop"),
    "bridge drop negative": (["bridge", "--drop", "-0.1"], "--drop"),
    "bridge delay": (["bridge", "--delay-ms", "-5"], "--delay-ms"),
    "bridge freeze": (["bridge", "--freeze-at-s", "-1"], "--freeze-at-s"),
    "bridge kill nan": (["bridge", "--kill-at-s", "nan"], "--kill-at-s"),
    "bridge corrupt command": (["bridge", "--corrupt-command", "2"], "--corrupt-command"),
    "bridge domain": (["bridge", "--domain-id", "500"], "--domain-id"),
    "bridge mode machine": (["bridge", "--mode-machine", "256"], "--mode-machine"),
    "bridge seed": (["bridge", "--seed", "-1"], "--seed"),
    "teleop duration": (["teleop", "--duration-s", "-1"], "--duration-s"),
    "teleop duration inf": (["teleop", "--duration-s", "inf"], "--duration-s"),
    "teleop fps zero": (["teleop", "--fps", "0"], "--fps"),
    "teleop fps negative": (["teleop", "--fps", "-50"], "--fps"),
    "teleop seed": (["teleop", "--seed", "-1"], "--seed"),
}


@pytest.mark.parametrize("case", NONSENSE)
def test_each_numeric_flag_refuses_nonsense_in_one_line(case, capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # the default policy path is relative to the repository
    argv, name = NONSENSE[case]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith(f"error: {name} must be ") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "deploy:" not in captured.out  # refused before anything started
