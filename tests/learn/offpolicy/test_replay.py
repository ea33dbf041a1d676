"""The per-env n-step replay: folds cut at episode ends and at the newest row, a terminal bootstraps nothing,
a time-out bootstraps from the stored last observation, the ring forgets its oldest rows."""

from __future__ import annotations

import pytest
import torch

from robot_rl.learn.offpolicy.replay import NStepReplay

GAMMA = 0.5


def _filled(rewards: list[float], terminated: list[bool], done: list[bool], n_step: int = 3, capacity: int = 16,
            num_envs: int = 2) -> NStepReplay:
    """A replay whose env 0 steps carry ``rewards`` and obs equal to the step index (next obs: index + 100)."""
    replay = NStepReplay(num_envs, capacity, 1, 1, 1, n_step=n_step, gamma=GAMMA)
    for t, (r, term, d) in enumerate(zip(rewards, terminated, done, strict=True)):
        obs = torch.full((num_envs, 1), float(t))
        replay.add(actor_obs=obs, critic_obs=obs, action=obs, reward=torch.full((num_envs,), r),
                   next_actor_obs=obs + 100, next_critic_obs=obs + 100,
                   terminated=torch.full((num_envs,), term), done=torch.full((num_envs,), d))
    return replay


def _by_first_step(replay: NStepReplay, batch: int = 4000) -> dict[int, dict[str, float]]:
    sample = replay.sample(batch, torch.Generator().manual_seed(0))
    out = {}
    for i in range(batch):
        out[int(sample["actor_obs"][i, 0])] = {k: float(v[i].reshape(-1)[0]) for k, v in sample.items()}
    return out


def test_n_step_returns_cut_at_a_terminal_and_bootstrap_nothing_after_it():
    replay = _filled([1.0, 2.0, 4.0, 8.0, 16.0], [False, True, False, False, False],
                     [False, True, False, False, False])
    folds = _by_first_step(replay)
    assert folds[0]["reward"] == pytest.approx(1 + GAMMA * 2)  # the episode ended at step 1
    assert folds[0]["discount"] == 0.0 and folds[0]["next_actor_obs"] == 101
    assert folds[2]["reward"] == pytest.approx(4 + GAMMA * 8 + GAMMA**2 * 16)  # a whole 3-step fold
    assert folds[2]["discount"] == pytest.approx(GAMMA**3) and folds[2]["next_critic_obs"] == 104


def test_a_time_out_bootstraps_from_its_stored_last_observation():
    replay = _filled([1.0, 1.0, 1.0, 1.0], [False] * 4, [False, True, False, False])
    folds = _by_first_step(replay)
    assert folds[0]["reward"] == pytest.approx(1 + GAMMA)
    assert folds[0]["discount"] == pytest.approx(GAMMA**2) and folds[0]["next_actor_obs"] == 101


def test_folds_stop_at_the_newest_row_and_the_ring_forgets_the_oldest():
    replay = _filled([1.0] * 6, [False] * 6, [False] * 6, capacity=4)
    assert replay.size == 4 and len(replay) == 8
    folds = _by_first_step(replay)
    assert sorted(folds) == [2, 3, 4, 5]  # rows 0 and 1 were overwritten
    assert folds[5]["reward"] == 1.0 and folds[5]["discount"] == pytest.approx(GAMMA)  # nothing after it yet
    assert folds[4]["reward"] == pytest.approx(1 + GAMMA) and folds[4]["next_actor_obs"] == 105
    assert folds[2]["reward"] == pytest.approx(1 + GAMMA + GAMMA**2)


def test_samples_pair_each_env_with_its_own_rows():
    replay = NStepReplay(3, 8, 1, 1, 1, n_step=2, gamma=GAMMA)
    for t in range(5):
        obs = torch.tensor([[t], [10 + t], [20 + t]], dtype=torch.float32)
        replay.add(actor_obs=obs, critic_obs=obs, action=obs, reward=obs[:, 0], next_actor_obs=obs + 1,
                   next_critic_obs=obs + 1, terminated=torch.zeros(3, dtype=torch.bool),
                   done=torch.zeros(3, dtype=torch.bool))
    s = replay.sample(500, torch.Generator().manual_seed(1))
    env = torch.div(s["actor_obs"][:, 0], 10, rounding_mode="floor")
    assert torch.equal(torch.div(s["next_actor_obs"][:, 0] - 1, 10, rounding_mode="floor"), env)
    assert set(env.tolist()) == {0.0, 1.0, 2.0}
    with pytest.raises(ValueError, match="empty"):
        NStepReplay(1, 2, 1, 1, 1, n_step=1, gamma=GAMMA).sample(4)
