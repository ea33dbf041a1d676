"""Real-to-sim calibration: the training simulator's physical parameters fitted to a robot's own log.

A fine-tuning run on a robot has few transitions to learn from; a simulator that behaves like *this* robot has
as many as wanted. This module fits the parameters that domain randomization varies — and that a
:class:`~robot_rl.learn.residual.shifted_sim.RealityShift` names — to a short log of the robot driven by the
base policy (states as the robot reported them, commands as the host sent them):

1. **Actuators from the measured torques** (linear least squares, no simulation): the motors report
   τ = s_kp·kp·(clip(q_target) − q) + s_kd·kd·(dq_target − dq) + τ_ff for the command written ``latency``
   ticks before the last one, so every candidate latency is one least-squares fit of (s_kp, s_kd); the
   latency with the smallest residual wins. Samples where the motor saturates are left out.
2. **The body by simulation** (payload on the base or the hand, ground friction): windows of the log replayed
   in the *training* world (the model PPO trains in, not the robot's own sim) from each window's recorded
   state, with the recorded commands through the fitted actuators, ``horizon_ticks`` policy periods ahead; the
   error between predicted and recorded joints and base motion, each channel in units of its spread in the
   log, is minimized by coordinate search over a grid. All candidates of one sweep run as one
   ``mujoco.rollout`` batch.

A robot that reports no torques (all zero) gets its actuators fitted by simulation too (the same search over
latency, s_kp and s_kd). A legged robot that reports no base position and velocity (no state estimator: the
Unitree low-level state has neither) cannot be replayed: its actuators are fitted from the torques alone and
its payload and friction stay nominal (said in the result's ``notes``).

The result is a ``RealityShift``: the calibrated sim is ``shifted_vec_env`` (training) or ``ShiftedSimRobot``
(the deploy runtime's sim) with it.

On hardware the robot is never exactly a member of the simulator's family: the calibrated sim is its nearest
member, and what remains is left to the residual's fine-tuning on the robot itself.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.learn.residual.shifted_sim import RealityShift, apply_shift_to_model
from robot_rl.robots.spec import RobotSpec
from robot_rl.sim.env_math import quat_mul_rot, quat_rotate_inverse
from robot_rl.tasks.observations import projected_gravity

_STATE_KEYS = ("q", "dq", "tau", "base_quat", "base_ang_vel", "base_lin_vel", "base_pos")
_COMMAND_KEYS = ("q_target", "dq_target", "kp", "kd", "tau_ff")


@dataclass
class CalibrationLog:
    """A robot's log, tick by tick: the state read at the start of tick t and the command written at its end.
    ``segment`` numbers unbroken stretches (a person re-setting the robot, a scene reset): windows of the fit
    never cross one."""

    arrays: dict[str, np.ndarray]  # _STATE_KEYS (T, ·) and _COMMAND_KEYS (T, J), float64
    segment: np.ndarray  # (T,) int
    period_s: float
    robot: str

    def __len__(self) -> int:
        return len(self.segment)

    def check_robot(self, spec: RobotSpec) -> None:
        if spec.name != self.robot:
            raise ValueError(f"the calibration log is of robot {self.robot!r}, not {spec.name!r}")

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(path, segment=self.segment, period_s=self.period_s, robot=self.robot, **self.arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> CalibrationLog:
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"calibration log {path} does not exist")
        try:
            with np.load(path) as f:
                arrays = {k: f[k] for k in f.files}
        except (OSError, EOFError, ValueError) as exc:  # not a zip; numpy then tries (and refuses) a pickle
            raise ValueError(f"calibration log {path} is not a readable .npz ({str(exc)[:80]})") from None
        missing = [k for k in (*_STATE_KEYS, *_COMMAND_KEYS, "segment", "period_s", "robot") if k not in arrays]
        if missing:
            raise ValueError(f"calibration log {path} lacks {', '.join(missing)}")
        return cls({k: arrays[k] for k in (*_STATE_KEYS, *_COMMAND_KEYS)}, arrays["segment"],
                   float(arrays["period_s"]), str(arrays["robot"]))


class CalibrationRecorder:
    """Collects a :class:`CalibrationLog` from a control loop: call it with each tick's state and the command
    written (``EpisodeLoop(recorder=...)``), and :meth:`new_segment` wherever the log breaks."""

    def __init__(self, spec: RobotSpec):
        self.spec = spec
        self._rows: dict[str, list[np.ndarray]] = {k: [] for k in (*_STATE_KEYS, *_COMMAND_KEYS)}
        self._segment: list[int] = []
        self._current = 0

    def new_segment(self) -> None:
        if self._segment and self._segment[-1] == self._current:
            self._current += 1

    def __call__(self, state: RobotState, command: JointCommand) -> None:
        for key in _STATE_KEYS:
            value = getattr(state, key)
            # Not reported (a fixed base; a legged robot without a state estimator): NaN, so the fit knows.
            value = np.full(3, np.nan) if value is None else value
            self._rows[key].append(np.asarray(value, dtype=np.float64).copy())
        for key in _COMMAND_KEYS:
            self._rows[key].append(np.asarray(getattr(command, key), dtype=np.float64).copy())
        self._segment.append(self._current)

    def log(self) -> CalibrationLog:
        if not self._segment:
            raise ValueError("the calibration recorder saw no ticks")
        return CalibrationLog({k: np.stack(v) for k, v in self._rows.items()}, np.asarray(self._segment),
                              self.spec.timing.policy_period_s, self.spec.name)


@dataclass(frozen=True)
class CalibrationCfg:
    max_latency_steps: int = 3  # candidate latencies 0 … this, in policy periods
    kp_scale_range: tuple[float, float] = (0.3, 1.5)  # searched only when the robot reports no torques
    kd_scale_range: tuple[float, float] = (0.3, 2.0)
    payload_range_kg: tuple[float, float] = (0.0, 8.0)
    friction_range: tuple[float, float] = (0.2, 1.5)
    grid_points: int = 9  # per parameter and sweep
    sweeps: int = 3  # coordinate-search sweeps; each later one searches a grid half as wide around the best
    horizon_ticks: int = 5  # policy periods each window is predicted ahead
    windows: int = 192
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("kp_scale_range", "kd_scale_range", "payload_range_kg", "friction_range"):
            lo, hi = getattr(self, name)
            if not lo <= hi or (name != "payload_range_kg" and lo <= 0):
                raise ValueError(f"calibration {name}: need 0 < low ≤ high (payload: 0 ≤ low), got {(lo, hi)}")
        if self.grid_points < 2 or self.sweeps < 1 or self.horizon_ticks < 1 or self.windows < 1:
            raise ValueError(f"calibration: grid_points ≥ 2, sweeps, horizon_ticks and windows ≥ 1, got {self}")


@dataclass
class CalibrationResult:
    shift: RealityShift
    error_nominal: float  # prediction error of the uncalibrated training sim (units of each channel's spread)
    error_calibrated: float
    actuator_fit: dict = field(default_factory=dict)  # per latency: s_kp, s_kd, relative residual
    ticks: int = 0
    notes: list[str] = field(default_factory=list)  # what could not be fitted, and why

    def to_json(self) -> dict:
        return {"shift": dataclasses.asdict(self.shift), "shift_text": self.shift.describe(),
                "error_nominal": self.error_nominal, "error_calibrated": self.error_calibrated,
                "actuator_fit": self.actuator_fit, "ticks": self.ticks, "notes": self.notes}


# -- 1. actuators from torques ------------------------------------------------------------------------------

def fit_actuators(log: CalibrationLog, spec: RobotSpec, max_latency: int) -> dict[int, dict[str, float]]:
    """Per candidate latency L: the least-squares (s_kp, s_kd) of τ_t against the command of tick t − 1 − L,
    and the residual relative to the torques' spread. Empty when the robot reports no torques."""
    a = log.arrays
    if not np.any(a["tau"]):
        return {}
    lower, upper = spec.position_lower, spec.position_upper
    effort = spec.effort_limits
    out: dict[int, dict[str, float]] = {}
    for lat in range(max_latency + 1):
        t = np.arange(1 + lat, len(log))
        t = t[log.segment[t] == log.segment[t - 1 - lat]]
        if len(t) < 10:
            continue
        c = t - 1 - lat
        stiff = a["kp"][c] * (np.clip(a["q_target"][c], lower, upper) - a["q"][t])
        damp = a["kd"][c] * (a["dq_target"][c] - a["dq"][t])
        y = a["tau"][t] - a["tau_ff"][c]
        keep = np.abs(a["tau"][t]) < 0.98 * effort  # a saturated motor says nothing about its gains
        x = np.stack([stiff[keep], damp[keep]], axis=1)
        coef, *_ = np.linalg.lstsq(x, y[keep], rcond=None)
        resid = y[keep] - x @ coef
        out[lat] = {"kp_scale": float(coef[0]), "kd_scale": float(coef[1]),
                    "relative_residual": float(np.sqrt(np.mean(resid**2)) / (np.std(y[keep]) + 1e-12))}
    return out


# -- 2. the body by simulation --------------------------------------------------------------------------------

class WindowPredictor:
    """Replays windows of a log in the training world under candidate parameters, all in one rollout batch.

    Compared, as the robot measures them: the joints, and for a floating base its height, its body-frame velocity
    and, in the IMU frame, the gyro and the gravity direction (the prediction goes through the same base → IMU
    rotation the vectorized env observes with)."""

    def __init__(self, log: CalibrationLog, spec: RobotSpec, cfg: CalibrationCfg):
        import mujoco
        from mujoco import rollout

        from robot_rl.sim.world import build_training_world

        log.check_robot(spec)
        self.mujoco, self.spec, self.cfg, self.log = mujoco, spec, cfg, log
        self.robot = build_training_world(spec, None).robot
        self.floating = self.robot.free_qpos_adr is not None  # a fixed base (an arm): joints alone are compared
        self.model = self.robot.model
        self.decimation = spec.timing.decimation
        self._data = [mujoco.MjData(self.model) for _ in range(2)]
        self._pool = rollout.Rollout(nthread=2)
        self._scratch = mujoco.MjData(self.model)
        self.robot.reset(self._scratch)
        self._imu_rot = self.robot.imu_in_base(self._scratch)
        self._spec_state = mujoco.mjtState.mjSTATE_FULLPHYSICS
        self.starts = self._pick_windows()
        self.targets = self._recorded_channels()
        scale = self.targets.reshape(-1, self.targets.shape[-1]).std(axis=0)
        self._scale = np.where(scale > 1e-6, scale, 1.0)
        self._init = self._initial_states()

    def _pick_windows(self) -> np.ndarray:
        h, lat, seg = self.cfg.horizon_ticks, self.cfg.max_latency_steps, self.log.segment
        t = np.arange(1 + lat, len(self.log) - h)
        t = t[(seg[t - 1 - lat] == seg[t]) & (seg[t + h] == seg[t])]
        if len(t) == 0:
            raise ValueError(f"the calibration log ({len(self.log)} ticks) has no unbroken stretch of "
                             f"{h + lat + 2} ticks to replay")
        rng = np.random.default_rng(self.cfg.seed)
        return np.sort(rng.choice(t, size=min(self.cfg.windows, len(t)), replace=False))

    def _channels(self, q, dq, height=None, lin_body=None, gyro=None, imu_quat=None) -> np.ndarray:
        """(..., channels): joints; for a floating base also its height, body-frame velocity, gyro and the gravity
        direction in the IMU frame. Every input (..., ·); quaternions w x y z."""
        if not self.floating:
            return np.concatenate([q, dq], axis=-1)
        gravity = projected_gravity(imu_quat.reshape(-1, 4)).reshape(*imu_quat.shape[:-1], 3)
        return np.concatenate([q, dq, height[..., None], lin_body, gyro, gravity], axis=-1)

    def _recorded_channels(self) -> np.ndarray:
        a = self.log.arrays
        idx = self.starts[:, None] + np.arange(1, self.cfg.horizon_ticks + 1)[None]  # (W, H)
        if not self.floating:
            return self._channels(a["q"][idx], a["dq"][idx])
        return self._channels(a["q"][idx], a["dq"][idx], a["base_pos"][idx][..., 2], a["base_lin_vel"][idx],
                              a["base_ang_vel"][idx], a["base_quat"][idx])

    def _initial_states(self) -> np.ndarray:
        """The full physics state at each window's start: the recorded joints and, for a floating base, its pose
        and velocity (the IMU's orientation and gyro brought back to the base frame)."""
        mj, a, r, d = self.mujoco, self.log.arrays, self.robot, self._scratch
        t = self.starts
        if self.floating:
            base_quat = quat_mul_rot(a["base_quat"][t], self._imu_rot.T)
            # v_world = R(q)·v_body = R(q̄)ᵀ·v_body, with q̄ the conjugate
            lin_world = quat_rotate_inverse(base_quat * np.array([1.0, -1.0, -1.0, -1.0]), a["base_lin_vel"][t])
            ang_body = a["base_ang_vel"][t] @ self._imu_rot.T
        states = []
        for k, tick in enumerate(t):
            d.qpos[:] = self.model.qpos0
            d.qvel[:] = 0.0
            d.qpos[r.qpos_adr], d.qvel[r.qvel_adr] = a["q"][tick], a["dq"][tick]
            if self.floating:
                fq, fv = r.free_qpos_adr, r.free_qvel_adr
                d.qpos[fq : fq + 3], d.qpos[fq + 3 : fq + 7] = a["base_pos"][tick], base_quat[k]
                d.qvel[fv : fv + 3], d.qvel[fv + 3 : fv + 6] = lin_world[k], ang_body[k]
            mj.mj_forward(self.model, d)
            state = np.empty(mj.mj_stateSize(self.model, self._spec_state))
            mj.mj_getState(self.model, d, state, self._spec_state)
            states.append(state)
        return np.stack(states)

    def _controls(self, p: RealityShift) -> np.ndarray:
        a, h, dec = self.log.arrays, self.cfg.horizon_ticks, self.decimation
        c = self.starts[:, None] + np.arange(h)[None] - p.latency_steps  # the command acting in each tick
        ctrl = self.robot.pd_ctrl(a["q_target"][c], a["dq_target"][c], a["kp"][c] * p.kp_scale,
                                  a["kd"][c] * p.kd_scale, a["tau_ff"][c])  # (W, H, nu)
        return np.repeat(ctrl, dec, axis=1)

    def _model_for(self, p: RealityShift):
        mj = self.mujoco
        model = copy.copy(self.model)
        apply_shift_to_model(model, mj.MjData(model), self.spec, self.robot.base_body_id, self.robot.joint_ids, p)
        return model

    def errors(self, candidates: list[RealityShift]) -> np.ndarray:
        """Mean squared normalized prediction error of each candidate."""
        r, w, h, dec = self.robot, len(self.starts), self.cfg.horizon_ticks, self.decimation
        models, ctrl = [], []
        for p in candidates:
            models += [self._model_for(p)] * w
            ctrl.append(self._controls(p))
        init = np.tile(self._init, (len(candidates), 1))
        state, _ = self._pool.rollout(models, self._data, init, np.concatenate(ctrl), nstep=h * dec)
        end = state[:, dec - 1 :: dec].reshape(-1, state.shape[-1])  # after each tick's last substep, flat
        nq, nv = self.model.nq, self.model.nv
        qpos, qvel = end[:, 1 : 1 + nq], end[:, 1 + nq : 1 + nq + nv]
        if self.floating:
            fq, fv = r.free_qpos_adr, r.free_qvel_adr
            quat = qpos[:, fq + 3 : fq + 7]
            predicted = self._channels(qpos[:, r.qpos_adr], qvel[:, r.qvel_adr], qpos[:, fq + 2],
                                       quat_rotate_inverse(quat, qvel[:, fv : fv + 3]),
                                       qvel[:, fv + 3 : fv + 6] @ self._imu_rot, quat_mul_rot(quat, self._imu_rot))
        else:
            predicted = self._channels(qpos[:, r.qpos_adr], qvel[:, r.qvel_adr])
        err = ((predicted.reshape(len(candidates), w, h, -1) - self.targets[None]) / self._scale) ** 2
        err = np.where(np.isfinite(err), err, 1e6)
        return err.mean(axis=(1, 2, 3))


def _grid(center: float, lo: float, hi: float, width: float, n: int) -> list[float]:
    return sorted({float(np.clip(v, lo, hi)) for v in np.linspace(center - width / 2, center + width / 2, n)})


def _coordinate_search(predictor: WindowPredictor, start: RealityShift, ranges: dict[str, tuple[float, float]],
                       cfg: CalibrationCfg) -> tuple[RealityShift, float]:
    """Each parameter in turn over a grid, the others held; later sweeps narrow the grid around the best."""
    best, widths = start, {k: hi - lo for k, (lo, hi) in ranges.items()}
    for sweep in range(cfg.sweeps):
        for name, (lo, hi) in ranges.items():
            center = getattr(best, name) if sweep else (lo + hi) / 2
            values = _grid(center, lo, hi, widths[name] / 2**sweep, cfg.grid_points)
            errs = predictor.errors([dataclasses.replace(best, **{name: v}) for v in values])
            best = dataclasses.replace(best, **{name: values[int(np.argmin(errs))]})
    return best, float(predictor.errors([best])[0])


def calibrate(log: CalibrationLog, spec: RobotSpec, cfg: CalibrationCfg | None = None) -> CalibrationResult:
    """Fit a ``RealityShift`` to ``log`` (see the module docstring)."""
    cfg = cfg or CalibrationCfg()
    log.check_robot(spec)
    actuators = fit_actuators(log, spec, cfg.max_latency_steps)
    start = RealityShift(payload_kg=float(np.clip(0.0, *cfg.payload_range_kg)))
    if actuators:
        lat = min(actuators, key=lambda k: actuators[k]["relative_residual"])
        start = dataclasses.replace(start, kp_scale=max(actuators[lat]["kp_scale"], 1e-3),
                                    kd_scale=max(actuators[lat]["kd_scale"], 1e-3), latency_steps=lat)
    replayable = not spec.sim_model.floating_base or bool(np.isfinite(log.arrays["base_lin_vel"]).all()
                                                           and np.isfinite(log.arrays["base_pos"]).all())
    if not replayable:
        if not actuators:
            raise ValueError(f"the {spec.name} log has neither joint torques (to fit the motors) nor the base's "
                             "position and velocity (to replay it): nothing to calibrate from")
        return CalibrationResult(shift=_rounded(start), error_nominal=float("nan"),
                                 error_calibrated=float("nan"), actuator_fit={str(k): v for k, v in actuators.items()},
                                 ticks=len(log), notes=["no base position and velocity in the log (no state "
                                                        "estimator): payload and friction left nominal"])
    predictor = WindowPredictor(log, spec, cfg)
    body = {"payload_kg": cfg.payload_range_kg}
    if predictor.floating:  # an arm's friction acts only on what it pushes, which the replayed world leaves out
        body["friction_scale"] = cfg.friction_range
    if actuators:
        best, error = _coordinate_search(predictor, start, body, cfg)
    else:  # no torques: the actuators by simulation as well, every latency searched in full
        ranges = {"kp_scale": cfg.kp_scale_range, "kd_scale": cfg.kd_scale_range, **body}
        fits = [_coordinate_search(predictor, dataclasses.replace(start, latency_steps=k), ranges, cfg)
                for k in range(cfg.max_latency_steps + 1)]
        best, error = min(fits, key=lambda f: f[1])
    error_nominal = float(predictor.errors([RealityShift()])[0])
    return CalibrationResult(shift=_rounded(best), error_nominal=error_nominal, error_calibrated=error,
                             actuator_fit={str(k): v for k, v in actuators.items()}, ticks=len(log))


def _rounded(p: RealityShift) -> RealityShift:
    return dataclasses.replace(p, **{k: round(getattr(p, k), 3) for k in
                                     ("kp_scale", "kd_scale", "payload_kg", "friction_scale")})
