"""n-step folding, the replay ring, the transition codec and prior + online sampling."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.learn.residual.replay import MixedSampler, NStepFolder, ReplayBuffer, Step, StepCodec


def _step(i: int, reward: float = 1.0, terminal: bool = False, end: bool = False, intervention: bool = False) -> Step:
    return Step(np.full(2, i, np.float32), np.full(1, i, np.float32), reward, np.full(2, i + 1, np.float32),
                terminal, end, intervention)


def test_n_step_returns_and_discounts():
    folder = NStepFolder(3, 0.5)
    assert folder.add(_step(0)) == []
    assert folder.add(_step(1)) == []
    (first,) = folder.add(_step(2))
    assert first["reward"] == pytest.approx(1 + 0.5 + 0.25)
    assert first["discount"] == pytest.approx(0.125)
    assert first["state"][0] == 0 and first["next_state"][0] == 3


def test_truncation_bootstraps_from_the_last_state_and_terminal_does_not():
    folder = NStepFolder(3, 0.5)
    folder.add(_step(0))
    out = folder.add(_step(1, end=True))  # time limit after two steps: both pending transitions close
    assert [o["reward"] for o in out] == pytest.approx([1.5, 1.0])
    assert [o["discount"] for o in out] == pytest.approx([0.25, 0.5])
    assert all(o["next_state"][0] == 2 for o in out)
    folder.add(_step(5))
    out = folder.add(_step(6, reward=10.0, terminal=True, end=True))
    assert [o["discount"] for o in out] == [0.0, 0.0]
    assert out[0]["reward"] == pytest.approx(1 + 0.5 * 10)
    assert folder.add(_step(7)) == []  # a new episode starts empty


def test_ring_buffer_wraps_and_saves_oldest_first(tmp_path):
    buf = ReplayBuffer(4, 2, 1)
    for i in range(6):
        buf.add({"state": np.full(2, i), "action": [i], "reward": i, "next_state": np.zeros(2), "discount": 1.0,
                 "intervention": 0.0})
    assert len(buf) == 4
    path = buf.save(tmp_path / "b.npz", gamma=0.9, n_step=3)
    loaded = ReplayBuffer.load(path, gamma=0.9, n_step=3)
    np.testing.assert_array_equal(loaded.data["reward"][:4], [2, 3, 4, 5])
    with pytest.raises(ValueError, match=r"gamma 0\.9, n_step 3; this run uses gamma 0\.99"):
        ReplayBuffer.load(path, gamma=0.99, n_step=3)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a residual replay file"):
        ReplayBuffer.load(tmp_path / "junk.npz", gamma=0.9, n_step=3)


def test_codec_round_trip():
    codec = StepCodec(3, 2)
    row = codec.pack(np.arange(3), np.array([0.5, -0.5]), 1.25, np.arange(3) + 10, True, True, False).copy()
    assert row.shape == (codec.width,)
    step = codec.unpack(row)
    np.testing.assert_array_equal(step.next_state, [10, 11, 12])
    assert (step.reward, step.terminal, step.end, step.intervention) == (1.25, True, True, False)


def test_mixed_sampler_draws_the_configured_share_from_the_prior():
    online, prior = ReplayBuffer(100, 1, 1), ReplayBuffer(100, 1, 1)
    rng = np.random.default_rng(0)
    for buf, marker in ((online, 0.0), (prior, 1.0)):
        for _ in range(50):
            buf.add({"state": [marker], "action": [0], "reward": 0, "next_state": [0], "discount": 1,
                     "intervention": 0})
    batch = MixedSampler(online, prior, 0.5).sample(rng, 64)
    assert batch["state"].shape == (64, 1) and batch["state"][:, 0].sum() == 32
    only_online = MixedSampler(online, ReplayBuffer(10, 1, 1), 0.5).sample(rng, 64)
    assert only_online["state"].sum() == 0
    with pytest.raises(ValueError, match="prior data has state/action widths"):
        MixedSampler(online, ReplayBuffer(10, 2, 1), 0.5)
