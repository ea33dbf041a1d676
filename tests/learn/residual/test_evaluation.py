"""The one scoring harness of residual runs: fixed command sets and the per-set summary."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.learn.residual.episodes import EpisodeResult
from robot_rl.learn.residual.evaluation import eval_commands, summarize
from robot_rl.tasks.registry import make_task


def test_command_sets_are_fixed_per_seed_and_differ_between_seeds():
    task = make_task("a1-flat")
    first, again, other = eval_commands(task, 8), eval_commands(task, 8), eval_commands(task, 8, seed=777)
    assert first.shape == (8, 3)
    np.testing.assert_array_equal(first, again)  # every method is scored on the same commands
    assert not np.allclose(first, other)  # the second look (final-eval) is on commands not seen before


def test_walking_summary_counts_falls_and_averages_returns_and_lengths():
    walked = EpisodeResult(ended_by="time_limit", ticks=1000, episode_return=20.0, vel_error_m_s=0.1)
    fell = EpisodeResult(ended_by="failure", ticks=200, episode_return=2.0, vel_error_m_s=0.5)
    out = summarize([walked, fell, walked])
    assert out["episodes"] == 3 and out["falls"] == 1
    assert out["return"] == pytest.approx(14.0) and out["ticks"] == pytest.approx(2200 / 3)
    assert out["vel_error_m_s"] == pytest.approx(0.7 / 3)
    assert out["ended_by"] == {"time_limit": 2, "failure": 1}
    assert "success" not in out and "tail_tip_error_m" not in out  # no reach or push metrics for walking


def test_reach_summary_scores_success_on_the_final_tip_error_and_skips_the_first_second():
    near = EpisodeResult(ended_by="time_limit", ticks=100, final_tip_error_m=0.01, tail_tip_error_m=0.012,
                         tip_errors=[0.3] * 50 + [0.01] * 50)
    far = EpisodeResult(ended_by="time_limit", ticks=100, final_tip_error_m=0.05, tail_tip_error_m=0.05,
                        tip_errors=[0.05] * 100)
    out = summarize([near, far], dt=0.02, success_m=0.02)
    assert out["success"] == 0.5
    assert out["settled_tip_error_m"] == pytest.approx((0.01 + 0.05) / 2)  # the first 50 ticks (1 s) left out
