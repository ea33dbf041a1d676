"""Every setting of a residual fine-tuning run, as one :class:`FinetuneCfg`, and its named presets.

One frozen dataclass per concern, nested into :class:`FinetuneCfg`, which ``robot-rl finetune`` hands to tyro as
it is (the nested fields' flags without their prefixes: ``--fraction``, ``--lr``, ``--utd``):

    FinetuneCfg
    ├── run: RunCfg                       the policy, the robot, the budget, evaluations, where to write
    ├── residual: ResidualCfg             the residual's bound and network (config.py)
    ├── sac: SACCfg                       the learner (config.py)
    ├── replay: ReplayCfg                 the buffer and prior data (config.py)
    ├── calibrated: CalibratedStartCfg | None   a calibrated start (calibrated.py); None: from scratch
    └── calibrate_chain: bool             a calibrated start tells the safety chain the fitted motors

The command line shows the settings a user picks per run; every other field is a fixed, measured default
(``tyro.conf.Suppress``: code such as the benchmarks still sets them). Settings that differ by starting point
are not ``None`` placeholders: they are :data:`PRESETS`, named ``FinetuneCfg`` instances the command line starts
from (``robot-rl finetune calibrated --policy ...``). Two settings are the task's measurements, filled in by
:meth:`FinetuneCfg.for_task`: the learning rate (``TaskCfg.finetune_lr``) where the preset leaves it unset, and a
calibrated start's sim residual (``calibrated.sim_residual_cfg``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Literal

import tyro
from tyro.conf import Suppress

from robot_rl.learn.residual.calibrated import CalibratedStartCfg, sim_residual_cfg
from robot_rl.learn.residual.config import ReplayCfg, ResidualCfg, SACCfg, deferred, finetune_lr
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.typed_yaml import ConfigError

Interface = Literal["sim", "unitree-dds"]
_SHIFT_KEYS = {"kp": "kp_scale", "kd": "kd_scale", "payload": "payload_kg", "latency": "latency_steps",
               "friction": "friction_scale", "object_friction": "object_friction_scale"}


def parse_shift(text: str | None) -> RealityShift | None:
    """``"kp=0.5,payload=2.5,latency=2"`` → RealityShift; None/empty → None (the nominal sim)."""
    if not text:
        return None
    values: dict[str, float | int] = {}
    for part in text.split(","):
        key, sep, raw = (p.strip() for p in part.partition("="))
        if not sep or key not in _SHIFT_KEYS:
            raise ConfigError("--shift", part, f"expected KEY=VALUE with KEY one of {', '.join(_SHIFT_KEYS)}")
        try:
            values[_SHIFT_KEYS[key]] = int(raw) if key == "latency" else float(raw)
        except ValueError:
            raise ConfigError("--shift", key, f"{raw!r} is not a number") from None
    try:
        return RealityShift(**values)
    except ValueError as exc:
        raise ConfigError("--shift", text, str(exc)) from None


def shift_text(shift: RealityShift) -> str:
    """The ``--shift`` text of ``shift`` (what differs from the nominal sim): ``parse_shift``'s inverse."""
    nominal = RealityShift()
    return ",".join(f"{key}={getattr(shift, field)!r}" for key, field in _SHIFT_KEYS.items()
                    if getattr(shift, field) != getattr(nominal, field))


@dataclass(frozen=True)
class RunCfg:
    """The run: what is fine-tuned where, for how long, how it is scored and where it is written."""

    policy: str
    """the base policy (.onnx with its contract); its task comes from the contract's provenance."""
    robot: str = "a1"
    """robot spec name (hardware/robots/NAME.yaml)."""
    interface: Interface = "sim"
    """sim (in-process MuJoCo, lockstep) or unitree-dds (the robot or `robot-rl bridge`, real time)."""
    transitions: int = 20_000
    """policy transitions to collect (evaluation episodes are not counted; a calibrated start's log is)."""
    shift: str | None = None
    """sim only: the "real" robot's difference from the training sim, e.g. kp=0.5,payload=2.5,latency=2."""
    run_dir: str | None = None
    """output directory (default runs/residual/TASK/TIMESTAMP)."""
    resume: str | None = None
    """a previous run directory (or its checkpoint.pt) to continue from."""
    init_from: str | None = None
    """a previous run whose residual and critics start this run (its buffer and counts are not carried)."""
    eval_every: int = 2500
    """transitions between deterministic evaluations (0: none but the last)."""
    eval_episodes: int = 8
    """episodes per evaluation (fixed, seeded commands or layouts)."""
    seed: int = 0
    """seed of the learner and of the episode commands."""
    teleop: str | None = None
    """arm interventions from a device: keyboard, gamepad[:PATH], spacemouse[:PATH]."""
    fifo_priority: int | None = None
    """real time: run the loop under SCHED_FIFO at this priority (needs root or CAP_SYS_NICE)."""
    # Fixed for the command line (measured or taken from the robot's file); code may set them.
    realtime: Suppress[bool | None] = None  # None: on for a robot (unitree-dds), off for the sim
    # Training episodes this long (evaluation keeps the task's); None: the task's. 5 s did not help the A1.
    train_episode_s: Suppress[float | None] = None
    domain_id: Suppress[int | None] = None  # DDS domain (None: the robot file's)
    network_interface: Suppress[str | None] = None  # DDS network interface (None: the robot file's)
    # Torch threads of the learner process: 1 kept up in real time on 2 shared cores, 2 missed deadlines.
    learner_threads: Suppress[int] = 1

    def __post_init__(self) -> None:  # from code: a RealityShift kept as its text, paths as strings (as typed)
        if isinstance(self.shift, RealityShift):
            object.__setattr__(self, "shift", shift_text(self.shift) or None)
        for name in ("policy", "run_dir", "resume", "init_from"):
            if isinstance(getattr(self, name), os.PathLike):
                object.__setattr__(self, name, os.fspath(getattr(self, name)))


@dataclass(frozen=True)
class FinetuneCfg:
    """Every setting of a run: see the module docstring."""

    run: RunCfg
    residual: ResidualCfg = field(default_factory=ResidualCfg)
    sac: SACCfg = field(default_factory=SACCfg)
    replay: ReplayCfg = field(default_factory=ReplayCfg)
    calibrated: Suppress[CalibratedStartCfg | None] = None  # set by the "calibrated" preset
    calibrate_chain: bool = False
    """calibrated start: tell the safety chain's torque limit the fitted motor gains for the rest of the run (for
    deployment, write them into the robot's file: robot-rl calibrate prints the lines)."""

    def __post_init__(self) -> None:
        if deferred():
            return
        if self.calibrate_chain and self.calibrated is None:
            raise ValueError("calibrate_chain tells the safety chain a calibrated start's fitted motors: it needs a "
                             "calibrated start (robot-rl finetune calibrated ...)")
        if self.calibrated is not None and (self.run.resume is not None or self.run.init_from is not None):
            raise ValueError("a calibrated start trains a fresh residual: not with resume or init_from")

    @classmethod
    def of(cls, policy: str, robot: str = "a1", interface: Interface = "sim", *, residual: ResidualCfg | None = None,
           sac: SACCfg | None = None, replay: ReplayCfg | None = None, calibrated: CalibratedStartCfg | None = None,
           calibrate_chain: bool = False, **run) -> FinetuneCfg:
        """From Python: ``run``'s fields as keywords, the other concerns as their dataclasses (None: defaults)."""
        return cls(run=RunCfg(policy=str(policy), robot=robot, interface=interface, **run),
                   residual=residual or ResidualCfg(), sac=sac or SACCfg(), replay=replay or ReplayCfg(),
                   calibrated=calibrated, calibrate_chain=calibrate_chain)

    def with_fields(self, **values) -> FinetuneCfg:
        """A copy with the named fields replaced, each in the concern that has it (``run``, ``residual``, ``sac``,
        ``replay``: a field name is unique across them, as on the command line), e.g. ``with_fields(lr=1e-3,
        transitions=3000)``; a value that is None leaves the field as it is (a flag not given)."""
        concerns = {name: getattr(self, name) for name in ("run", "residual", "sac", "replay")}
        changes: dict[str, dict] = {name: {} for name in concerns}
        for key, value in values.items():
            owner = [name for name, cfg in concerns.items() if key in {f.name for f in dataclasses.fields(cfg)}]
            if not owner:
                raise TypeError(f"no setting named {key!r} in {', '.join(concerns)}")
            if value is not None:
                changes[owner[0]][key] = value
        return dataclasses.replace(self, **{name: dataclasses.replace(concerns[name], **changes[name])
                                            for name in concerns})

    def for_task(self, task) -> FinetuneCfg:
        """The settings with the task's measurements filled in where they are left to it: the learning rate
        (``TaskCfg.finetune_lr``, else SAC's), a calibrated start's sim residual (``sim_residual_cfg``, seeded with
        the run's seed); and a calibrated start's chain as ``calibrate_chain`` asks."""
        sac = self.sac if self.sac.lr is not None else dataclasses.replace(self.sac, lr=finetune_lr(task))
        calibrated = self.calibrated
        if calibrated is not None:
            calibrated = dataclasses.replace(
                calibrated, sim=calibrated.sim or sim_residual_cfg(task, self.run.seed),
                chain="calibrated" if self.calibrate_chain else calibrated.chain)
        return dataclasses.replace(self, sac=sac, calibrated=calibrated)


_POLICY = tyro.MISSING  # presets name no policy: the command line asks for one
# From scratch: SAC's defaults, the task's learning rate (a1-flat: 1e-3, measured; else 3e-4).
SCRATCH = FinetuneCfg(run=RunCfg(policy=_POLICY))
# A calibrated start (robot log → calibrated sim → residual by PPO there → the robot), measured on the A1 sim-as-real
# benchmark (benchmarks/RESULTS_residual_calibrated.md). The bound: 0.2 of the action clip, where the sim residual
# recovered ≈ 0.05 more of the gap than at 0.1 for the same sim budget (from scratch on the robot, SAC did worse with
# wider bounds). The robot-side learner keeps the good start: its fresh critics fit the robot's first transitions
# before the actor moves (2,000 updates), the actor is anchored to the start (1.0), and it learns at 3e-4; with SAC's
# own settings (1e-3, no anchor) its first actor steps undid the start (the A1's return fell from 24.5 to 14 within
# 5,000 transitions).
CALIBRATED = FinetuneCfg(run=RunCfg(policy=_POLICY), residual=ResidualCfg(fraction=0.2),
                         sac=SACCfg(lr=3e-4, actor_warmup_updates=2000, anchor_penalty=1.0),
                         calibrated=CalibratedStartCfg())

PRESETS: dict[str, tuple[FinetuneCfg, str]] = {
    "scratch": (SCRATCH, "the residual learned on the robot from zero (the default)"),
    "calibrated": (CALIBRATED, "log the base alone on the robot (3,000 ticks, counted), fit the training sim's gains, "
                   "latency, payload and friction to the log, train the residual there by PPO, then fine-tune on "
                   "the robot from it (bound 0.2, learning rate 3e-4, 2,000 critic-only updates, anchor 1)"),
}
