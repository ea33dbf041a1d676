"""A scripted expert for the push task: a teleop device whose "operator" is a feedback rule.

It looks at the scene as a person at the keyboard would — the cube (``source.object_position()``), the goal
(the task command) and the tool point (forward kinematics of the measured joints) — and answers ``poll()``
with the same :class:`TeleopCommand` a keyboard or SpaceMouse produces: normalized end-effector rates in
[-1, 1] plus the recorder's buttons. Demos therefore go through exactly the path teleop demos go through
(``ArmTeleopController`` → ``DeployRuntime`` → safety chain → robot), so whatever a policy learns from
them it could also learn from a person.

The rule is memoryless: the command is a function of (tool pose, cube, goal) alone, evaluated afresh
every tick, so a policy cloned from it faces a well-posed regression (the same observation never asks for
two different motions, as it would with an expert that remembers which phase it is in). Zones, in order:

- **done** (cube within ``done_radius_m`` of the goal): rise straight up, then go to a fixed ``home``
  pose. A fixed pose rather than "stay where the push ended": a cloned policy outputs joint
  targets near the current joints, so "hold still here" is a neutral equilibrium its small errors walk
  away from, while "go to this pose" is an attractor it reproduces.
- **channel** (the tool is behind the cube on the goal → cube line, within ``channel_width_m``): descend
  to pushing height, then push towards the goal, steering back onto the line and slowing down near it. A
  tool still above pushing height descends only from behind the contact point (``contact_m``): nearer, the
  fingers would land on the cube's top edge and press it into the table.
- **elsewhere**: rise to the travel height and move over the pre-push point behind the cube; moving
  sideways only as fast as the tool has risen, so it never sweeps low through the cube.

The hand turns so the closed fingers' wide face pushes (on the narrow edge the cube pivots off the line).
Variety: each episode draws its own travel height, stand-off and speeds, and a small Ornstein–Uhlenbeck
noise perturbs the commands (not near home), so the demos also show the rule correcting small errors.

Buttons: ``start`` on the first poll; ``stop`` and ``success`` after ``hold_s`` at home (the tool is sent
home only while the cube is within ``done_radius_m`` of the goal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from robot_rl.core.types import RobotState
from robot_rl.robots.spec import RobotSpec
from robot_rl.teleop.arm_ik import ArmIKConfig, ArmKinematics
from robot_rl.teleop.command import RecorderButtons, TeleopCommand

Zone = Literal["reposition", "descend", "push", "retreat", "home"]


class StateSource(Protocol):
    """The robot's state and the task's object (the scene's cube: the task's observation source, not the state)."""

    def read(self) -> RobotState: ...
    def object_position(self) -> np.ndarray | None: ...


@dataclass(frozen=True)
class PushExpertConfig:
    travel_height_m: tuple[float, float] = (0.09, 0.12)  # tool height while moving around the cube
    # Tool height while pushing: low on the 5 cm cube, or it tips; but the fingertips reach ~8 mm below the tool
    # point, so at 12 mm (before issue 29) they landed on the table (up to 80 N in MuJoCo) and cloned policies,
    # a centimetre lower, pinned the fingers there until the safety chain's torque limit held them
    # (benchmarks/results/RESULTS_bc_push.md). At 22 mm the fingertips clear the table by ~1.4 cm.
    push_height_m: float = 0.022
    standoff_m: tuple[float, float] = (0.055, 0.07)  # pre-push point: tool this far behind the cube's centre
    contact_m: float = 0.035  # tool behind the cube's centre when touching it (half cube + finger)
    channel_width_m: float = 0.015  # sideways offset from the push line still counted as "behind the cube"
    gain_per_s: float = 8.0  # position error → speed: v = gain · error (then capped)
    push_speed: tuple[float, float] = (0.35, 0.5)  # while pushing, fraction of the max linear speed
    travel_speed: tuple[float, float] = (0.8, 1.0)
    push_slowdown_per_s: float = 4.0  # near the goal, push speed = this · remaining distance
    min_push_speed: float = 0.12  # fraction of the max linear speed
    done_radius_m: float = 0.012  # cube this close to the goal: done, go home
    clear_m: float = 0.06  # done: rise straight up until the tool is this far from the cube or travel height
    home_m: tuple[float, float, float] = (0.33, 0.0, 0.3)  # done: the tool waits here (base frame)
    home_yaw_rad: float = 0.0
    at_home_m: float = 0.01
    hold_s: float = 0.5  # at home this long (the cube at the goal) → stop + success
    noise: float = 0.08  # OU noise amplitude, normalized units
    noise_tau_s: float = 0.3
    align_yaw: bool = True
    yaw_gain_per_s: float = 4.0


class ScriptedPushExpert:
    """``poll() -> TeleopCommand`` for panda-push. ``source.read()`` gives the state it looks at, and
    ``source.object_position()`` the cube."""

    def __init__(self, spec: RobotSpec, source: StateSource, goal_xy: np.ndarray, rng: np.random.Generator,
                 cfg: PushExpertConfig | None = None, ik_cfg: ArmIKConfig | None = None,
                 kinematics: ArmKinematics | None = None):
        cfg = cfg if cfg is not None else PushExpertConfig()
        self.source = source
        self.goal = np.asarray(goal_xy, dtype=np.float64)
        self.rng = rng
        self.cfg = cfg
        self.kin = kinematics if kinematics is not None else ArmKinematics(spec)
        self.dt = spec.timing.policy_period_s
        ik_cfg = ik_cfg if ik_cfg is not None else ArmIKConfig()
        self.vmax, self.wmax = ik_cfg.max_linear_speed_m_s, ik_cfg.max_angular_speed_rad_s
        # This episode's style.
        self.travel_z = rng.uniform(*cfg.travel_height_m)
        self.standoff = rng.uniform(*cfg.standoff_m)
        self.push_speed = rng.uniform(*cfg.push_speed)
        self.travel_speed = rng.uniform(*cfg.travel_speed)
        self.zone: Zone = "reposition"
        self._noise = np.zeros(3)
        self._polls = 0
        self._home_ticks = 0
        self.finished = False  # stop (or discard) has been pressed
        # The last poll's command without the noise: the rule's own answer (the label DART demos record).
        self.clean_command = TeleopCommand(ee_delta=np.zeros(6), gripper=1.0)

    # -- the device interface ---------------------------------------------------------------------------
    def poll(self) -> TeleopCommand:
        state = self.source.read()
        ee, rot = self.kin.tool_pose(state.q)
        cube = np.asarray(self.source.object_position(), dtype=np.float64)
        rate = self.rates(ee, cube[:2])
        clean_rate = rate
        if self.zone != "home":
            a = self.dt / self.cfg.noise_tau_s
            self._noise += -a * self._noise + np.sqrt(2 * a) * self.cfg.noise * self.rng.standard_normal(3)
            rate = rate + self._noise * np.array([1.0, 1.0, 0.3])
        ee_delta = np.zeros(6)
        ee_delta[:3] = np.clip(rate, -1.0, 1.0)
        if self.cfg.align_yaw:
            ee_delta[5] = np.clip(self.yaw_rate(rot, cube[:2]), -1.0, 1.0)
        clean_delta = ee_delta.copy()
        clean_delta[:3] = np.clip(clean_rate, -1.0, 1.0)
        self.clean_command = TeleopCommand(ee_delta=clean_delta, gripper=1.0)
        buttons = RecorderButtons(start=self._polls == 0)
        self._polls += 1
        at_home = self.zone == "home" and np.linalg.norm(ee - np.asarray(self.cfg.home_m)) < self.cfg.at_home_m
        self._home_ticks = self._home_ticks + 1 if at_home else 0
        if not self.finished and self._home_ticks * self.dt >= self.cfg.hold_s:
            # Home is reached only with the cube within done_radius_m of the goal: a success.
            self.finished = True
            buttons = RecorderButtons(stop=True, success=True)
        return TeleopCommand(ee_delta=ee_delta, gripper=1.0, buttons=buttons)

    def close(self) -> None:
        """Nothing to release (the Device protocol's close)."""

    # -- the rule -----------------------------------------------------------------------------------------
    def _push_dir(self, cube_xy: np.ndarray) -> np.ndarray:
        d = self.goal - cube_xy
        n = float(np.linalg.norm(d))
        return d / n if n > 1e-9 else np.array([1.0, 0.0])

    def _toward(self, ee: np.ndarray, target: np.ndarray, speed: float) -> np.ndarray:
        """Normalized rates moving the tool towards ``target``, at most ``speed`` (fraction of max)."""
        v = self.cfg.gain_per_s * (target - ee) / self.vmax
        n = float(np.linalg.norm(v))
        return v * (speed / n) if n > speed else v

    def _over(self, ee: np.ndarray, target_xy: np.ndarray, speed: float) -> np.ndarray:
        """Rise to the travel height and move over ``target_xy``, sideways only as fast as the tool has
        risen from pushing height (so a low tool goes up before it goes anywhere)."""
        cfg = self.cfg
        v = self._toward(ee, np.append(target_xy, self.travel_z), speed)
        risen = np.clip((ee[2] - cfg.push_height_m) / (self.travel_z - 0.01 - cfg.push_height_m), 0.0, 1.0)
        v[:2] *= risen
        return v

    def rates(self, ee: np.ndarray, cube_xy: np.ndarray) -> np.ndarray:
        """Normalized tool rates (x, y, z) for this scene; sets ``zone``."""
        cfg = self.cfg
        u = self._push_dir(cube_xy)
        rel = ee[:2] - cube_xy
        if np.linalg.norm(self.goal - cube_xy) < cfg.done_radius_m:
            if np.linalg.norm(rel) < cfg.clear_m and ee[2] < self.travel_z - 0.01:
                # Straight up first: any sideways motion this close would risk nudging the cube off the goal.
                self.zone = "retreat"
                return np.array([0.0, 0.0, self.travel_speed])
            self.zone = "home"
            return self._toward(ee, np.asarray(cfg.home_m), self.travel_speed)
        along = float(np.dot(rel, u))
        lateral = rel - along * u
        in_channel = (-self.standoff - 0.02 < along < -cfg.contact_m + 0.01
                      and np.linalg.norm(lateral) < cfg.channel_width_m)
        high = ee[2] > cfg.push_height_m + 0.015
        if not in_channel or (high and along > -cfg.contact_m - 0.005):
            self.zone = "reposition"
            return self._over(ee, cube_xy - self.standoff * u, self.travel_speed)
        steer = -0.5 * cfg.gain_per_s * lateral / self.vmax
        v_z = cfg.gain_per_s * (cfg.push_height_m - ee[2]) / self.vmax
        if high:
            self.zone = "descend"
            return np.array([steer[0], steer[1], max(v_z, -self.travel_speed)])
        self.zone = "push"
        remaining = float(np.linalg.norm(self.goal - cube_xy))
        speed = min(self.push_speed, max(cfg.min_push_speed, cfg.push_slowdown_per_s * remaining / self.vmax))
        v_xy = steer + speed * u
        return np.array([v_xy[0], v_xy[1], v_z])

    def yaw_rate(self, rot: np.ndarray, cube_xy: np.ndarray) -> float:
        """Normalized yaw rate: while working, the tool's x axis onto ±(push direction), whichever is
        nearer; once done, back to the home yaw."""
        current = np.arctan2(rot[1, 0], rot[0, 0])
        if self.zone in ("retreat", "home"):
            error = (self.cfg.home_yaw_rad - current + np.pi) % (2 * np.pi) - np.pi
        else:
            u = self._push_dir(cube_xy)
            error = (np.arctan2(u[1], u[0]) - current + np.pi / 2) % np.pi - np.pi / 2  # symmetric face
        return self.cfg.yaw_gain_per_s * error / self.wmax
