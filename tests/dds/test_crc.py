"""Unitree's CRC32: the fast path against a bit-by-bit reference, the packed image against a ctypes mirror
of Unitree's C structs (ctypes lays structs out with the platform C compiler's rules), pinned values,
and single-bit-flip detection in every field."""

import ctypes
import random
import struct
import typing

import numpy as np
import pytest
from cyclonedds.idl import IdlStruct

from robot_rl.dds import unitree_go as go
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.crc import (
    c_layout,
    crc32_core,
    crc_ok,
    low_cmd_crc,
    pack_c_struct,
    unitree_crc,
    with_crc,
)

# --- Reference implementation, written from the public description of unitree_sdk2's crc32_core -----------


def reference_crc32_core(words: list[int]) -> int:
    """MSB-first CRC-32, polynomial 0x04C11DB7, init 0xFFFFFFFF, no final XOR, one 32-bit word at a time."""
    crc = 0xFFFFFFFF
    for word in words:
        for bit in range(31, -1, -1):
            feedback = ((crc >> 31) ^ (word >> bit)) & 1
            crc = (crc << 1) & 0xFFFFFFFF
            if feedback:
                crc ^= 0x04C11DB7
    return crc


def reference_crc(image: bytes) -> int:
    """CRC over a C struct image: every little-endian uint32 word except the trailing crc field."""
    words = list(struct.unpack(f"<{len(image) // 4}I", image))
    return reference_crc32_core(words[:-1])


# --- ctypes mirrors of Unitree's C structs (field types and order from the SDK's headers) ------------------

u8, i16, u16, i32, u32, f32 = (ctypes.c_uint8, ctypes.c_int16, ctypes.c_uint16, ctypes.c_int32, ctypes.c_uint32,
                               ctypes.c_float)


class GoMotorCmd(ctypes.Structure):
    _fields_ = [("mode", u8), ("q", f32), ("dq", f32), ("tau", f32), ("kp", f32), ("kd", f32),
                ("reserve", u32 * 3)]


class GoBmsCmd(ctypes.Structure):
    _fields_ = [("off", u8), ("reserve", u8 * 3)]


class GoLowCmd(ctypes.Structure):
    _fields_ = [("head", u8 * 2), ("level_flag", u8), ("frame_reserve", u8), ("sn", u32 * 2), ("version", u32 * 2),
                ("bandwidth", u16), ("motor_cmd", GoMotorCmd * 20), ("bms_cmd", GoBmsCmd),
                ("wireless_remote", u8 * 40), ("led", u8 * 12), ("fan", u8 * 2), ("gpio", u8), ("reserve", u32),
                ("crc", u32)]


class GoImu(ctypes.Structure):
    _fields_ = [("quaternion", f32 * 4), ("gyroscope", f32 * 3), ("accelerometer", f32 * 3), ("rpy", f32 * 3),
                ("temperature", u8)]


class GoMotorState(ctypes.Structure):
    _fields_ = [("mode", u8), ("q", f32), ("dq", f32), ("ddq", f32), ("tau_est", f32), ("q_raw", f32),
                ("dq_raw", f32), ("ddq_raw", f32), ("temperature", u8), ("lost", u32), ("reserve", u32 * 2)]


class GoBmsState(ctypes.Structure):
    _fields_ = [("version_high", u8), ("version_low", u8), ("status", u8), ("soc", u8), ("current", i32),
                ("cycle", u16), ("bq_ntc", u8 * 2), ("mcu_ntc", u8 * 2), ("cell_vol", u16 * 15)]


class GoLowState(ctypes.Structure):
    _fields_ = [("head", u8 * 2), ("level_flag", u8), ("frame_reserve", u8), ("sn", u32 * 2), ("version", u32 * 2),
                ("bandwidth", u16), ("imu_state", GoImu), ("motor_state", GoMotorState * 20),
                ("bms_state", GoBmsState), ("foot_force", i16 * 4), ("foot_force_est", i16 * 4), ("tick", u32),
                ("wireless_remote", u8 * 40), ("bit_flag", u8), ("adc_reel", f32), ("temperature_ntc1", u8),
                ("temperature_ntc2", u8), ("power_v", f32), ("power_a", f32), ("fan_frequency", u16 * 4),
                ("reserve", u32), ("crc", u32)]


class HgMotorCmd(ctypes.Structure):
    _fields_ = [("mode", u8), ("q", f32), ("dq", f32), ("tau", f32), ("kp", f32), ("kd", f32), ("reserve", u32)]


class HgLowCmd(ctypes.Structure):
    _fields_ = [("mode_pr", u8), ("mode_machine", u8), ("motor_cmd", HgMotorCmd * 35), ("reserve", u32 * 4),
                ("crc", u32)]


class HgImu(ctypes.Structure):
    _fields_ = [("quaternion", f32 * 4), ("gyroscope", f32 * 3), ("accelerometer", f32 * 3), ("rpy", f32 * 3),
                ("temperature", i16)]


class HgMotorState(ctypes.Structure):
    _fields_ = [("mode", u8), ("q", f32), ("dq", f32), ("ddq", f32), ("tau_est", f32), ("temperature", i16 * 2),
                ("vol", f32), ("sensor", u32 * 2), ("motorstate", u32), ("reserve", u32 * 4)]


class HgLowState(ctypes.Structure):
    _fields_ = [("version", u32 * 2), ("mode_pr", u8), ("mode_machine", u8), ("tick", u32), ("imu_state", HgImu),
                ("motor_state", HgMotorState * 35), ("wireless_remote", u8 * 40), ("reserve", u32 * 4),
                ("crc", u32)]


MIRRORS = [(go.LowCmd_, GoLowCmd), (go.LowState_, GoLowState), (hg.LowCmd_, HgLowCmd), (hg.LowState_, HgLowState)]
# sizeof() of each C struct, as unitree_sdk2_python's crc.py states them in its comments.
SDK_SIZES = {go.LowCmd_: 812, go.LowState_: 1180, hg.LowCmd_: 1004, hg.LowState_: 2092}


def ctypes_offsets(ctype: type, base: int = 0, path: str = "") -> dict[str, int]:
    offsets = {}
    for name, ftype in ctype._fields_:
        here = f"{path}.{name}" if path else name
        offset = base + getattr(ctype, name).offset
        offsets[here] = offset
        element = getattr(ftype, "_type_", None)
        if isinstance(element, type) and issubclass(element, ctypes.Structure):
            for i in range(ftype._length_):
                offsets.update(ctypes_offsets(element, offset + i * ctypes.sizeof(element), f"{here}[{i}]"))
        elif issubclass(ftype, ctypes.Structure):
            offsets.update(ctypes_offsets(ftype, offset, here))
    return offsets


def fill_ctypes(target: ctypes.Structure, msg: IdlStruct) -> None:
    for name, ftype in target._fields_:
        value = getattr(msg, name)
        if issubclass(ftype, ctypes.Structure):
            fill_ctypes(getattr(target, name), value)
        elif issubclass(ftype, ctypes.Array) and issubclass(ftype._type_, ctypes.Structure):
            for slot, item in zip(getattr(target, name), value, strict=True):
                fill_ctypes(slot, item)
        elif issubclass(ftype, ctypes.Array):
            getattr(target, name)[:] = list(value)
        else:
            setattr(target, name, value)


# --- random messages -----------------------------------------------------------------------------------------

_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
           "uint32": (0, 2**32 - 1), "int32": (-(2**31), 2**31 - 1)}


def random_value(prim: str, rng: random.Random) -> float | int:
    if prim == "float32":
        return float(np.float32(rng.uniform(-1e3, 1e3)))
    return rng.randint(*_RANGES[prim])


def randomize(msg: IdlStruct, rng: random.Random) -> IdlStruct:
    for name, hint in typing.get_type_hints(type(msg), include_extras=True).items():
        meta = getattr(hint, "__metadata__", (None,))[0]
        if isinstance(meta, str):
            setattr(msg, name, random_value(meta, rng))
        elif meta is not None:  # types.array
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


def leaf_paths(msg: IdlStruct, path: str = "") -> list[tuple[object, str, int | None, str]]:
    """(owner, attribute, index or None, IDL primitive) for every primitive value in ``msg``."""
    leaves = []
    for name, hint in typing.get_type_hints(type(msg), include_extras=True).items():
        meta = getattr(hint, "__metadata__", (None,))[0]
        if isinstance(meta, str):
            leaves.append((msg, name, None, meta))
        elif meta is not None:
            sub = getattr(meta.subtype, "__metadata__", (None,))[0]
            for i, element in enumerate(getattr(msg, name)):
                if sub is None:
                    leaves.extend(leaf_paths(element))
                else:
                    leaves.append((msg, name, i, sub))
        else:
            leaves.extend(leaf_paths(getattr(msg, name)))
    return leaves


def flip_bit(value: float | int, prim: str, bit: int) -> float | int:
    if prim == "float32":
        (raw,) = struct.unpack("<I", struct.pack("<f", value))
        (flipped,) = struct.unpack("<f", struct.pack("<I", raw ^ (1 << (bit % 32))))
        return flipped
    lo, hi = _RANGES[prim]
    width = (hi - lo).bit_length()
    flipped = (value - lo) ^ (1 << (bit % width))  # flip in the unsigned image, map back to the range
    return flipped + lo


# --- tests ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("msg_type", "mirror"), MIRRORS, ids=lambda t: getattr(t, "__idl_typename__", ""))
def test_layout_matches_the_c_struct(msg_type: type, mirror: type) -> None:
    layout = c_layout(msg_type)
    assert layout.size == ctypes.sizeof(mirror) == SDK_SIZES[msg_type]
    assert layout.offsets == ctypes_offsets(mirror)
    assert layout.offsets["crc"] == layout.size - 4


@pytest.mark.parametrize(("msg_type", "mirror"), MIRRORS, ids=lambda t: getattr(t, "__idl_typename__", ""))
def test_packed_image_matches_ctypes_image(msg_type: type, mirror: type) -> None:
    rng = random.Random(7)
    for _ in range(20):
        msg = randomize(msg_type(), rng)
        image = mirror()
        fill_ctypes(image, msg)
        assert pack_c_struct(msg) == bytes(image)


@pytest.mark.parametrize("msg_type", [go.LowCmd_, go.LowState_, hg.LowCmd_, hg.LowState_])
def test_fast_crc_matches_bitwise_reference(msg_type: type) -> None:
    rng = random.Random(11)
    for _ in range(5):
        msg = randomize(msg_type(), rng)
        assert unitree_crc(msg) == reference_crc(pack_c_struct(msg))


def test_crc32_core_matches_reference_on_random_words() -> None:
    rng = random.Random(3)
    assert crc32_core(b"") == 0xFFFFFFFF
    for n_words in (1, 2, 3, 7, 64, 203):
        data = rng.randbytes(4 * n_words)
        assert crc32_core(data) == reference_crc32_core(list(struct.unpack(f"<{n_words}I", data)))


def test_crc32_core_rejects_partial_words() -> None:
    with pytest.raises(ValueError, match="5 bytes"):
        crc32_core(b"\x00" * 5)


# Values computed with reference_crc above (and matching Unitree's own crc library on the same messages).
PINNED = [
    ("go default_low_cmd", go.default_low_cmd, 0x06E577CD),
    ("go zero LowCmd_", go.LowCmd_, 0x4B5A4880),
    ("hg default_low_cmd", hg.default_low_cmd, 0xDDF0674B),
    ("hg zero LowCmd_", hg.LowCmd_, 0xFE172F9F),
    ("go default_low_state", go.default_low_state, 0xAEC06065),
    ("hg default_low_state", hg.default_low_state, 0x7D2A15EC),
]


@pytest.mark.parametrize(("name", "make", "expected"), PINNED, ids=[p[0] for p in PINNED])
def test_pinned_values(name: str, make: typing.Callable[[], IdlStruct], expected: int) -> None:
    msg = make()
    assert reference_crc(pack_c_struct(msg)) == expected
    assert unitree_crc(msg) == expected


@pytest.mark.parametrize("msg_type", [go.LowCmd_, go.LowState_, hg.LowCmd_, hg.LowState_])
def test_single_bit_flip_in_any_field_changes_the_crc(msg_type: type) -> None:
    rng = random.Random(5)
    msg = with_crc(randomize(msg_type(), rng))
    leaves = [leaf for leaf in leaf_paths(msg) if leaf[1] != "crc"]
    assert len(leaves) > 100
    for owner, name, index, prim in leaves:
        original = getattr(owner, name) if index is None else getattr(owner, name)[index]
        bit = rng.randrange(32)
        flipped = flip_bit(original, prim, bit)
        if index is None:
            setattr(owner, name, flipped)
        else:
            getattr(owner, name)[index] = flipped
        assert not crc_ok(msg), f"flipping bit {bit} of {name}[{index}] went unnoticed"
        if index is None:
            setattr(owner, name, original)
        else:
            getattr(owner, name)[index] = original
        assert crc_ok(msg)


def test_every_single_bit_error_in_the_image_is_detected() -> None:
    image = pack_c_struct(with_crc(go.default_low_cmd()))[:-4]
    good = crc32_core(image)
    buf = bytearray(image)
    for byte in range(len(buf)):
        for bit in range(8):
            buf[byte] ^= 1 << bit
            assert crc32_core(bytes(buf)) != good
            buf[byte] ^= 1 << bit


def test_with_crc_sets_in_place_and_crc_ok_checks() -> None:
    cmd = go.default_low_cmd()
    cmd.motor_cmd[2].kp = 20.0
    assert not crc_ok(cmd)
    assert with_crc(cmd) is cmd
    assert crc_ok(cmd) and cmd.crc == low_cmd_crc(cmd)
    cmd.motor_cmd[2].q = 0.5
    assert not crc_ok(cmd)


def test_crc_survives_dds_serialization() -> None:
    for cmd in (go.default_low_cmd(), hg.default_low_cmd(mode_machine=5)):
        randomize(cmd.motor_cmd[0], random.Random(2))
        with_crc(cmd)
        received = type(cmd).deserialize(cmd.serialize())
        assert crc_ok(received)


def test_wrong_types_are_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"LowCmd_.*got LowState_"):
        low_cmd_crc(go.LowState_())
    with pytest.raises(TypeError, match=r"unitree_go\.msg\.dds_\.MotorCmd_.*carries no Unitree CRC"):
        unitree_crc(go.MotorCmd_())


def test_bad_field_values_are_named() -> None:
    cmd = go.default_low_cmd()
    cmd.motor_cmd[3].mode = 300
    with pytest.raises(ValueError, match=r"motor_cmd\[3\]\.mode = 300 is not a valid uint8"):
        unitree_crc(cmd)
    cmd = hg.default_low_cmd()
    cmd.motor_cmd[7].kp = 1e39
    with pytest.raises(ValueError, match=r"motor_cmd\[7\]\.kp = 1e\+39 is not a valid float32"):
        unitree_crc(cmd)
    cmd = go.default_low_cmd()
    cmd.led = bytearray(11)
    with pytest.raises(ValueError, match="led has 11 elements, the IDL array has 12"):
        unitree_crc(cmd)
    cmd = hg.default_low_cmd()
    cmd.motor_cmd = cmd.motor_cmd[:29]
    with pytest.raises(ValueError, match="motor_cmd has 29 elements, the IDL array has 35"):
        unitree_crc(cmd)
