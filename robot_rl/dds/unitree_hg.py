"""Unitree ``unitree_hg`` low-level DDS messages (humanoids: G1, H1-2).

Field for field as Unitree's public IDL (unitree_sdk2 ``include/unitree/idl/hg/*.hpp``, the
``unitree_hg.msg.dds_`` module of unitree_sdk2_python and unitree_ros2's ``unitree_hg`` .msg files). The
``typename`` strings, the field order and every field's width are the wire contract with the robot:
change none of them.

``mode_machine`` identifies the robot variant (e.g. G1 23-dof vs 29-dof); the SDK examples copy it from
the robot's ``LowState_`` into every command, and so must we. ``mode_pr`` selects how the ankle (and
waist) joints are addressed: 0 = pitch/roll (PR), 1 = the two motors directly (AB).
"""

# No ``from __future__ import annotations`` here: Cyclone DDS reads string annotations as IDL type names.
from dataclasses import dataclass, field

from robot_rl.dds import CYCLONEDDS_MISSING

try:
    import cyclonedds.idl as idl
    import cyclonedds.idl.annotations as annotate
    import cyclonedds.idl.types as types
except ImportError as exc:  # only without the deploy extra
    raise ImportError(CYCLONEDDS_MISSING) from exc

NUM_MOTORS = 35  # motor slots in LowCmd_/LowState_ (G1 uses 29, H1-2 uses 27)

MODE_PR = 0  # ankle/waist commanded as pitch/roll joints
MODE_AB = 1  # ankle/waist commanded as the two motors A/B
MOTOR_ENABLE = 1
MOTOR_DISABLE = 0


def _zeros(n: int) -> list:
    return [0] * n


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorCmd_(idl.IdlStruct, typename="unitree_hg.msg.dds_.MotorCmd_"):
    mode: types.uint8 = 0  # 1 enable, 0 disable
    q: types.float32 = 0.0
    dq: types.float32 = 0.0
    tau: types.float32 = 0.0
    kp: types.float32 = 0.0
    kd: types.float32 = 0.0
    reserve: types.uint32 = 0


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.MotorState_"):
    mode: types.uint8 = 0
    q: types.float32 = 0.0
    dq: types.float32 = 0.0
    ddq: types.float32 = 0.0
    tau_est: types.float32 = 0.0
    temperature: types.array[types.int16, 2] = field(default_factory=lambda: _zeros(2))  # casing, winding °C
    vol: types.float32 = 0.0
    sensor: types.array[types.uint32, 2] = field(default_factory=lambda: _zeros(2))
    motorstate: types.uint32 = 0  # error bits
    reserve: types.array[types.uint32, 4] = field(default_factory=lambda: _zeros(4))


@dataclass
@annotate.final
@annotate.autoid("sequential")
class IMUState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.IMUState_"):
    quaternion: types.array[types.float32, 4] = field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])  # w x y z
    gyroscope: types.array[types.float32, 3] = field(default_factory=lambda: [0.0] * 3)
    accelerometer: types.array[types.float32, 3] = field(default_factory=lambda: [0.0] * 3)
    rpy: types.array[types.float32, 3] = field(default_factory=lambda: [0.0] * 3)
    temperature: types.int16 = 0


@dataclass
@annotate.final
@annotate.autoid("sequential")
class BmsCmd_(idl.IdlStruct, typename="unitree_hg.msg.dds_.BmsCmd_"):
    cmd: types.uint8 = 0
    reserve: types.array[types.uint8, 40] = field(default_factory=lambda: bytearray(40))


@dataclass
@annotate.final
@annotate.autoid("sequential")
class BmsState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.BmsState_"):
    version_high: types.uint8 = 0
    version_low: types.uint8 = 0
    fn: types.uint8 = 0
    cell_vol: types.array[types.uint16, 40] = field(default_factory=lambda: _zeros(40))
    bmsvoltage: types.array[types.uint32, 3] = field(default_factory=lambda: _zeros(3))
    current: types.int32 = 0
    soc: types.uint8 = 0
    soh: types.uint8 = 0
    temperature: types.array[types.int16, 12] = field(default_factory=lambda: _zeros(12))
    cycle: types.uint16 = 0
    manufacturer_date: types.uint16 = 0
    bmsstate: types.array[types.uint32, 5] = field(default_factory=lambda: _zeros(5))
    reserve: types.array[types.uint32, 3] = field(default_factory=lambda: _zeros(3))


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowCmd_(idl.IdlStruct, typename="unitree_hg.msg.dds_.LowCmd_"):
    mode_pr: types.uint8 = 0
    mode_machine: types.uint8 = 0
    motor_cmd: types.array[MotorCmd_, NUM_MOTORS] = field(
        default_factory=lambda: [MotorCmd_() for _ in range(NUM_MOTORS)])
    reserve: types.array[types.uint32, 4] = field(default_factory=lambda: _zeros(4))
    crc: types.uint32 = 0


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.LowState_"):
    version: types.array[types.uint32, 2] = field(default_factory=lambda: _zeros(2))
    mode_pr: types.uint8 = 0
    mode_machine: types.uint8 = 0
    tick: types.uint32 = 0
    imu_state: IMUState_ = field(default_factory=IMUState_)
    motor_state: types.array[MotorState_, NUM_MOTORS] = field(
        default_factory=lambda: [MotorState_() for _ in range(NUM_MOTORS)])
    wireless_remote: types.array[types.uint8, 40] = field(default_factory=lambda: bytearray(40))
    reserve: types.array[types.uint32, 4] = field(default_factory=lambda: _zeros(4))
    crc: types.uint32 = 0


def default_low_cmd(mode_machine: int = 0, mode_pr: int = MODE_PR) -> LowCmd_:
    """A passive low-level command as the SDK examples start one: every motor enabled with
    q = dq = tau = kp = kd = 0 (zero torque). Pass the ``mode_machine`` the robot reports in its
    ``LowState_``. The CRC is left 0: set it with ``robot_rl.dds.crc.with_crc`` before sending."""
    if not 0 <= mode_machine <= 0xFF or not 0 <= mode_pr <= 0xFF:
        raise ValueError(f"unitree_hg LowCmd_: mode_machine={mode_machine!r} and mode_pr={mode_pr!r} "
                         "must be in 0..255 (uint8)")
    cmd = LowCmd_(mode_pr=mode_pr, mode_machine=mode_machine)
    for motor in cmd.motor_cmd:
        motor.mode = MOTOR_ENABLE
    return cmd


def default_low_state() -> LowState_:
    """An all-zero state (identity IMU quaternion): a stand-in for the robot's first message in tests
    and simulators that publish ``rt/lowstate``."""
    return LowState_()
