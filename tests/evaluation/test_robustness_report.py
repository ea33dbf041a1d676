"""The suite's table: what it writes parses back row for row, with its verdict and the nominal runs' spread."""

from __future__ import annotations

import math

from robot_rl.evaluation import robustness as rb
from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.perturbed_robot import Perturbation
from robot_rl.evaluation.robustness_report import parse_suite_table, suite_markdown


def _result(c, errors, ratio, passed):
    return rb.ConditionResult(c, len(errors), 0, ratio, 0.01, 0, 0, passed, tuple(errors))


def test_table_round_trips_and_reports_the_nominal_spread():
    nominal = rb.Condition("nominal", "gate scenario", "mujoco", 2, gate_tracking=True)
    corner = rb.Condition("DR corner", "kp ×0.9", "mujoco", 2, Perturbation(kp_scale=0.9), "kp_scale", ratio=True)
    shove = rb.Condition("shove", "1 m/s from 0°, walking", "mujoco", 2, shove_m_s=1.0, walking=True)
    results = [_result(nominal, (0.2, 0.3), 1.0, True), _result(corner, (0.5, 0.5), 0.5, False),
               _result(shove, (0.9, 0.9), math.nan, True)]
    suite = rb.SuiteResult("p.onnx", "a1-flat", "a1", results, 12.0, 2, 6, 60.0, [])
    text = suite_markdown(suite, GateConfig(), "robot-rl sim2sim --suite full")
    passed, rows = parse_suite_table(text)
    assert not passed and "1 of 3 conditions fail" in text
    assert [r["result"] for r in rows] == ["PASS", "FAIL", "PASS"]
    assert rows[1]["tracking ratio"] == "0.500" and rows[2]["tracking ratio"] == "—"
    # the ratio's denominator beside it: each condition's mean error over its runs
    assert [r["tracking error"] for r in rows] == ["0.250", "0.500", "0.900"]
    # mean 0.25 over single runs of 0.3 and 0.2: 0.83–1.25
    assert "mujoco 0.83–1.25" in text


def test_a_run_without_a_tracking_error_leaves_the_mean_unmeasured():
    corner = rb.Condition("DR corner", "kp ×0.9", "mujoco", 2, Perturbation(kp_scale=0.9), "kp_scale", ratio=True)
    result = _result(corner, (0.5, math.nan), math.nan, False)
    assert math.isnan(result.mean_error)
    suite = rb.SuiteResult("p.onnx", "a1-flat", "a1", [result], 12.0, 2, 2, 60.0, [])
    _, rows = parse_suite_table(suite_markdown(suite, GateConfig(), "robot-rl sim2sim --suite full"))
    assert rows[0]["tracking error"] == "—" and rows[0]["result"] == "FAIL"


def test_a_table_written_before_the_error_column_still_parses():
    """Tables committed next to policies (and users' own) from before the column: same rows, error unmeasured."""
    text = ("| group | condition | setting | runs | falls | tracking ratio | interventions / tick (worst) | result |\n"
            "|---|---|---|---:|---:|---:|---:|---|\n"
            "| DR corner | kp ×0.9 | mujoco | 10 | 0 | 0.912 | 0.001 | PASS |\n"
            "| shove | 1 m/s from 0°, walking | mujoco | 10 | 2 | — | 0.004 | FAIL |\n"
            "\n**verdict: FAIL** — 1 of 2 conditions fail.\n")
    passed, rows = parse_suite_table(text)
    assert not passed
    assert [(r["condition"], r["tracking ratio"], r["falls"], r["result"]) for r in rows] == [
        ("kp ×0.9", "0.912", "0", "PASS"), ("1 m/s from 0°, walking", "—", "2", "FAIL")]
    assert {r["tracking error"] for r in rows} == {"—"}
