"""The gantry a simulated humanoid hangs from until its walking policy takes over.

A humanoid cannot stand on its joint PD alone (the G1's ankles, 2 × 40 N·m/rad, are softer than its body's
inverted pendulum, ~240 N·m/rad: see hardware/robots/g1.yaml), so labs hang it from a gantry while the deploy
arms and ramps the joints to the default pose, and lower the gantry once the policy balances it. Unitree's
deploy guide does this with the real G1, and Unitree's own simulator (unitree_mujoco) holds it with an "elastic
band" until the user lets go. Here the gantry is a soft weld of the base body to the world at its starting pose
(base at the spec's standing height, upright): while engaged it carries what the legs do not, and the feet
touch the ground, so the legs are already loaded when it lets go. Released, it exerts nothing.

Which robots hang: a robot-kind default, the one source of truth (``needs_gantry``): floating-base humanoids.
Quadrupeds stand up from the ground on their own PD and arms are bolted down, so they never get one.
When it lets go: the deploy loop releases it on the first tick the policy drives (``run_loop``), the sim bridge
a stated time after the first position command (by default the spec's ramp: when the runtime hands over).
"""

from __future__ import annotations

import mujoco
import numpy as np

from robot_rl.robots.spec import RobotSpec

GANTRY = "robot_rl_gantry"  # the weld's name in the compiled model
# Time constant and damping ratio of the weld (MuJoCo's solref). 20 ms is MuJoCo's default constraint softness:
# stiff enough that the hanging G1 sags ~1 cm, soft enough for the 5 ms step (MuJoCo wants ≥ 2 steps).
GANTRY_SOLREF = (0.02, 1.0)


def needs_gantry(spec: RobotSpec) -> bool:
    """Whether ``spec``'s robot hangs from a gantry until its policy takes over: floating-base humanoids."""
    return spec.kind == "humanoid" and spec.sim_model.floating_base


def add_gantry(mjs: mujoco.MjSpec, spec: RobotSpec) -> None:
    """Weld ``spec``'s base body to the world at its pose in the model's reference configuration (where
    ``build_mujoco_model`` put it: upright at ``base_height``), engaged from the start. A terrain hook."""
    weld = mjs.add_equality(type=mujoco.mjtEq.mjEQ_WELD, objtype=mujoco.mjtObj.mjOBJ_BODY,
                            name1=spec.sim_model.base_body, name=GANTRY)
    weld.active = True
    weld.solref = list(GANTRY_SOLREF)
    # data: anchor (3, in the base body's frame), relative pose (position 3, quaternion 4; an all-zero quaternion
    # asks the compiler for the pose at qpos0), torque scale. MjSpec's default anchor is not the origin.
    weld.data = [0.0] * 10 + [1.0, 0.0]


class GantryHandle:
    """Engage state of a compiled model's gantry, per MjData (MuJoCo keeps ``eq_active`` in the data)."""

    def __init__(self, model: mujoco.MjModel):
        self.eq_id = model.equality(GANTRY).id

    def engaged(self, data: mujoco.MjData) -> bool:
        return bool(data.eq_active[self.eq_id])

    def release(self, data: mujoco.MjData) -> None:
        """Lower the gantry: from the next step on it exerts nothing. Releasing twice is harmless."""
        data.eq_active[self.eq_id] = 0

    def force(self, data: mujoco.MjData) -> np.ndarray:
        """The weld's constraint force now (N, 3 values; zero once released), for reports and tests."""
        if not self.engaged(data):
            return np.zeros(3)
        rows = np.flatnonzero((data.efc_type[: data.nefc] == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
                              & (data.efc_id[: data.nefc] == self.eq_id))
        return data.efc_force[rows[:3]].copy() if rows.size >= 3 else np.zeros(3)


__all__ = ["GANTRY", "GANTRY_SOLREF", "GantryHandle", "add_gantry", "needs_gantry"]
