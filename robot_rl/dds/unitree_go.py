"""Unitree ``unitree_go`` low-level DDS messages (Go2, B2, Go2-W and other quadrupeds).

Field for field as Unitree's public IDL (unitree_sdk2 ``include/unitree/idl/go2/*.hpp``, the
``unitree_go.msg.dds_`` module of unitree_sdk2_python and unitree_ros2's ``unitree_go`` .msg files). The
``typename`` strings, the field order and every field's width are the wire contract with the robot:
change none of them. Where unitree_ros2 declares a temperature ``int8`` the SDK IDL declares ``uint8``;
we follow the SDK IDL (the byte on the wire is the same, only its reading differs).

Fields of ``uint8`` arrays are ``bytearray`` here so they can be edited in place; Cyclone DDS hands them
back as ``bytes`` after deserialization (``bytearray(b"..") == b".."`` holds, so messages still compare
equal).
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

NUM_MOTORS = 20  # motor slots in LowCmd_/LowState_ (a quadruped uses the first 12)

# Header bytes and level flag the SDK examples put in every low-level command.
HEAD = (0xFE, 0xEF)
LEVEL_FLAG_LOW = 0xFF
LEVEL_FLAG_HIGH = 0xEE
MOTOR_MODE_SERVO = 0x01  # PMSM servo (FOC) mode; 0x00 is stop
# Sentinels that tell the motor driver to ignore the position / velocity target (the SDK's PosStopF and
# VelStopF); with kp = kd = tau = 0 the motor is passive.
POS_STOP_F = 2.146e9
VEL_STOP_F = 16000.0


def _zeros(n: int) -> list:
    return [0] * n


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorCmd_(idl.IdlStruct, typename="unitree_go.msg.dds_.MotorCmd_"):
    mode: types.uint8 = 0
    q: types.float32 = 0.0
    dq: types.float32 = 0.0
    tau: types.float32 = 0.0
    kp: types.float32 = 0.0
    kd: types.float32 = 0.0
    reserve: types.array[types.uint32, 3] = field(default_factory=lambda: _zeros(3))


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorState_(idl.IdlStruct, typename="unitree_go.msg.dds_.MotorState_"):
    mode: types.uint8 = 0
    q: types.float32 = 0.0
    dq: types.float32 = 0.0
    ddq: types.float32 = 0.0
    tau_est: types.float32 = 0.0
    q_raw: types.float32 = 0.0
    dq_raw: types.float32 = 0.0
    ddq_raw: types.float32 = 0.0
    temperature: types.uint8 = 0
    lost: types.uint32 = 0
    reserve: types.array[types.uint32, 2] = field(default_factory=lambda: _zeros(2))


@dataclass
@annotate.final
@annotate.autoid("sequential")
class IMUState_(idl.IdlStruct, typename="unitree_go.msg.dds_.IMUState_"):
    quaternion: types.array[types.float32, 4] = field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])  # w x y z
    gyroscope: types.array[types.float32, 3] = field(default_factory=lambda: [0.0] * 3)
    accelerometer: types.array[types.float32, 3] = field(default_factory=lambda: [0.0] * 3)
    rpy: types.array[types.float32, 3] = field(default_factory=lambda: [0.0] * 3)
    temperature: types.uint8 = 0


@dataclass
@annotate.final
@annotate.autoid("sequential")
class BmsCmd_(idl.IdlStruct, typename="unitree_go.msg.dds_.BmsCmd_"):
    off: types.uint8 = 0  # 0xA5 switches the battery off
    reserve: types.array[types.uint8, 3] = field(default_factory=lambda: bytearray(3))


@dataclass
@annotate.final
@annotate.autoid("sequential")
class BmsState_(idl.IdlStruct, typename="unitree_go.msg.dds_.BmsState_"):
    version_high: types.uint8 = 0
    version_low: types.uint8 = 0
    status: types.uint8 = 0
    soc: types.uint8 = 0  # state of charge, %
    current: types.int32 = 0  # mA
    cycle: types.uint16 = 0
    bq_ntc: types.array[types.uint8, 2] = field(default_factory=lambda: bytearray(2))
    mcu_ntc: types.array[types.uint8, 2] = field(default_factory=lambda: bytearray(2))
    cell_vol: types.array[types.uint16, 15] = field(default_factory=lambda: _zeros(15))


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowCmd_(idl.IdlStruct, typename="unitree_go.msg.dds_.LowCmd_"):
    head: types.array[types.uint8, 2] = field(default_factory=lambda: bytearray(2))
    level_flag: types.uint8 = 0
    frame_reserve: types.uint8 = 0
    sn: types.array[types.uint32, 2] = field(default_factory=lambda: _zeros(2))
    version: types.array[types.uint32, 2] = field(default_factory=lambda: _zeros(2))
    bandwidth: types.uint16 = 0
    motor_cmd: types.array[MotorCmd_, NUM_MOTORS] = field(
        default_factory=lambda: [MotorCmd_() for _ in range(NUM_MOTORS)])
    bms_cmd: BmsCmd_ = field(default_factory=BmsCmd_)
    wireless_remote: types.array[types.uint8, 40] = field(default_factory=lambda: bytearray(40))
    led: types.array[types.uint8, 12] = field(default_factory=lambda: bytearray(12))
    fan: types.array[types.uint8, 2] = field(default_factory=lambda: bytearray(2))
    gpio: types.uint8 = 0
    reserve: types.uint32 = 0
    crc: types.uint32 = 0


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowState_(idl.IdlStruct, typename="unitree_go.msg.dds_.LowState_"):
    head: types.array[types.uint8, 2] = field(default_factory=lambda: bytearray(2))
    level_flag: types.uint8 = 0
    frame_reserve: types.uint8 = 0
    sn: types.array[types.uint32, 2] = field(default_factory=lambda: _zeros(2))
    version: types.array[types.uint32, 2] = field(default_factory=lambda: _zeros(2))
    bandwidth: types.uint16 = 0
    imu_state: IMUState_ = field(default_factory=IMUState_)
    motor_state: types.array[MotorState_, NUM_MOTORS] = field(
        default_factory=lambda: [MotorState_() for _ in range(NUM_MOTORS)])
    bms_state: BmsState_ = field(default_factory=BmsState_)
    foot_force: types.array[types.int16, 4] = field(default_factory=lambda: _zeros(4))
    foot_force_est: types.array[types.int16, 4] = field(default_factory=lambda: _zeros(4))
    tick: types.uint32 = 0  # ms counter of the robot's controller
    wireless_remote: types.array[types.uint8, 40] = field(default_factory=lambda: bytearray(40))
    bit_flag: types.uint8 = 0
    adc_reel: types.float32 = 0.0
    temperature_ntc1: types.uint8 = 0
    temperature_ntc2: types.uint8 = 0
    power_v: types.float32 = 0.0
    power_a: types.float32 = 0.0
    fan_frequency: types.array[types.uint16, 4] = field(default_factory=lambda: _zeros(4))
    reserve: types.uint32 = 0
    crc: types.uint32 = 0


def default_low_cmd() -> LowCmd_:
    """A passive low-level command as the SDK examples start one: header 0xFE 0xEF, level flag 0xFF
    (low level), gpio 0, every motor in servo mode with the position/velocity "stop" sentinels and
    kp = kd = tau = 0. The CRC is left 0: set it with ``robot_rl.dds.crc.with_crc`` before sending."""
    cmd = LowCmd_()
    cmd.head[:] = bytes(HEAD)
    cmd.level_flag = LEVEL_FLAG_LOW
    cmd.gpio = 0
    for motor in cmd.motor_cmd:
        motor.mode = MOTOR_MODE_SERVO
        motor.q = POS_STOP_F
        motor.dq = VEL_STOP_F
    return cmd


def default_low_state() -> LowState_:
    """An all-zero state (identity IMU quaternion): a stand-in for the robot's first message in tests
    and simulators that publish ``rt/lowstate``."""
    return LowState_()
