"""The sim-residual sweep: variants parsed from the command line, each trained in the calibrated sim and scored
through the benchmark's harness against the base's final-eval scores (a tiny variant: plumbing, not skill)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_variants_parse_into_settings(benchmark_module):
    parse = benchmark_module("sweep_sim_residual").parse_variant
    assert parse("base=") == ("base", {})
    assert parse("wide=fraction:0.2,seed:1,randomize:false") == ("wide", {"fraction": 0.2, "seed": 1,
                                                                          "randomize": False})


@pytest.mark.timeout(180)
def test_a_tiny_variant_trains_and_is_scored_against_the_base(tmp_path, benchmark_module):
    results = {"task": "a1-flat", "base_onnx": str(ROOT / "policies/a1_flat/policy.onnx"),
               "shift": {"kp_scale": 0.7, "kd_scale": 1.0, "payload_kg": 4.0, "latency_steps": 2,
                         "friction_scale": 0.3},
               "final_eval": {"episodes": 1, "base_nominal": {"return": 20.0}, "base_real": {"return": 10.0}}}
    (tmp_path / "results.json").write_text(json.dumps(results))
    out = tmp_path / "sweep.json"
    sweep = benchmark_module("sweep_sim_residual")
    assert sweep.main(["--results", str(tmp_path / "results.json"), "--calibrated", "kp=0.7,latency=2",
                       "--iterations", "1", "--threads", "1", "--variant",
                       "tiny=num_envs:4,steps_per_env:4,fraction:0.2", "--out", str(out)]) == 0
    (line,) = json.loads(out.read_text())
    assert line["name"] == "tiny" and line["settings"]["fraction"] == 0.2 and line["sim_transitions"] == 16
    assert line["recovered"] == pytest.approx((line["return"] - 10.0) / 10.0)


def test_the_comparison_plot_reads_each_seeds_points_from_the_run_names(tmp_path, benchmark_module):
    plot = benchmark_module("plot_residual_calibrated")
    runs = {"calibrated start α 0.2, seed 1: sim residual, 3,000 robot transitions": {"recovered": 0.89},
            "calibrated start α 0.2, seed 1: + SAC on the robot (anchor 1), 20,982 transitions": {"recovered": 0.91},
            "calibrated start α 0.2, seed 0: + SAC on the robot (anchor 10), 20,982 transitions": {"recovered": 0.8},
            "residual from scratch, seed 0, 20,276 transitions": {"recovered": 0.5}}
    assert plot.calibrated_points({"runs": runs}, "calibrated start α 0.2") == {1: [(3000, 0.89), (20982, 0.91)]}
    (tmp_path / "results.json").write_text(json.dumps({"final_eval": {"runs": runs}}))
    assert plot.main([str(tmp_path / "results.json"), "--png", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 10_000
