"""Unitree Go2 velocity tracking on flat ground: the A1 recipe (observations, commands, rewards, randomization)
on the Go2 spec. It names the commands an imported Go2 velocity policy follows and the gate scenario it runs
(``robot-rl import-policy --task go2-flat``); the Go2's own facts come from its spec.
"""

from __future__ import annotations

import dataclasses

from robot_rl.robots.spec import load_robot
from robot_rl.tasks.a1_velocity import a1_flat
from robot_rl.tasks.task import TaskCfg, TerminationsCfg

ROBOT = "go2"


def go2_flat() -> TaskCfg:
    spec = load_robot(ROBOT)
    return dataclasses.replace(
        a1_flat(), name="go2-flat", robot=ROBOT, description="Go2 velocity tracking on flat ground",
        # A fall: the spec's tilt limit, or the base within 40 % of its standing height of the ground.
        terminations=TerminationsCfg(max_tilt_rad=spec.safety.max_tilt_rad,
                                     min_base_height_m=0.4 * spec.sim_model.base_height, base_contact=True),
    )
