"""The observation definition shared by training and deployment."""

import numpy as np
import pytest

from robot_rl.robots.spec import load_robot
from robot_rl.tasks.observations import (
    OBS_TERMS,
    ObservationBuilder,
    ObservationLayout,
    ObsInputs,
    ObsTerm,
    gait_phase,
    projected_gravity,
)


def _inputs(n: int, j: int, c: int, rng: np.random.Generator, lin_vel: bool = True) -> ObsInputs:
    quat = rng.normal(size=(n, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    return ObsInputs(
        q=rng.normal(size=(n, j)),
        dq=rng.normal(size=(n, j)),
        default_q=rng.normal(size=j),
        base_quat=quat,
        base_ang_vel=rng.normal(size=(n, 3)),
        command=rng.normal(size=(n, c)),
        last_action=rng.normal(size=(n, j)),
        base_lin_vel=rng.normal(size=(n, 3)) if lin_vel else None,
        object_pos=rng.normal(size=(n, 3)),
        gait_phase=rng.uniform(0, 1, n),
    )


def _rotation_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def test_projected_gravity_matches_rotation_matrix():
    rng = np.random.default_rng(0)
    quats = rng.normal(size=(50, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    got = projected_gravity(quats)
    for q, g in zip(quats, got, strict=True):
        np.testing.assert_allclose(g, _rotation_matrix(q).T @ np.array([0.0, 0.0, -1.0]), atol=1e-12)
    np.testing.assert_allclose(projected_gravity(np.array([[1.0, 0, 0, 0]])), [[0, 0, -1]])


def test_layout_size_counts_history_and_robot_dimensions():
    spec = load_robot("a1")
    layout = ObservationLayout(
        (ObsTerm("base_ang_vel", history_length=3), ObsTerm("command"), ObsTerm("joint_pos_rel", history_length=2))
    )
    assert layout.term_sizes(spec.num_joints, 3, spec.num_joints) == [3, 3, 12]
    assert layout.size(spec.num_joints, 3, spec.num_joints) == 3 * 3 + 3 + 12 * 2


def test_unknown_term_and_bad_history_are_refused():
    with pytest.raises(ValueError, match="unknown observation term 'foot_height'"):
        ObservationLayout((ObsTerm("foot_height"),))
    with pytest.raises(ValueError, match="history_length"):
        ObservationLayout((ObsTerm("joint_vel", history_length=0),))


def test_history_is_term_major_oldest_first_and_reset_fills():
    layout = ObservationLayout((ObsTerm("base_ang_vel", history_length=2), ObsTerm("command", scale=2.0)))
    builder = ObservationBuilder(layout, num_envs=2, num_joints=1, num_commands=1, num_actions=1)
    rng = np.random.default_rng(1)
    first = _inputs(2, 1, 1, rng)
    obs1 = builder.compute(first).copy()
    # A fresh env's history is filled with its first frame, not zeros (no fake "impulse" at start).
    np.testing.assert_allclose(obs1[:, 0:3], first.base_ang_vel, rtol=1e-6)
    np.testing.assert_allclose(obs1[:, 3:6], first.base_ang_vel, rtol=1e-6)
    second = _inputs(2, 1, 1, rng)
    obs2 = builder.compute(second).copy()
    np.testing.assert_allclose(obs2[:, 0:3], first.base_ang_vel, rtol=1e-6)  # oldest first
    np.testing.assert_allclose(obs2[:, 3:6], second.base_ang_vel, rtol=1e-6)
    np.testing.assert_allclose(obs2[:, 6], 2.0 * second.command[:, 0], rtol=1e-6)
    builder.reset(np.array([1]))
    third = _inputs(2, 1, 1, rng)
    obs3 = builder.compute(third)
    np.testing.assert_allclose(obs3[0, 0:3], second.base_ang_vel[0], rtol=1e-6)  # env 0 keeps history
    np.testing.assert_allclose(obs3[1, 0:3], third.base_ang_vel[1], rtol=1e-6)  # env 1 was reset


def test_scale_clip_and_noise_only_when_enabled():
    layout = ObservationLayout((ObsTerm("joint_vel", scale=0.5, clip=1.0, noise=0.1),))
    rng = np.random.default_rng(2)
    inp = _inputs(4, 12, 3, rng)
    inp.dq[:] = 10.0
    clean = ObservationBuilder(layout, 4, 12, 3, 12).compute(inp)
    assert np.all(clean == 1.0)  # 10 · 0.5 = 5, clipped to 1
    inp.dq[:] = 0.2
    noisy = ObservationBuilder(layout, 4, 12, 3, 12, rng=np.random.default_rng(3), noise=True).compute(inp)
    assert np.all(np.abs(noisy - 0.1) <= 0.05 + 1e-7) and np.std(noisy) > 0


def test_base_lin_vel_without_a_measurement_says_why():
    layout = ObservationLayout((ObsTerm("base_lin_vel"),))
    builder = ObservationBuilder(layout, 1, 12, 3, 12)
    with pytest.raises(ValueError, match="does not measure"):
        builder.compute(_inputs(1, 12, 3, np.random.default_rng(0), lin_vel=False))


def test_gait_phase_is_the_sine_and_cosine_of_the_clock_and_its_absence_says_why():
    inp = _inputs(4, 3, 3, np.random.default_rng(3))
    inp.gait_phase = gait_phase(np.array([0.0, 0.2, 0.8, 1.0]), 0.8)  # s into the episode, a 0.8 s period
    np.testing.assert_allclose(inp.gait_phase, [0.0, 0.25, 0.0, 0.25], atol=1e-12)
    obs = ObservationBuilder(ObservationLayout((ObsTerm("gait_phase"),), gait_period_s=0.8), 4, 3, 3, 3).compute(inp)
    np.testing.assert_allclose(obs, [[0, 1], [1, 0], [0, 1], [1, 0]], atol=1e-6)
    inp.gait_phase = None
    with pytest.raises(ValueError, match="gait_period_s"):
        ObservationBuilder(ObservationLayout((ObsTerm("gait_phase"),), gait_period_s=0.8), 4, 3, 3, 3).compute(inp)


def test_every_registered_term_has_the_width_it_declares():
    rng = np.random.default_rng(4)
    inp = _inputs(3, 7, 2, rng)
    for name, term in OBS_TERMS.items():
        assert term.compute(inp).shape == (3, term.size(7, 2, 7)), name


def _reference_observations(layout: ObservationLayout, frames: list[ObsInputs], sizes: list[int]) -> np.ndarray:
    """The last observation, term by term from OBS_TERMS[...].compute: the definition the builder's
    preallocated path must reproduce to the bit (history filled with the first frame)."""
    parts = []
    for term, size in zip(layout.terms, sizes, strict=True):
        values = [np.asarray(OBS_TERMS[term.name].compute(f), dtype=np.float64) * term.scale for f in frames]
        if term.clip is not None:
            values = [np.clip(v, -term.clip, term.clip) for v in values]
        h = term.history_length
        window = ([values[0]] * h + values)[-h:]
        parts.append(np.concatenate(window, axis=1).reshape(len(values[0]), h * size))
    return np.concatenate(parts, axis=1).astype(np.float32)


@pytest.mark.parametrize("num_envs", [1, 3])
def test_the_preallocated_builder_equals_the_term_definitions_to_the_bit(num_envs):
    layout = ObservationLayout((
        ObsTerm("base_ang_vel", scale=0.25, history_length=3), ObsTerm("projected_gravity", clip=0.5),
        ObsTerm("command", scale=2.0), ObsTerm("joint_pos_rel", history_length=2),
        ObsTerm("joint_vel", scale=0.05, clip=0.3), ObsTerm("last_action"), ObsTerm("object_pos", history_length=4),
        ObsTerm("gait_phase", scale=0.5, history_length=2),
    ), gait_period_s=0.8)
    builder = ObservationBuilder(layout, num_envs, 5, 3, 5)
    rng = np.random.default_rng(26)
    frames: list[ObsInputs] = []
    for _ in range(6):
        frames.append(_inputs(num_envs, 5, 3, rng))
        frames[-1].base_quat *= rng.uniform(0.9, 1.1)  # not quite unit: the formula, not the rotation
        got = builder.compute(frames[-1])
        np.testing.assert_array_equal(got, _reference_observations(layout, frames, builder.sizes))
    builder.reset()
    frames = [_inputs(num_envs, 5, 3, rng)]
    np.testing.assert_array_equal(builder.compute(frames[0]), _reference_observations(layout, frames, builder.sizes))


def test_nan_and_inf_pass_through_scale_and_clip_as_before():
    layout = ObservationLayout((ObsTerm("joint_vel", scale=0.5, clip=1.0), ObsTerm("command")))
    inp = _inputs(1, 3, 2, np.random.default_rng(5))
    inp.dq[0] = [np.nan, np.inf, -np.inf]
    inp.command[0] = [np.nan, np.inf]
    obs = ObservationBuilder(layout, 1, 3, 2, 3).compute(inp)[0]
    assert np.isnan(obs[0]) and obs[1] == 1.0 and obs[2] == -1.0  # clipped terms clip inf, keep NaN
    assert np.isnan(obs[3]) and obs[4] == np.inf  # unclipped terms keep both


@pytest.mark.parametrize("num_envs", [1, 3])
def test_a_bound_builder_equals_an_unbound_one_to_the_bit(num_envs):
    """bind(): the same observations as compute() without it, with history, scale, clip, NaN / ±inf, a field set to
    None and back (bound again, as the controller does), and other inputs passed to the bound builder."""
    layout = ObservationLayout((
        ObsTerm("base_ang_vel", scale=0.25, history_length=2), ObsTerm("projected_gravity"), ObsTerm("command"),
        ObsTerm("joint_pos_rel", clip=0.7), ObsTerm("joint_vel", scale=0.05), ObsTerm("last_action"),
        ObsTerm("base_lin_vel"),
    ))
    bound, plain = ObservationBuilder(layout, num_envs, 5, 3, 5), ObservationBuilder(layout, num_envs, 5, 3, 5)
    rng = np.random.default_rng(26)
    inputs = _inputs(num_envs, 5, 3, rng)
    bound.bind(inputs)
    lin_vel = inputs.base_lin_vel
    for tick in range(40):
        fresh = _inputs(num_envs, 5, 3, rng)
        for name in ("q", "dq", "base_quat", "base_ang_vel", "command", "last_action"):
            getattr(inputs, name)[...] = getattr(fresh, name)  # written in place, as the controller writes
        lin_vel[...] = fresh.base_lin_vel
        if tick % 7 == 3:
            inputs.dq[0, rng.integers(5)] = rng.choice([np.nan, np.inf, -np.inf])
            inputs.base_quat[0, rng.integers(4)] = rng.choice([np.nan, np.inf])
        np.testing.assert_array_equal(bound.compute(inputs), plain.compute(inputs))
        other = _inputs(num_envs, 5, 3, rng)  # not the bound object: computed as unbound
        np.testing.assert_array_equal(bound.compute(other), plain.compute(other))
    inputs.base_lin_vel = None
    bound.bind(inputs)
    with pytest.raises(ValueError, match="base linear velocity"):
        bound.compute(inputs)
    inputs.base_lin_vel = lin_vel
    bound.bind(inputs)
    np.testing.assert_array_equal(bound.compute(inputs), plain.compute(inputs))
    bound.bind(None)
    np.testing.assert_array_equal(bound.compute(inputs), plain.compute(inputs))
