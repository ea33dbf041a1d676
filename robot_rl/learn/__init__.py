"""Learning: PPO through rsl_rl (``ppo``), the training and evaluation loops (``train``, ``play``).

Import the submodules directly; torch and rsl_rl are imported only by the modules that need them.
"""
