"""Spec joints ↔ serialized Unitree messages through the struct codec (robot_rl.dds.codec): the hot path of
``UnitreeDdsRobot`` (commands out, states in) and of the sim bridge (commands in, states out).

Each class keeps one message buffer and numpy views of the columns it touches, gathered or scattered at the
spec's motor slots; the values are those of :class:`robot_rl.hardware.unitree_dds.MotorSlotMap`'s IDL-object
methods (tests/hardware/test_unitree_wire.py compares them), at a fraction of the cost.
"""

from __future__ import annotations

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.dds import unitree_go as go
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.codec import MessageCodec

_POS_STOP_MIN, _VEL_STOP_MIN = 0.5 * go.POS_STOP_F, 0.5 * go.VEL_STOP_F
_F32_MAX = float(np.finfo(np.float32).max)
_COMMAND_FIELDS = ("q_target", "dq_target", "tau_ff", "kp", "kd")  # in the order of the motor columns below
_MOTOR_COLUMNS = ("q", "dq", "tau", "kp", "kd")


def wire_values(spec, command: JointCommand) -> tuple[np.ndarray, ...]:
    """q, dq, tau, kp, kd of ``command`` as float32 (what the wire carries); ValueError naming the joint for a
    wrong shape or a value that is not a finite float32."""
    n = spec.num_joints
    out = []
    for name in _COMMAND_FIELDS:
        values = np.asarray(getattr(command, name), dtype=np.float64)
        if values.shape != (n,):
            raise ValueError(f"JointCommand.{name} has shape {values.shape}, robot {spec.name!r} has {n} joints")
        if not (np.abs(values) <= _F32_MAX).all():  # False for NaN too
            i = int(np.argmax(~(np.abs(values) <= _F32_MAX)))
            raise ValueError(f"JointCommand.{name}[{i}] ({spec.joint_names[i]}) = {float(values[i])!r} "
                             "is not a finite float32; refusing to send it to the motors")
        out.append(values.astype(np.float32))
    return tuple(out)


class CommandEncoder:
    """Controller side: JointCommand → serialized LowCmd (CRC set). Unused slots keep the blank command's
    passive values; the spec slots are in the family's active mode."""

    def __init__(self, slot_map) -> None:
        self.slot_map = slot_map
        self.codec = MessageCodec(slot_map.family.LowCmd_)
        blank = slot_map.blank_command()
        mode = hg.MOTOR_ENABLE if slot_map.is_hg else go.MOTOR_MODE_SERVO
        for slot in slot_map.slots:
            blank.motor_cmd[slot].mode = mode
        self.codec.load_message(blank)
        self._slots = np.array(slot_map.slots, dtype=np.intp)
        self._columns = tuple(self.codec.view(f"motor_cmd.{c}") for c in _MOTOR_COLUMNS)
        reserve = self.codec.view("reserve")
        self._tag = reserve[0:1] if slot_map.is_hg else reserve
        if slot_map.is_hg:
            self._mode_machine, self._mode_pr = self.codec.view("mode_machine"), self.codec.view("mode_pr")

    def encode(self, command: JointCommand, *, tag: int = 0, mode_machine: int = 0) -> tuple[bytes, JointCommand]:
        """The bytes to publish, and the command as sent (float32-rounded, float64 arrays)."""
        wire = wire_values(self.slot_map.spec, command)
        for column, values in zip(self._columns, wire, strict=True):
            column[self._slots] = values
        self._tag[...] = tag
        if self.slot_map.is_hg:
            self._mode_machine[...] = mode_machine
            self._mode_pr[...] = hg.MODE_PR
        self.codec.set_crc()
        q, dq, tau, kp, kd = (w.astype(np.float64) for w in wire)
        return self.codec.data, JointCommand(q, dq, kp, kd, tau)


class StateDecoder:
    """Controller side: serialized LowState → RobotState (after its CRC check)."""

    def __init__(self, slot_map) -> None:
        self.slot_map = slot_map
        self.codec = MessageCodec(slot_map.family.LowState_)
        self._slots = np.array(slot_map.slots, dtype=np.intp)
        c = self.codec.view
        self._q, self._dq, self._tau = c("motor_state.q"), c("motor_state.dq"), c("motor_state.tau_est")
        self._quat, self._gyro = c("imu_state.quaternion"), c("imu_state.gyroscope")
        self._acc, self._tick = c("imu_state.accelerometer"), c("tick")
        self._mode_machine = c("mode_machine") if slot_map.is_hg else None

    def load(self, data: bytes) -> bool:
        """Take ``data`` in; False when its CRC is wrong. Another encoding than XCDR1 little-endian goes through
        the IDL class (slow, but it decodes)."""
        if not self.codec.load(data):
            self.codec.load_message(self.slot_map.family.LowState_.deserialize(data))
        return self.codec.crc_ok()

    @property
    def mode_machine(self) -> int:
        return int(self._mode_machine) if self._mode_machine is not None else 0

    def state(self, timestamp: float) -> RobotState:
        """The loaded message as a RobotState (new arrays: the caller may keep it)."""
        slots = self._slots
        return RobotState(
            timestamp=timestamp, tick=int(self._tick),
            q=self._q[slots].astype(np.float64), dq=self._dq[slots].astype(np.float64),
            tau=self._tau[slots].astype(np.float64),
            base_quat=self._quat.astype(np.float64), base_ang_vel=self._gyro.astype(np.float64),
            base_lin_acc=self._acc.astype(np.float64), base_lin_vel=None, base_pos=None,
        )


class CommandDecoder:
    """Firmware side (the sim bridge): serialized LowCmd → what the motors execute (see
    ``MotorSlotMap.decode_command``: a motor not in the active mode is passive; unitree_go's stop sentinels
    switch the kp / kd term off; None when a value is not finite)."""

    def __init__(self, slot_map) -> None:
        self.slot_map = slot_map
        self.codec = MessageCodec(slot_map.family.LowCmd_)
        self._slots = np.array(slot_map.slots, dtype=np.intp)
        self._columns = tuple(self.codec.view(f"motor_cmd.{c}") for c in _MOTOR_COLUMNS)
        # unitree_go's uint8 mode has no fixed stride (robot_rl.dds.codec): one view per slot.
        self._modes = tuple(self.codec.view(f"motor_cmd[{s}].mode") for s in slot_map.slots)
        self._active_mode = hg.MOTOR_ENABLE if slot_map.is_hg else go.MOTOR_MODE_SERVO
        self._crc = self.codec.view("crc")
        reserve = self.codec.view("reserve")
        self._tag = reserve[0:1] if slot_map.is_hg else reserve
        self._mode_machine = self.codec.view("mode_machine") if slot_map.is_hg else None
        self._mode_pr = self.codec.view("mode_pr") if slot_map.is_hg else None
        self._unused_modes = tuple(self.codec.view(f"motor_cmd[{s}].mode") for s in slot_map.unused) \
            if slot_map.is_hg else ()

    def load(self, data: bytes) -> None:
        if not self.codec.load(data):
            self.codec.load_message(self.slot_map.family.LowCmd_.deserialize(data))

    def corrupt_crc(self) -> None:
        """One flipped bit of the crc field (the fault injector's "wire")."""
        self._crc[...] ^= 0x00010000

    def crc_ok(self) -> bool:
        return self.codec.crc_ok()

    @property
    def tag(self) -> int:
        return int(self._tag.reshape(-1)[0])

    @property
    def mode_machine(self) -> int:
        return int(self._mode_machine) if self._mode_machine is not None else 0

    @property
    def mode_pr(self) -> int:
        return int(self._mode_pr) if self._mode_pr is not None else 0

    def unused_enabled(self) -> int:
        """unitree_hg: how many motor slots that drive no spec joint the loaded command enables (0 for
        unitree_go, whose SDK default keeps every slot in servo mode with the stop sentinels)."""
        return sum(int(m) == hg.MOTOR_ENABLE for m in self._unused_modes)

    def command(self) -> JointCommand | None:
        slots = self._slots
        q, dq, tau, kp, kd = (c[slots].astype(np.float64) for c in self._columns)
        passive = np.array([int(m) != self._active_mode for m in self._modes])
        if passive.any():
            for values in (q, dq, tau, kp, kd):
                values[passive] = 0.0
        if not all(np.isfinite(v).all() for v in (q, dq, kp, kd, tau)):
            return None
        if not self.slot_map.is_hg:
            pos_stop, vel_stop = np.abs(q) >= _POS_STOP_MIN, np.abs(dq) >= _VEL_STOP_MIN
            q[pos_stop], kp[pos_stop] = 0.0, 0.0
            dq[vel_stop], kd[vel_stop] = 0.0, 0.0
        return JointCommand(q, dq, kp, kd, tau)


class StateEncoder:
    """Firmware side (the sim bridge): RobotState → serialized LowState, as ``MotorSlotMap.encode_state``
    fills it (spec slots in the active mode, IMU, tick), CRC set."""

    def __init__(self, slot_map, mode_machine: int = 0) -> None:
        self.slot_map = slot_map
        self.codec = MessageCodec(slot_map.family.LowState_)
        blank = slot_map.family.default_low_state()
        if slot_map.is_hg:
            blank.mode_machine = mode_machine
        for slot in slot_map.slots:
            blank.motor_state[slot].mode = hg.MOTOR_ENABLE if slot_map.is_hg else go.MOTOR_MODE_SERVO
        self.codec.load_message(blank)
        self._slots = np.array(slot_map.slots, dtype=np.intp)
        c = self.codec.view
        self._q, self._dq, self._tau = c("motor_state.q"), c("motor_state.dq"), c("motor_state.tau_est")
        self._quat, self._gyro = c("imu_state.quaternion"), c("imu_state.gyroscope")
        self._acc, self._rpy, self._tick = c("imu_state.accelerometer"), c("imu_state.rpy"), c("tick")
        self._crc = c("crc")

    def encode(self, state: RobotState, tick: int, rpy: list[float], *, corrupt_crc: bool = False) -> bytes:
        slots = self._slots
        self._q[slots] = state.q
        self._dq[slots] = state.dq
        self._tau[slots] = state.tau
        self._quat[:] = state.base_quat
        self._gyro[:] = state.base_ang_vel
        self._acc[:] = state.base_lin_acc
        self._rpy[:] = rpy
        self._tick[...] = tick & 0xFFFFFFFF
        self.codec.set_crc()
        if corrupt_crc:
            self._crc[...] ^= 0x00010000
        return self.codec.data
