"""The residual benchmark's real-time phase on the A1: a legged robot ramps up from its feet (it used to wait
forever for a ramp that fell over), the loop survives the learner's SIGKILL and ends on the base."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_residual
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return bench_residual


def test_gap_decomposition_moves_one_part_at_a_time():
    from robot_rl.learn.residual.shifted_sim import RealityShift

    shift = RealityShift(kp_scale=0.7, payload_kg=4.0, latency_steps=2)
    parts = _bench().shift_parts(shift)
    assert set(parts) == {f"{w} {n}" for w in ("only", "all but") for n in ("kp_scale", "payload_kg", "latency_steps")}
    assert parts["only kp_scale"] == RealityShift(kp_scale=0.7)
    assert parts["all but payload_kg"] == RealityShift(kp_scale=0.7, latency_steps=2)
    assert _bench().shift_parts(RealityShift()) == {}  # the nominal robot has no parts


@pytest.mark.timeout(180)
def test_loop_timing_on_the_a1_survives_the_learner_kill():
    bench_residual = _bench()
    from robot_rl.robots.spec import load_robot
    from robot_rl.tasks.registry import make_task

    timing = bench_residual.loop_timing(ROOT / "policies/a1_flat/policy.onnx", make_task("a1-flat"), seconds=6.0,
                                        kill_at_s=3.0)
    period = load_robot("a1").timing.policy_period_s
    assert timing["ticks"] == round(6.0 / period) and timing["kill_tick"] == round(3.0 / period)
    assert timing["mode_at_end"] == "running"  # the base kept walking after the kill
    assert timing["fallback_ticks"] > 0  # … alone, once the learner's heartbeat went stale (2 s)
    assert timing["syncs"] > 0 and timing["runtime_step_us"]["p50"] > 0
