"""Robot specs: the single source of truth for every robot fact.

A spec lives in ``hardware/robots/<name>.yaml`` and is loaded into the frozen dataclasses below. Sim
model builders, tasks, the policy contract, the safety chain and the hardware interfaces all read their
joint order, gains, limits, rates and safety parameters from here and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np

from robot_rl.robots.spec_extends import resolve_extends
from robot_rl.typed_yaml import ConfigError, build, read_yaml, to_plain

# The specs live in the repository's ``hardware/`` (user-facing, next to ``launch/`` and ``sim/``): a checkout or an
# editable install reads them there, so edits take effect. A wheel carries the same files as package data
# (setup.py maps hardware/ and policies/a1_flat/ into robot_rl/_package_data/), read when the package is installed.
# ROBOT_RL_HARDWARE_DIR points elsewhere, e.g. a lab's own directory of specs.
HARDWARE_DIR_ENV_VAR = "ROBOT_RL_HARDWARE_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DATA_DIR = Path(__file__).resolve().parents[1] / "_package_data"


def checkout_root() -> Path | None:
    """The source checkout this package runs from (editable install or PYTHONPATH), None for an installed wheel
    (which has package data, and no business with whatever project happens to sit above its install dir)."""
    return REPO_ROOT if not PACKAGE_DATA_DIR.is_dir() and (REPO_ROOT / "pyproject.toml").is_file() else None


def shipped_path(relative: str | Path) -> Path | None:
    """A file or folder the repository ships (``hardware/…``, ``policies/a1_flat/…``): from the package data of an
    installed wheel, else from the checkout; None where neither has it."""
    root = checkout_root()
    for base in (PACKAGE_DATA_DIR, root):
        if base is not None and (base / relative).exists():
            return base / relative
    return None


def _default_hardware_dir() -> Path:
    if os.environ.get(HARDWARE_DIR_ENV_VAR):
        return Path(os.environ[HARDWARE_DIR_ENV_VAR])
    return shipped_path("hardware") or REPO_ROOT / "hardware"


HARDWARE_DIR = _default_hardware_dir()


@dataclass(frozen=True)
class JointSpec:
    name: str
    default_position: float  # rad
    kp: float  # N·m/rad
    kd: float  # N·m·s/rad
    effort_limit: float  # N·m
    velocity_limit: float  # rad/s
    position_limit: tuple[float, float]  # rad, (lower, upper)
    armature: float = 0.0  # kg·m², reflected rotor inertia (sim only)


@dataclass(frozen=True)
class TimingSpec:
    policy_period_s: float  # one policy step
    physics_period_s: float  # one sim step; the policy period is an integer multiple of it
    hardware_period_s: float  # how often the low-level command is (re)sent to the robot

    @property
    def decimation(self) -> int:
        """Physics steps per policy step."""
        return round(self.policy_period_s / self.physics_period_s)


@dataclass(frozen=True)
class SafetySpec:
    ramp_duration_s: float  # passive → default pose ramp
    damping_kd: float  # kd of the damping state (kp = 0), used on stop, fault and e-stop
    soft_limit_margin_rad: float  # position targets are kept this far inside the hard limits
    max_target_rate_rad_s: float  # per-joint rate limit on position targets
    stale_state_periods: int  # no new state for this many policy periods → fault
    max_consecutive_overruns: int  # policy ticks past their deadline in a row → fault
    max_tilt_rad: float | None = None  # base tilt from upright → fault (floating-base robots)
    torque_limit_fraction: float = 1.0  # estimated PD torque may use this fraction of effort_limit
    # What the motors deliver per unit of commanded kp and kd, as measured (``robot-rl calibrate``); the torque
    # limit estimates the PD torque with them. 1: the datasheet. A robot whose motors are weaker than their gains
    # say is otherwise clipped at a fraction of its real torque.
    actuator_kp_scale: float = 1.0
    actuator_kd_scale: float = 1.0


@dataclass(frozen=True)
class SimModelSpec:
    source: Literal["pybullet_data", "menagerie", "unitree_mujoco", "path"]
    path: str  # relative to pybullet_data / the Menagerie or unitree_mujoco checkout / the spec file
    floating_base: bool
    base_body: str  # body whose pose is the robot's base pose
    imu_body: str  # body carrying the IMU
    foot_bodies: tuple[str, ...] = ()  # contact bodies of a legged robot, in leg order
    end_effector_body: str | None = None  # tool body of an arm
    base_height: float | None = None  # nominal standing base height over flat ground (m)
    base_friction: float = 1.0  # nominal sliding friction of every geom (DR scales around it)


@dataclass(frozen=True)
class SimInterfaceSpec:
    """An in-process simulator stands in for the robot (MuJoCo or PyBullet)."""

    type: Literal["sim"]


@dataclass(frozen=True)
class UnitreeDdsInterfaceSpec:
    """Unitree low-level control over Cyclone DDS (``rt/lowcmd`` / ``rt/lowstate``)."""

    type: Literal["unitree_dds"]
    message_family: Literal["unitree_go", "unitree_hg"]  # Go2/B2 (and the A1 sim bridge) vs G1/H1-2
    motor_slots: tuple[str, ...]  # joint name driven by each motor slot, "" for an unused slot
    release_step: Literal["sport_mode", "debug_mode", "none"]  # what must be switched off first
    network_interface: str = "lo"
    domain_id: int = 0


@dataclass(frozen=True)
class Ros2ControlInterfaceSpec:
    """Joint commands to a ros2_control controller, state from ``joint_states`` (in the ROS 2 node)."""

    type: Literal["ros2_control"]
    controller: str = "forward_position_controller"


@dataclass(frozen=True)
class FrankaInterfaceSpec:
    """A Franka arm through its FCI (libfranka) at 1 kHz."""

    type: Literal["franka"]
    robot_ip: str


InterfaceSpec = SimInterfaceSpec | UnitreeDdsInterfaceSpec | Ros2ControlInterfaceSpec | FrankaInterfaceSpec


@dataclass(frozen=True)
class RobotSpec:
    name: str
    description: str
    kind: Literal["quadruped", "humanoid", "arm"]
    command_mode: Literal["position_pd", "torque"]
    timing: TimingSpec
    sim_model: SimModelSpec
    joints: tuple[JointSpec, ...]
    safety: SafetySpec
    interface: InterfaceSpec
    # The joints the robot's policies drive, in spec order (the G1's 12 leg joints: Unitree's walking policies
    # are legs-only). Every other joint is held at its default pose with its own kp/kd, in the sim and on the
    # robot. Empty: the policy drives every joint.
    policy_joints: tuple[str, ...] = ()
    source_file: str = field(default="", compare=False)

    # Arrays in joint order, for the numeric code. Cached: the spec is frozen.
    @cached_property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def num_joints(self) -> int:
        return len(self.joints)

    @cached_property
    def policy_joint_indices(self) -> np.ndarray:
        """Index into the spec's joints of each joint the policy drives (all of them when policy_joints is empty)."""
        names = self.policy_joints or self.joint_names
        index = {n: i for i, n in enumerate(self.joint_names)}
        arr = np.array([index[n] for n in names], dtype=np.intp)
        arr.setflags(write=False)
        return arr

    @cached_property
    def policy_joint_names(self) -> tuple[str, ...]:
        return self.policy_joints or self.joint_names

    @property
    def num_policy_joints(self) -> int:
        return len(self.policy_joint_names)

    @cached_property
    def default_positions(self) -> np.ndarray:
        return _readonly([j.default_position for j in self.joints])

    @cached_property
    def kp(self) -> np.ndarray:
        return _readonly([j.kp for j in self.joints])

    @cached_property
    def kd(self) -> np.ndarray:
        return _readonly([j.kd for j in self.joints])

    @cached_property
    def effort_limits(self) -> np.ndarray:
        return _readonly([j.effort_limit for j in self.joints])

    @cached_property
    def velocity_limits(self) -> np.ndarray:
        return _readonly([j.velocity_limit for j in self.joints])

    @cached_property
    def position_lower(self) -> np.ndarray:
        return _readonly([j.position_limit[0] for j in self.joints])

    @cached_property
    def position_upper(self) -> np.ndarray:
        return _readonly([j.position_limit[1] for j in self.joints])

    @cached_property
    def spec_hash(self) -> str:
        """Hash of the facts a policy is trained against: the joints (order, default pose, gains, limits,
        armature), the command mode and the policy and physics periods.

        Policies record it at export and the runtime checks it at load. Safety margins, the hardware
        interface (a network interface name), the hardware rate and descriptions are left out on purpose:
        changing them must not force retraining every policy.
        """
        facts = {
            "name": self.name,
            "kind": self.kind,
            "command_mode": self.command_mode,
            "policy_period_s": self.timing.policy_period_s,
            "physics_period_s": self.timing.physics_period_s,
            "joints": to_plain(self.joints),
        }
        if self.policy_joints:  # only when set, so the hash of a robot whose policy drives every joint is unchanged
            facts["policy_joints"] = list(self.policy_joints)
        blob = json.dumps(facts, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict:
        facts = to_plain(self)
        facts.pop("source_file")
        return facts


def _readonly(values: list[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    arr.setflags(write=False)
    return arr


def _validate(spec: RobotSpec, src: str) -> None:
    """Checks that types alone cannot express. Each names the key path and the bad value."""
    seen: dict[str, int] = {}
    for i, joint in enumerate(spec.joints):
        at = f"joints[{i}]"
        if joint.name in seen:
            raise ConfigError(src, f"{at}.name", f"joint {joint.name!r} listed twice (also joints[{seen[joint.name]}])")
        seen[joint.name] = i
        for key in ("kp", "kd", "effort_limit", "velocity_limit", "armature"):
            value = getattr(joint, key)
            if not math.isfinite(value) or value < 0 or (key in ("effort_limit", "velocity_limit") and value == 0):
                need = "positive" if key in ("effort_limit", "velocity_limit") else "zero or positive"
                raise ConfigError(src, f"{at}.{key}", f"must be {need}, got {value!r}")
        lo, hi = joint.position_limit
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ConfigError(src, f"{at}.position_limit", f"limits out of order: [{lo}, {hi}] (need lower < upper)")
        if not lo <= joint.default_position <= hi:
            raise ConfigError(
                src, f"{at}.default_position", f"{joint.default_position} is outside position_limit [{lo}, {hi}]"
            )
    if not spec.joints:
        raise ConfigError(src, "joints", "at least one joint is required")
    t = spec.timing
    for key in ("policy_period_s", "physics_period_s", "hardware_period_s"):
        if getattr(t, key) <= 0:
            raise ConfigError(src, f"timing.{key}", f"must be positive, got {getattr(t, key)!r}")
    if abs(t.decimation * t.physics_period_s - t.policy_period_s) > 1e-9 or t.decimation < 1:
        raise ConfigError(
            src,
            "timing.policy_period_s",
            f"{t.policy_period_s} is not an integer multiple of physics_period_s {t.physics_period_s}",
        )
    s = spec.safety
    for key in ("ramp_duration_s", "damping_kd", "soft_limit_margin_rad", "max_target_rate_rad_s"):
        if getattr(s, key) < 0:
            raise ConfigError(src, f"safety.{key}", f"must be zero or positive, got {getattr(s, key)!r}")
    if s.stale_state_periods < 1 or s.max_consecutive_overruns < 1:
        bad = "stale_state_periods" if s.stale_state_periods < 1 else "max_consecutive_overruns"
        raise ConfigError(src, f"safety.{bad}", f"must be at least 1, got {getattr(s, bad)!r}")
    if not 0 < s.torque_limit_fraction <= 1:
        raise ConfigError(src, "safety.torque_limit_fraction", f"must be in (0, 1], got {s.torque_limit_fraction!r}")
    for key in ("actuator_kp_scale", "actuator_kd_scale"):
        if not 0 < getattr(s, key) <= 10:
            raise ConfigError(src, f"safety.{key}", f"must be in (0, 10], got {getattr(s, key)!r}")
    if isinstance(spec.interface, UnitreeDdsInterfaceSpec):
        for slot, name in enumerate(spec.interface.motor_slots):
            if name and name not in seen:
                raise ConfigError(src, f"interface.motor_slots[{slot}]", f"{name!r} is not a joint of this robot")
        missing = [n for n in spec.joint_names if n not in spec.interface.motor_slots]
        if missing:
            raise ConfigError(src, "interface.motor_slots", f"joint {missing[0]!r} has no motor slot")
    order = [seen.get(name) for name in spec.policy_joints]
    for k, (name, i) in enumerate(zip(spec.policy_joints, order, strict=True)):
        if i is None:
            raise ConfigError(src, f"policy_joints[{k}]", f"{name!r} is not a joint of this robot")
        if k and i <= order[k - 1]:
            raise ConfigError(src, f"policy_joints[{k}]", f"{name!r} is listed twice or out of the joints' order")
    if spec.sim_model.floating_base and spec.sim_model.base_height is None:
        raise ConfigError(src, "sim_model.base_height", "required for a floating-base robot")


def load_spec_file(path: str | Path) -> RobotSpec:
    """Load and validate one spec file."""
    path = Path(path)
    data = resolve_extends(read_yaml(path), path, specs_dir())  # a file that extends another spec
    spec = build(RobotSpec, data, path)
    if spec.name != path.stem:
        raise ConfigError(path, "name", f"{spec.name!r} does not match the file name {path.stem!r}")
    _validate(spec, str(path))
    return _with_source(spec, path)


def _with_source(spec: RobotSpec, path: Path) -> RobotSpec:
    object.__setattr__(spec, "source_file", str(path))
    return spec


def specs_dir() -> Path:
    return HARDWARE_DIR / "robots"


def available_robots() -> list[str]:
    return sorted(p.stem for p in specs_dir().glob("*.yaml"))


def load_robot(name: str) -> RobotSpec:
    """Load the spec of a robot by name (``a1``) or by path to a YAML file."""
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        return load_spec_file(name)
    path = specs_dir() / f"{name}.yaml"
    if not specs_dir().is_dir():
        raise ConfigError(
            specs_dir(), "", f"no robot specs here (looking for {name!r}): set {HARDWARE_DIR_ENV_VAR} to a directory "
            "holding robots/<name>.yaml, or pass a spec file's path"
        )
    if not path.exists():
        raise ConfigError(
            specs_dir(), "", f"no robot named {name!r} (available: {', '.join(available_robots()) or 'none'})"
        )
    return load_spec_file(path)
