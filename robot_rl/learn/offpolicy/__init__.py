"""Off-policy training in the vectorized sim beside PPO: FastTD3 (``robot-rl train --algo fasttd3``).

Same env, task, randomization, observation and action contract as PPO; checkpoints stamped the same way, so
``robot-rl export`` / ``play`` / ``sim2sim`` take them unchanged. Heavy modules (torch) are imported where used.
"""

from robot_rl.learn.offpolicy.config import FastTD3Cfg

__all__ = ["FastTD3Cfg"]
