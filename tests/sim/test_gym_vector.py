"""The Gymnasium vector adapter."""

import numpy as np
from gymnasium.vector import AutoresetMode

from robot_rl.sim.gym_vector import MujocoGymVectorEnv


def test_spaces_reset_step_and_same_step_autoreset():
    env = MujocoGymVectorEnv("a1-flat", 3, seed=0)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.single_observation_space.shape == (45,)
    assert env.observation_space.shape == (3, 45)
    assert env.action_space.shape == (3, 12)
    obs, info = env.reset(seed=1)
    assert obs.shape == (3, 45) and info["critic_obs"].shape == (3, 48)
    assert env.observation_space.contains(obs)
    env.action_space.seed(0)
    for _ in range(400):
        obs, rew, term, trunc, info = env.step(env.action_space.sample())
        assert obs.shape == (3, 45) and rew.shape == (3,)
        if term.any():
            break
    assert term.any(), "random actions should make an A1 fall within 8 s"
    done = term | trunc
    assert info["_final_obs"].tolist() == done.tolist()
    # The finished env's final observation is its fallen state, not the fresh reset returned in obs.
    i = int(np.flatnonzero(done)[0])
    joints = slice(9, 21)  # joint_pos_rel: far from the default pose after a fall, near it after a reset
    assert np.abs(info["final_obs"][i, joints]).max() > 0.2
    assert np.abs(obs[i, joints]).max() < 0.1
    env.close()


def test_reset_with_a_seed_is_reproducible():
    a, b = MujocoGymVectorEnv("panda-reach", 2, seed=0), MujocoGymVectorEnv("panda-reach", 2, seed=5)
    obs_a, _ = a.reset(seed=7)
    obs_b, _ = b.reset(seed=7)
    assert np.array_equal(obs_a, obs_b)
    a.close()
    b.close()
