"""MuJoCo's integrator and contact settings, as named configurations of a compiled robot model.

The sim2sim gate runs a policy in two physics. PyBullet is the second where the robot has a URDF with collision
geometry (the A1, the Panda); a robot whose only model is an MJCF (the Go2 from MuJoCo Menagerie, Unitree's
29-DoF G1) gets a second MuJoCo configuration instead: different integrator, step, friction cone and contact
stiffness, so a policy that only works with one set of numerical choices fails the gate as it would with
PyBullet. It shares the model file, so it cannot catch a modelling error of that file.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco


@dataclass(frozen=True)
class MujocoPhysics:
    name: str
    integrator: mujoco.mjtIntegrator
    cone: mujoco.mjtCone
    impratio: float
    substeps: int  # MuJoCo steps per spec physics period (the PD command is held over them)
    contact_solref: tuple[float, float] | None  # (time constant s, damping ratio) of every contact; None: MuJoCo's


# implicitfast integrates the actuators' -kd·dq implicitly (Euler does so only for joint damping): a kd 30 damping
# command on the A1's light legs at a 5 ms step stays stable and rings at 13 rad/s under Euler. Elliptic cone with
# a high impratio makes friction stiff: with the defaults (pyramidal, 1) a standing quadruped's feet creep outward
# under the hip torques and it sinks ~2 cm more over a few seconds.
DEFAULT_PHYSICS = MujocoPhysics("mujoco", mujoco.mjtIntegrator.mjINT_IMPLICITFAST, mujoco.mjtCone.mjCONE_ELLIPTIC,
                                100.0, 1, None)

# The second configuration: the full implicit integrator (velocity derivatives of the Coriolis and centrifugal
# forces too), half the step, MuJoCo's default pyramidal cone and impratio (softer, creeping friction), and
# stiffer contacts (a 10 ms time constant instead of 20 ms: the smallest MuJoCo accepts at this step is 2 steps).
ALTERNATE_PHYSICS = MujocoPhysics("mujoco-alt", mujoco.mjtIntegrator.mjINT_IMPLICIT, mujoco.mjtCone.mjCONE_PYRAMIDAL,
                                  1.0, 2, (0.01, 1.0))


def apply_physics(mjs: mujoco.MjSpec, physics: MujocoPhysics, physics_period_s: float) -> None:
    """Set ``physics`` on an MjSpec about to be compiled (every contact geom's solref included)."""
    mjs.option.timestep = physics_period_s / physics.substeps
    mjs.option.integrator = physics.integrator
    mjs.option.cone = physics.cone
    mjs.option.impratio = physics.impratio
    if physics.contact_solref is not None:
        for geom in mjs.geoms:
            geom.solref = list(physics.contact_solref)


__all__ = ["ALTERNATE_PHYSICS", "DEFAULT_PHYSICS", "MujocoPhysics", "apply_physics"]
