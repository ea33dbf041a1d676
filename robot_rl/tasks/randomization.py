"""Domain randomization settings: the typed ranges a task declares (sampling and applying them is
``robot_rl.sim.randomization``'s job; task configuration stays free of the simulator, so tasks never import sim).

A user override naming a key that is not a field of ``RandomizationCfg`` is an error that lists the keys,
so a typo never silently trains without the randomization the user asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_type_hints

from robot_rl.typed_yaml import ConfigError

Range = tuple[float, float]


class UnknownRandomizationKey(ConfigError):
    """A randomization override names a parameter that does not exist."""

    def __init__(self, key: str, source: str = "randomization override"):
        super().__init__(source, key, f"unknown domain randomization key (known: {', '.join(known_keys())})")


@dataclass(frozen=True)
class RandomizationCfg:
    """Ranges of every randomized quantity. ``None`` (or 0, or an empty range) switches a term off."""

    friction_scale: Range | None = None  # × sim_model.base_friction, every geom (robot and ground)
    base_mass_add_kg: Range | None = None  # payload added to the base body
    link_mass_scale: Range | None = None  # × mass (and inertia) of each robot body, drawn per body
    com_offset_m: float = 0.0  # ± per axis, base body center of mass
    kp_scale: Range | None = None  # × position gain, drawn per joint
    kd_scale: Range | None = None  # × damping gain, drawn per joint
    motor_strength: Range | None = None  # × the whole PD torque and its effort limit, drawn per joint
    action_latency_steps: tuple[int, int] = (0, 0)  # policy steps between policy output and the motors
    # Pushes come at random times, each env on its own (a Poisson process with this mean interval), as a
    # horizontal velocity kick in a uniformly random direction whose speed is uniform up to the maximum: the
    # robustness suite shoves from every direction at any gait phase, so training must too.
    push_interval_s: float | None = None  # mean time between two pushes of one env
    push_max_vel_m_s: float = 0.0  # largest kick the task claims to withstand (m/s), any horizontal direction
    push_ramp_s: float = 0.0  # curriculum: the largest kick grows linearly from 0 over this much policy time
    # Training kicks reach push_max_vel_m_s × this. push_max_vel_m_s stays the range the task claims, the one the
    # robustness suite shoves at: with speeds uniform up to the claim, kicks near it are rare in training.
    push_overshoot: float = 1.0
    init_joint_pos_rad: float = 0.0  # ± around the default pose at reset (clipped to the joint limits)
    init_joint_vel_rad_s: float = 0.0  # ± joint velocity at reset
    observation_noise: bool = True  # the ObsTerm.noise of the actor's observation terms
    # A policy must hold at the ends of its ranges, where uniform draws rarely land: with this probability a
    # quantity (per env and reset; per axis for the COM offset) is drawn at one end of its range instead.
    corner_probability: float = 0.0
    # The suite's worst case puts every quantity at a corner at once, which independent corner draws almost never
    # do (0.15⁸ for eight quantities at their worse ends): with this probability an env has every model quantity
    # at one end of its range together (each end drawn independently; per axis for the COM offset).
    all_corners_probability: float = 0.0
    contact_timeconst_s: Range | None = None  # MuJoCo contact solref time constant (stiffness), every geom
    # Envs (this fraction, spread over the env indices) on the model builder's contact — the elliptic friction
    # cone the gate's MuJoCo uses — instead of the cheap pyramidal one, so the policy is not tuned to one cone.
    stiff_contact_fraction: float = 0.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple) and value[0] > value[1]:
                raise ValueError(f"randomization {f.name}: range {list(value)} out of order (need low ≤ high)")
        if self.action_latency_steps[0] < 0:
            raise ValueError(f"randomization action_latency_steps: {self.action_latency_steps} must be ≥ 0")
        for key in ("com_offset_m", "push_max_vel_m_s", "push_ramp_s", "init_joint_pos_rad", "init_joint_vel_rad_s"):
            if getattr(self, key) < 0:
                raise ValueError(f"randomization {key}: must be ≥ 0, got {getattr(self, key)}")
        if self.push_overshoot < 1.0:
            raise ValueError(f"randomization push_overshoot: must be ≥ 1 (training kicks at least up to the claimed "
                             f"push_max_vel_m_s), got {self.push_overshoot}")
        for key in ("corner_probability", "all_corners_probability", "stiff_contact_fraction"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ValueError(f"randomization {key}: must be in [0, 1], got {getattr(self, key)}")
        if self.push_interval_s is not None and self.push_interval_s <= 0:
            raise ValueError(f"randomization push_interval_s: must be > 0 (or none), got {self.push_interval_s}")
        if self.contact_timeconst_s is not None and self.contact_timeconst_s[0] <= 0:
            raise ValueError(f"randomization contact_timeconst_s: {list(self.contact_timeconst_s)} must be > 0")

    @property
    def max_latency_steps(self) -> int:
        return self.action_latency_steps[1]


NO_RANDOMIZATION = RandomizationCfg(observation_noise=False)


def known_keys() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(RandomizationCfg))


def with_overrides(cfg: RandomizationCfg, overrides: Mapping[str, Any]) -> RandomizationCfg:
    """``cfg`` with some fields replaced; an unknown key raises ``UnknownRandomizationKey``."""
    for key in overrides:
        if key not in known_keys():
            raise UnknownRandomizationKey(key)
    try:
        return dataclasses.replace(cfg, **overrides)
    except ValueError as exc:
        raise ConfigError("randomization override", ", ".join(overrides), str(exc)) from None


def parse_override(text: str) -> tuple[str, Any]:
    """``"friction_scale=0.3,1.2"`` → ``("friction_scale", (0.3, 1.2))``; ``none``/``off`` switches a term off."""
    source = "--dr"
    key, sep, raw = (part.strip() for part in text.partition("="))
    if not sep:
        raise ConfigError(source, text, "expected KEY=VALUE, e.g. friction_scale=0.3,1.2")
    if key not in known_keys():
        raise UnknownRandomizationKey(key, source)
    hint = str(get_type_hints(RandomizationCfg)[key])
    default = getattr(RandomizationCfg(), key)
    if raw.lower() in ("none", "off"):
        if "None" in hint:
            return key, None
        return key, (0, 0) if isinstance(default, tuple) else type(default)(0)
    if hint == str(bool) or isinstance(default, bool):
        if raw.lower() not in ("true", "false", "on", "1", "0"):
            raise ConfigError(source, key, f"expected true or false, got {raw!r}")
        return key, raw.lower() in ("true", "on", "1")
    try:
        numbers = [float(p) for p in raw.split(",")]
    except ValueError:
        raise ConfigError(source, key, f"{raw!r} is not a number or LOW,HIGH") from None
    if "tuple" in hint:
        if len(numbers) != 2:
            raise ConfigError(source, key, f"expected LOW,HIGH, got {raw!r}")
        cast = int if "tuple[int" in hint else float
        return key, (cast(numbers[0]), cast(numbers[1]))
    if len(numbers) != 1:
        raise ConfigError(source, key, f"expected one number, got {raw!r}")
    return key, numbers[0]
