"""Train a policy in MuJoCo with PPO.  Example:  python sim/train.py --task a1-flat

Thin script over robot_rl.learn.train (the same function as ``robot-rl train``); --help lists the options.
"""

import sys

from robot_rl.learn.train import main

if __name__ == "__main__":
    sys.exit(main())
