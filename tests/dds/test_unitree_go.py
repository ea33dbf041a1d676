"""unitree_go messages: the wire contract (type names, fields, widths) and Cyclone DDS round trips."""

import random
import typing

import numpy as np
import pytest
from cyclonedds.idl import IdlStruct

from robot_rl.dds import unitree_go as go

ALL_TYPES = [go.MotorCmd_, go.MotorState_, go.IMUState_, go.BmsCmd_, go.BmsState_, go.LowCmd_, go.LowState_]

# Field names and IDL types in order, as unitree_sdk2's include/unitree/idl/go2/*.hpp declare them.
EXPECTED_FIELDS = {
    "MotorCmd_": "mode:uint8 q:float32 dq:float32 tau:float32 kp:float32 kd:float32 reserve:uint32[3]",
    "MotorState_": "mode:uint8 q:float32 dq:float32 ddq:float32 tau_est:float32 q_raw:float32 dq_raw:float32 "
                   "ddq_raw:float32 temperature:uint8 lost:uint32 reserve:uint32[2]",
    "IMUState_": "quaternion:float32[4] gyroscope:float32[3] accelerometer:float32[3] rpy:float32[3] "
                 "temperature:uint8",
    "BmsCmd_": "off:uint8 reserve:uint8[3]",
    "BmsState_": "version_high:uint8 version_low:uint8 status:uint8 soc:uint8 current:int32 cycle:uint16 "
                 "bq_ntc:uint8[2] mcu_ntc:uint8[2] cell_vol:uint16[15]",
    "LowCmd_": "head:uint8[2] level_flag:uint8 frame_reserve:uint8 sn:uint32[2] version:uint32[2] bandwidth:uint16 "
               "motor_cmd:MotorCmd_[20] bms_cmd:BmsCmd_ wireless_remote:uint8[40] led:uint8[12] fan:uint8[2] "
               "gpio:uint8 reserve:uint32 crc:uint32",
    "LowState_": "head:uint8[2] level_flag:uint8 frame_reserve:uint8 sn:uint32[2] version:uint32[2] "
                 "bandwidth:uint16 imu_state:IMUState_ motor_state:MotorState_[20] bms_state:BmsState_ "
                 "foot_force:int16[4] foot_force_est:int16[4] tick:uint32 wireless_remote:uint8[40] bit_flag:uint8 "
                 "adc_reel:float32 temperature_ntc1:uint8 temperature_ntc2:uint8 power_v:float32 power_a:float32 "
                 "fan_frequency:uint16[4] reserve:uint32 crc:uint32",
}
# Bytes of the XCDR1 image: 4-byte encapsulation header + members at CDR alignment.
SERIALIZED_SIZES = {"MotorCmd_": 40, "MotorState_": 52, "IMUState_": 57, "BmsCmd_": 8, "BmsState_": 48,
                    "LowCmd_": 812, "LowState_": 1180}

_RANGES = {"uint8": (0, 255), "uint16": (0, 65535), "int16": (-32768, 32767), "uint32": (0, 2**32 - 1),
           "int32": (-(2**31), 2**31 - 1)}


def describe(hint: object) -> str:
    meta = getattr(hint, "__metadata__", (None,))[0]
    if isinstance(meta, str):
        return meta
    if meta is not None:
        return f"{describe(meta.subtype)}[{meta.length}]"
    return hint.__name__


def random_value(prim: str, rng: random.Random) -> float | int:
    if prim == "float32":  # float32-exact, so the round trip compares equal
        return float(np.float32(rng.uniform(-1e4, 1e4)))
    return rng.randint(*_RANGES[prim])


def randomize(msg: IdlStruct, rng: random.Random) -> IdlStruct:
    for name, hint in typing.get_type_hints(type(msg), include_extras=True).items():
        meta = getattr(hint, "__metadata__", (None,))[0]
        if isinstance(meta, str):
            setattr(msg, name, random_value(meta, rng))
        elif meta is not None:
            sub = getattr(meta.subtype, "__metadata__", (None,))[0]
            if sub is None:
                for element in getattr(msg, name):
                    randomize(element, rng)
            else:
                values = [random_value(sub, rng) for _ in range(meta.length)]
                setattr(msg, name, bytearray(values) if sub == "uint8" else values)
        else:
            randomize(getattr(msg, name), rng)
    return msg


@pytest.mark.parametrize("msg_type", ALL_TYPES, ids=lambda t: t.__name__)
def test_type_names_and_fields_match_unitree_idl(msg_type: type) -> None:
    assert msg_type.__idl_typename__ == f"unitree_go.msg.dds_.{msg_type.__name__}"
    hints = typing.get_type_hints(msg_type, include_extras=True)
    fields = " ".join(f"{name}:{describe(hint)}" for name, hint in hints.items())
    assert fields == EXPECTED_FIELDS[msg_type.__name__]


@pytest.mark.parametrize("msg_type", ALL_TYPES, ids=lambda t: t.__name__)
def test_random_round_trip_through_cdr(msg_type: type) -> None:
    rng = random.Random(msg_type.__name__)
    for _ in range(10):
        msg = randomize(msg_type(), rng)
        data = msg.serialize()
        assert len(data) == SERIALIZED_SIZES[msg_type.__name__]
        back = msg_type.deserialize(data)
        assert back == msg
        assert back.serialize() == data


def test_motor_slots() -> None:
    assert go.NUM_MOTORS == 20
    assert len(go.LowCmd_().motor_cmd) == 20
    assert len(go.LowState_().motor_state) == 20
    back = go.LowState_.deserialize(go.LowState_().serialize())
    assert len(back.motor_state) == 20


def test_default_low_cmd_is_the_sdk_examples_passive_command() -> None:
    cmd = go.default_low_cmd()
    assert bytes(cmd.head) == b"\xfe\xef"
    assert cmd.level_flag == 0xFF and cmd.gpio == 0 and cmd.crc == 0
    for motor in cmd.motor_cmd:
        assert motor.mode == 0x01
        assert (motor.q, motor.dq) == (go.POS_STOP_F, go.VEL_STOP_F)
        assert motor.kp == motor.kd == motor.tau == 0.0
    back = go.LowCmd_.deserialize(cmd.serialize())
    assert back.motor_cmd[0].q == float(np.float32(go.POS_STOP_F))
    assert back.head == b"\xfe\xef"


def test_defaults_are_independent_instances() -> None:
    a, b = go.default_low_cmd(), go.default_low_cmd()
    a.motor_cmd[0].kp = 5.0
    a.head[0] = 0
    a.motor_cmd[1].reserve[0] = 9
    assert b.motor_cmd[0].kp == 0.0 and b.head[0] == 0xFE and b.motor_cmd[1].reserve[0] == 0
