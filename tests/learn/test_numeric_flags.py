"""Every numeric flag of the learn/ and evaluation/ commands refuses a nonsense value with one line naming it,
exit 2, before anything runs or is written (``robot-rl finetune``'s own: tests/learn/residual/test_finetune.py)."""

from __future__ import annotations

import pytest

from robot_rl.cli import main

NONSENSE = {
    "train seed": (["train", "--seed", "-1"], "--seed"),
    "train physics threads": (["train", "--physics-threads", "0"], "--physics-threads"),
    "train torch threads": (["train", "--torch-threads", "-2"], "--torch-threads"),
    "train max minutes": (["train", "--max-minutes", "-1"], "--max-minutes"),
    "train max minutes nan": (["train", "--max-minutes", "nan"], "--max-minutes"),
    "play envs": (["play", "--checkpoint", "no.pt", "--num-envs", "0"], "--num-envs"),
    "play episodes": (["play", "--checkpoint", "no.pt", "--episodes", "-1"], "--episodes"),
    "play seed": (["play", "--checkpoint", "no.pt", "--seed", "-1"], "--seed"),
    "play video seconds": (["play", "--checkpoint", "no.pt", "--video-seconds", "inf"], "--video-seconds"),
    "play physics threads": (["play", "--checkpoint", "no.pt", "--physics-threads", "0"], "--physics-threads"),
    "play command nan": (["play", "--checkpoint", "no.pt", "--command", "0.5", "nan", "0"], "--command"),
    "train-bc epochs": (["train-bc", "--dataset", "no", "--epochs", "0"], "--epochs"),
    "train-bc chunk": (["train-bc", "--dataset", "no", "--chunk", "0"], "--chunk"),
    "train-bc seed": (["train-bc", "--dataset", "no", "--seed", "-1"], "--seed"),
    "train-bc eval episodes": (["train-bc", "--dataset", "no", "--eval-episodes", "-1"], "--eval-episodes"),
    "collect-demos seed": (["collect-demos", "--seed", "-1"], "--seed"),
    "collect-demos attempts": (["collect-demos", "--max-attempts-factor", "0"], "--max-attempts-factor"),
    "collect-demos attempts nan": (["collect-demos", "--max-attempts-factor", "nan"], "--max-attempts-factor"),
    "calibrate horizon": (["calibrate", "--log", "no.npz", "--horizon-ticks", "0"], "--horizon-ticks"),
    "calibrate windows": (["calibrate", "--log", "no.npz", "--windows", "-1"], "--windows"),
    "sim2sim time scale zero": (["sim2sim", "--policy", "no.onnx", "--time-scale", "0"], "--time-scale"),
    "sim2sim time scale negative": (["sim2sim", "--policy", "no.onnx", "--time-scale", "-1"], "--time-scale"),
    "sim2sim time scale nan": (["sim2sim", "--policy", "no.onnx", "--time-scale", "nan"], "--time-scale"),
    "demo time scale": (["demo", "--time-scale", "0"], "--time-scale"),
    "demo time scale inf": (["demo", "--time-scale", "inf"], "--time-scale"),
}


@pytest.mark.parametrize("case", NONSENSE)
def test_each_numeric_flag_refuses_nonsense_in_one_line(case, capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)  # anything a command wrote would land here
    argv, name = NONSENSE[case]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {name} must be ") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not any(tmp_path.iterdir())  # refused before anything started or was written


@pytest.mark.parametrize("metric", ["success=abc", "success=nan"])
def test_export_refuses_a_metric_that_is_not_a_number(metric, capsys, tmp_path) -> None:
    assert main(["export", "--checkpoint", "no.pt", "--out", str(tmp_path / "p.onnx"), "--metrics", metric]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --metrics success: ") and "finite number" in err and len(err.splitlines()) == 1
    assert not any(tmp_path.iterdir())
