"""Reward terms: each is a pure function of batched inputs."""

import numpy as np
import pytest

from robot_rl.tasks.rewards import REWARD_TERMS, RewardInputs, RewardsCfg, RewardTerm, compute_rewards, soft_limits


def _inputs(n: int = 3, j: int = 2, **over) -> RewardInputs:
    z = np.zeros((n, j))
    base = dict(
        dt=0.02, command=np.zeros((n, 3)), q=z.copy(), dq=z.copy(), last_dq=z.copy(), default_q=np.zeros(j),
        q_soft_lower=-np.ones(j), q_soft_upper=np.ones(j), torque=z.copy(), action=z.copy(),
        last_action=z.copy(), terminated=np.zeros(n, dtype=bool), base_lin_vel=np.zeros((n, 3)),
        base_ang_vel=np.zeros((n, 3)), projected_gravity=np.tile([0.0, 0.0, -1.0], (n, 1)),
        base_height=np.full(n, 0.3), first_contact=np.zeros((n, 4), dtype=bool), air_time=np.zeros((n, 4)),
        ee_error=np.zeros(n),
    )
    base.update(over)
    return RewardInputs(**base)


def _term(name: str, inputs: RewardInputs, **cfg) -> np.ndarray:
    return REWARD_TERMS[name](inputs, RewardsCfg(terms=(), **cfg))


def test_velocity_tracking_is_one_when_tracking_and_decays_with_error():
    cmd = np.array([[1.0, 0.0, 0.5]] * 3)
    vel = np.array([[1.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
    ang = np.array([[0.0, 0.0, 0.5]] * 3)
    r = _term("tracking_lin_vel", _inputs(command=cmd, base_lin_vel=vel, base_ang_vel=ang))
    assert r[0] == pytest.approx(1.0)
    assert r[0] > r[1] > r[2]
    assert r[1] == pytest.approx(np.exp(-0.25 / 0.25))
    assert np.allclose(_term("tracking_ang_vel", _inputs(command=cmd, base_ang_vel=ang)), 1.0)


def test_feet_air_time_rewards_long_steps_only_when_asked_to_move():
    first = np.array([[True, False, False, False]] * 3)
    air = np.array([[0.8, 0, 0, 0], [0.2, 0, 0, 0], [0.8, 0, 0, 0]])
    cmd = np.array([[1.0, 0, 0], [1.0, 0, 0], [0.0, 0, 0]])
    r = _term("feet_air_time", _inputs(first_contact=first, air_time=air, command=cmd))
    assert r == pytest.approx([0.3, -0.3, 0.0])


def test_dof_pos_limits_counts_only_the_excess():
    q = np.array([[0.5, 0.0], [1.5, 0.0], [-1.2, 1.1]])
    assert _term("dof_pos_limits", _inputs(q=q)) == pytest.approx([0.0, 0.5, 0.3])
    lo, hi = soft_limits(np.array([-1.0]), np.array([3.0]), 0.5)
    assert (lo[0], hi[0]) == (0.0, 2.0)


def test_reach_terms():
    err = np.array([0.0, 0.019, 0.5])
    assert _term("reach_success", _inputs(ee_error=err)) == pytest.approx([1, 1, 0])
    kernel = _term("reach_kernel", _inputs(ee_error=err))
    assert kernel[0] == 1.0 and kernel[0] > kernel[1] > kernel[2]


def test_weights_are_per_second_and_only_positive_clips_the_sum():
    inputs = _inputs(action=np.ones((3, 2)))  # action_rate = 2 per env
    cfg = RewardsCfg(terms=(RewardTerm("action_rate", -1.0),))
    total, parts = compute_rewards(cfg, inputs)
    assert total == pytest.approx([-2.0 * 0.02] * 3)
    assert parts["action_rate"] == pytest.approx(total)
    clipped, _ = compute_rewards(RewardsCfg(terms=cfg.terms, only_positive=True), inputs)
    assert np.all(clipped == 0.0)


def test_unknown_reward_term_is_refused():
    with pytest.raises(ValueError, match="unknown reward term 'speed'"):
        RewardsCfg(terms=(RewardTerm("speed", 1.0),))
