"""Evaluate a trained checkpoint headless.  Example:
    python sim/play.py --task a1-flat --checkpoint runs/a1-flat/<run>/model_1499.pt

Thin script over robot_rl.learn.play (the same function as ``robot-rl play``); --help lists the options.
"""

import sys

from robot_rl.learn.play import main

if __name__ == "__main__":
    sys.exit(main())
