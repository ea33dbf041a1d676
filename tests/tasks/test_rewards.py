"""Reward terms: each is a pure function of batched inputs."""

import numpy as np
import pytest

from robot_rl.tasks.rewards import (
    REWARD_TERMS,
    RewardInputs,
    RewardsCfg,
    RewardTerm,
    compute_rewards,
    leg_phase_offsets,
    soft_limits,
)


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


def _term(name: str, inputs: RewardInputs, **params) -> np.ndarray:
    return REWARD_TERMS[name].compute(inputs, RewardTerm(name, 1.0, tuple(params.items())).settings())


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


def test_feet_swing_height_holds_each_foot_in_the_air_at_the_target():
    contact = np.array([[True, False], [False, False], [True, True]])
    height = np.array([[0.0, 0.08], [0.03, 0.18], [0.0, 0.0]])
    r = _term("feet_swing_height", _inputs(foot_contact=contact, foot_height=height))
    assert r == pytest.approx([0.0, 0.05**2 + 0.1**2, 0.0])  # feet on the ground cost nothing


def test_alive_pays_every_step_and_a_fall_only_ends_the_payments():
    falling = _inputs(terminated=np.array([False, True, False]))
    total, _ = compute_rewards(RewardsCfg(terms=(RewardTerm("alive", 0.15),)), falling)
    assert total == pytest.approx([0.15 * 0.02] * 3)


def test_unknown_reward_term_is_refused():
    with pytest.raises(ValueError, match="unknown reward term 'speed'"):
        RewardsCfg(terms=(RewardTerm("speed", 1.0),))
    with pytest.raises(ValueError, match="has no setting"):
        RewardTerm("reach_kernel", 1.0, (("sigma", 0.1),))  # its setting is sigma_m


def test_a_base_height_term_without_a_target_holds_the_robots_height():
    cfg = RewardsCfg(terms=(RewardTerm("base_height", -1.0), RewardTerm("base_height", -1.0, (("target_m", 0.3),))))
    filled = cfg.for_robot(0.25)
    assert [t.param("target_m") for t in filled.terms] == [0.25, 0.3]


def test_target_rate_excess_is_zero_within_the_safety_rate_limit_and_grows_past_it():
    step = 0.08
    last = np.zeros((3, 2))
    action = np.array([[0.08, -0.08], [0.12, 0.0], [0.24, -0.16]])  # at the limit; 0.5 over; 2 + 1 over
    r = _term("target_rate_excess", _inputs(action=action, last_action=last, max_action_step=step))
    assert r == pytest.approx([0.0, 0.5, 3.0])


def test_target_rate_excess_agrees_with_the_safety_chain_rate_filter():
    """Zero excess ⇔ the deploy chain's rate filter lets the step through unmodified (same spec numbers)."""
    from robot_rl.robots.spec import load_robot
    from robot_rl.safety.filters import SafetyLimits, rate_limit
    from robot_rl.tasks.registry import make_task

    task, spec = make_task("panda-reach"), load_robot("panda")
    step = task.action.max_step(spec.safety.max_target_rate_rad_s, spec.timing.policy_period_s)
    limits = SafetyLimits.from_spec(spec)
    active = np.ones(spec.num_joints, dtype=bool)
    rng = np.random.default_rng(0)
    for _ in range(200):
        last = rng.uniform(-1, 1, (1, spec.num_joints))
        action = last + rng.uniform(-2.5, 2.5, (1, spec.num_joints)) * step
        excess = _term("target_rate_excess", _inputs(n=1, j=spec.num_joints, action=action, last_action=last,
                                                      max_action_step=step))[0]
        previous = task.action.decode(last[0], spec.default_positions)
        _, event = rate_limit(task.action.decode(action[0], spec.default_positions), previous, limits, active)
        assert (excess > 1e-9) == (event is not None)


def test_push_terms_measure_the_object_to_goal_in_the_table_plane():
    goal = np.array([[0.6, 0.1, 0.0]] * 3)  # command = goal x, y (a third column is ignored)
    obj = np.array([[0.6, 0.1, 0.025], [0.62, 0.1, 0.5], [0.6, 0.2, 0.025]])  # at the goal; 2 cm (z ignored); 10 cm
    i = _inputs(command=goal, object_pos=obj)
    assert _term("push_distance", i) == pytest.approx([0.0, 0.02, 0.1])
    kernel = _term("push_kernel", i, sigma_m=0.05)
    assert kernel == pytest.approx([1.0, np.exp(-(0.4**2)), np.exp(-4.0)])
    assert list(_term("push_success", i, tolerance_m=0.03)) == [1.0, 1.0, 0.0]
    assert list(_term("push_success", i, tolerance_m=0.015)) == [1.0, 0.0, 0.0]


def test_tool_to_object_is_the_3d_distance():
    obj = np.array([[0.5, 0.0, 0.025]] * 2)
    tool = np.array([[0.5, 0.0, 0.025], [0.5, 0.03, 0.065]])
    assert _term("tool_to_object", _inputs(n=2, object_pos=obj, tool_pos=tool)) == pytest.approx([0.0, 0.05])


def test_panda_push_rewards_use_the_tasks_success_radius():
    from robot_rl.tasks import panda_push
    from robot_rl.tasks.registry import make_task

    cfg = make_task("panda-push").rewards
    assert next(t for t in cfg.terms if t.name == "push_success").param("tolerance_m") == panda_push.SUCCESS_RADIUS_M
    weights = {t.name: t.weight for t in cfg.terms}
    assert weights["push_distance"] < 0 < weights["push_success"] and weights["push_kernel"] > 0
    # closer to the goal is always better: the summed reward rises as the cube approaches it
    goal = np.tile([0.6, 0.0], (4, 1))
    obj = np.array([[0.6 + d, 0.0, 0.025] for d in (0.2, 0.1, 0.04, 0.0)])
    total, _ = compute_rewards(cfg, _inputs(n=4, j=7, command=goal, object_pos=obj, tool_pos=obj.copy()))
    assert np.all(np.diff(total) > 0)


def test_chain_clips_counts_the_targets_the_safety_chain_would_move():
    """The batched law against the chain's own filters (rate, then position, then velocity-aware) on one robot."""
    from robot_rl.robots.spec import load_robot
    from robot_rl.safety.filters import (
        SafetyLimits,
        position_limit,
        rate_limit,
        velocity_aware_bounds,
        velocity_aware_limit,
    )

    spec = load_robot("a1")
    limits = SafetyLimits.from_spec(spec)
    rng = np.random.default_rng(0)
    n, j, scale, dt = 400, spec.num_joints, 0.25, spec.timing.policy_period_s
    default = spec.default_positions
    # Inside the soft range: outside it the chain widens its bounds to the measured position (a robot resting on its
    # stops), which the count does not model.
    q = np.clip(default + rng.normal(scale=0.3, size=(n, j)), limits.soft_lower, limits.soft_upper)
    dq = rng.normal(scale=8.0, size=(n, j))
    sent = rng.normal(scale=1.0, size=(n, j))
    action = sent + rng.normal(scale=0.3, size=(n, j))
    max_step = limits.max_step / scale
    lower, upper = velocity_aware_bounds(q, dq, limits, position=(limits.soft_lower, limits.soft_upper))
    inputs = _inputs(n=n, j=j, q=q, dq=dq, default_q=default, action=action, sent_action=sent, dt=dt,
                     max_action_step=float(np.max(max_step)), target_lower=lower, target_upper=upper,
                     action_scale=scale)
    count = _term("chain_clips", inputs)
    assert 0 < count.mean() < j  # some clipped, not all
    active = np.ones(j, dtype=bool)
    for k in range(n):
        target = default + scale * action[k]
        ref = default + scale * sent[k]
        moved = np.abs(action[k] - sent[k]) > max_step
        _, rate_event = rate_limit(target, ref, limits, active)
        assert (rate_event is not None) == bool(moved.any())
        lo_ok = position_limit(target, q[k], limits, active)[1] is None
        vel_ok = velocity_aware_limit(target, q[k], dq[k], limits, active)[1] is None
        if count[k] == 0:
            assert lo_ok and vel_ok and not moved.any()
        elif not moved.any():
            assert not (lo_ok and vel_ok)


def test_feet_phase_contact_counts_the_feet_on_the_ground_in_stance_and_in_the_air_in_swing():
    # phase 0.2: the left foot (index 0) in stance, the right half a period later (0.7) in swing
    contact = np.array([[True, False], [True, True], [False, True], [False, False]])
    r = _term("feet_phase_contact", _inputs(n=4, foot_contact=contact, gait_phase=np.full(4, 0.2)),
              stance_fraction=0.55)
    assert r.tolist() == [2.0, 1.0, 0.0, 1.0]
    # phase 0.5: both in stance (0.5 and 0.0 < 0.55); at 0.6 only the right (0.1); standing pays at any command
    both = np.ones((2, 2), dtype=bool)
    assert _term("feet_phase_contact", _inputs(n=2, foot_contact=both, gait_phase=np.array([0.5, 0.6]))
                 ).tolist() == [2.0, 1.0]


def test_a_quadrupeds_clock_is_a_trot_and_a_bipeds_alternates():
    # Feet as the specs list them: FR, FL, RR, RL (diagonals FR+RL and FL+RR together); left, right.
    assert leg_phase_offsets(4).tolist() == [0.0, 0.5, 0.5, 0.0]
    assert leg_phase_offsets(2).tolist() == [0.0, 0.5]
    # phase 0.2, stance half the period: FR and RL on the ground, FL and RR in the air
    trot = np.array([[True, False, False, True], [True, True, True, True], [False, True, True, False]])
    r = _term("feet_phase_contact", _inputs(n=3, foot_contact=trot, gait_phase=np.full(3, 0.2)), stance_fraction=0.5)
    assert r.tolist() == [4.0, 2.0, 0.0]


@pytest.mark.parametrize("robot", ["a1", "go2", "g1"])
def test_every_specs_feet_are_left_right_pairs_on_one_side_first(robot):
    """leg_phase_offsets reads the feet in the spec's order as left/right pairs, the same side first in each pair:
    a spec listing them otherwise (FR, RR, FL, RL; or FR, FL, RL, RR) would train a pace, not a trot."""
    from robot_rl.robots.joint_mirror import partner_name, side_of
    from robot_rl.robots.spec import load_robot

    feet = load_robot(robot).sim_model.foot_bodies
    firsts, seconds = feet[0::2], feet[1::2]
    assert [partner_name(f) for f in firsts] == list(seconds)  # pairs: each foot, then its mirror partner
    assert len({side_of(f) for f in firsts}) == 1 and None not in {side_of(f) for f in firsts}  # one side first


def test_every_term_computes_from_the_fields_it_declares_it_reads():
    """``reads`` is how the on-robot reward knows which terms a robot's state cannot feed (it drops them): a term
    that reads an optional input it does not declare would fail there instead (the G1's residual path did)."""
    import dataclasses

    full = _inputs(n=3, j=2, foot_contact=np.array([[True, False]] * 3), gait_phase=np.full(3, 0.3),
                   foot_height=np.full((3, 2), 0.05),
                   object_pos=np.zeros((3, 3)), tool_pos=np.zeros((3, 3)), target_lower=-np.ones(2),
                   target_upper=np.ones(2), max_action_step=0.3, action_scale=0.25)
    # What the on-robot reward always provides, besides the required fields.
    always = {"max_action_step", "sent_action", "target_lower", "target_upper", "action_scale"}
    optional = [f.name for f in dataclasses.fields(RewardInputs) if f.default is None and f.name not in always]
    assert "foot_contact" in optional and "base_lin_vel" in optional
    for name, term in REWARD_TERMS.items():
        assert set(term.reads) <= set(optional), name
        inputs = dataclasses.replace(full, **{f: None for f in optional if f not in term.reads})
        settings = RewardTerm(name, 1.0, (("target_m", 0.3),) if name == "base_height" else ()).settings()
        assert np.all(np.isfinite(term.compute(inputs, settings))), name
