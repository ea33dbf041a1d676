"""unitree_hg messages (G1, H1-2): the wire contract (type names, fields, widths) and Cyclone DDS round trips."""

import random
import typing

import numpy as np
import pytest
from cyclonedds.idl import IdlStruct

from robot_rl.dds import unitree_hg as hg

ALL_TYPES = [hg.MotorCmd_, hg.MotorState_, hg.IMUState_, hg.BmsCmd_, hg.BmsState_, hg.LowCmd_, hg.LowState_]

# Field names and IDL types in order, as unitree_sdk2's include/unitree/idl/hg/*.hpp declare them.
EXPECTED_FIELDS = {
    "MotorCmd_": "mode:uint8 q:float32 dq:float32 tau:float32 kp:float32 kd:float32 reserve:uint32",
    "MotorState_": "mode:uint8 q:float32 dq:float32 ddq:float32 tau_est:float32 temperature:int16[2] vol:float32 "
                   "sensor:uint32[2] motorstate:uint32 reserve:uint32[4]",
    "IMUState_": "quaternion:float32[4] gyroscope:float32[3] accelerometer:float32[3] rpy:float32[3] "
                 "temperature:int16",
    "BmsCmd_": "cmd:uint8 reserve:uint8[40]",
    "BmsState_": "version_high:uint8 version_low:uint8 fn:uint8 cell_vol:uint16[40] bmsvoltage:uint32[3] "
                 "current:int32 soc:uint8 soh:uint8 temperature:int16[12] cycle:uint16 manufacturer_date:uint16 "
                 "bmsstate:uint32[5] reserve:uint32[3]",
    "LowCmd_": "mode_pr:uint8 mode_machine:uint8 motor_cmd:MotorCmd_[35] reserve:uint32[4] crc:uint32",
    "LowState_": "version:uint32[2] mode_pr:uint8 mode_machine:uint8 tick:uint32 imu_state:IMUState_ "
                 "motor_state:MotorState_[35] wireless_remote:uint8[40] reserve:uint32[4] crc:uint32",
}
# Bytes of the XCDR1 image: 4-byte encapsulation header + members at CDR alignment.
SERIALIZED_SIZES = {"MotorCmd_": 32, "MotorState_": 60, "IMUState_": 58, "BmsCmd_": 45, "BmsState_": 168,
                    "LowCmd_": 1004, "LowState_": 2092}

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
    assert msg_type.__idl_typename__ == f"unitree_hg.msg.dds_.{msg_type.__name__}"
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
    assert hg.NUM_MOTORS == 35
    assert len(hg.LowCmd_().motor_cmd) == 35
    assert len(hg.LowState_().motor_state) == 35
    back = hg.LowState_.deserialize(hg.LowState_().serialize())
    assert len(back.motor_state) == 35


def test_default_low_cmd_enables_every_motor_at_zero_torque() -> None:
    cmd = hg.default_low_cmd(mode_machine=5)
    assert (cmd.mode_pr, cmd.mode_machine, cmd.crc) == (hg.MODE_PR, 5, 0)
    for motor in cmd.motor_cmd:
        assert motor.mode == hg.MOTOR_ENABLE
        assert motor.q == motor.dq == motor.tau == motor.kp == motor.kd == 0.0
    assert hg.LowCmd_.deserialize(cmd.serialize()) == cmd


def test_default_low_cmd_refuses_out_of_range_modes() -> None:
    with pytest.raises(ValueError, match="mode_machine=256"):
        hg.default_low_cmd(mode_machine=256)
    with pytest.raises(ValueError, match="mode_pr=-1"):
        hg.default_low_cmd(mode_pr=-1)


def test_defaults_are_independent_instances() -> None:
    a, b = hg.default_low_cmd(), hg.default_low_cmd()
    a.motor_cmd[0].kp = 5.0
    a.reserve[0] = 1
    assert b.motor_cmd[0].kp == 0.0 and b.reserve[0] == 0
    s1, s2 = hg.default_low_state(), hg.default_low_state()
    s1.imu_state.quaternion[0] = 0.5
    s1.motor_state[3].temperature[1] = 40
    assert s2.imu_state.quaternion[0] == 1.0 and s2.motor_state[3].temperature[1] == 0
