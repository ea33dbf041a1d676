"""The struct codec against Cyclone's IDL serializer, byte for byte, and against crc.unitree_crc, on random
messages of all four Unitree low-level types."""

from __future__ import annotations

import re
import typing

import numpy as np
import pytest

from robot_rl.dds import unitree_go as go
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.codec import MessageCodec
from robot_rl.dds.crc import unitree_crc

TYPES = [go.LowCmd_, go.LowState_, hg.LowCmd_, hg.LowState_]
MESSAGES_PER_TYPE = 200
_INT_RANGES = {"uint8": (0, 0xFF), "int8": (-0x80, 0x7F), "uint16": (0, 0xFFFF), "int16": (-0x8000, 0x7FFF),
               "uint32": (0, 0xFFFFFFFF), "int32": (-0x80000000, 0x7FFFFFFF)}


def _random_value(hint: object, rng: np.random.Generator) -> object:
    meta = getattr(hint, "__metadata__", (None,))[0]
    if meta == "float32":
        return float(np.float32(rng.normal() * 10.0 ** rng.integers(-3, 4)))
    if isinstance(meta, str):
        lo, hi = _INT_RANGES[meta]
        return int(rng.integers(lo, hi, endpoint=True))
    length, subtype = getattr(meta, "length", None), getattr(meta, "subtype", None)
    if length is not None:
        values = [_random_value(subtype, rng) for _ in range(length)]
        return bytearray(values) if getattr(subtype, "__metadata__", (None,))[0] == "uint8" else values
    return _random_message(hint, rng)


def _random_message(cls: type, rng: np.random.Generator) -> object:
    hints = typing.get_type_hints(cls, include_extras=True)
    return cls(**{name: _random_value(hint, rng) for name, hint in hints.items()})


def _field(msg: object, path: str) -> object:
    for part in path.split("."):
        name, index = re.fullmatch(r"(\w+)(?:\[(\d+)\])?", part).groups()
        msg = getattr(msg, name)
        if index is not None:
            msg = msg[int(index)]
    return msg


@pytest.mark.parametrize("msg_type", TYPES, ids=lambda t: t.__idl_typename__)
def test_encode_and_decode_match_cyclone_byte_for_byte(msg_type):
    rng = np.random.default_rng(26)
    codec = MessageCodec(msg_type)
    reader = MessageCodec(msg_type)
    for _ in range(MESSAGES_PER_TYPE):
        msg = _random_message(msg_type, rng)
        expected = msg.serialize()  # Cyclone's own encoding for the type (XCDR1 for these @final structs)
        for leaf in codec.leaves.values():  # encode: every field written through its numpy view
            codec.view(leaf.path)[...] = np.asarray(_field(msg, leaf.path), dtype=leaf.dtype)
        assert codec.data == expected
        assert reader.load(expected)  # decode: every field read back through its view
        for leaf in reader.leaves.values():
            np.testing.assert_array_equal(reader.view(leaf.path), np.asarray(_field(msg, leaf.path), dtype=leaf.dtype))
        assert reader.crc() == unitree_crc(msg)
        assert reader.message() == msg


@pytest.mark.parametrize("msg_type", TYPES, ids=lambda t: t.__idl_typename__)
def test_columns_crc_and_refusals(msg_type):
    rng = np.random.default_rng(7)
    codec = MessageCodec(msg_type)
    msg = _random_message(msg_type, rng)
    codec.load_message(msg)
    assert codec.crc_ok() == (msg.crc == unitree_crc(msg))
    motors = "motor_cmd" if "LowCmd" in msg_type.__idl_typename__ else "motor_state"
    column = codec.view(f"{motors}.kp" if motors == "motor_cmd" else f"{motors}.q")
    field = "kp" if motors == "motor_cmd" else "q"
    np.testing.assert_array_equal(column, [getattr(m, field) for m in getattr(msg, motors)])
    column[:] = np.arange(len(column))  # a whole column in one numpy call
    assert [getattr(m, field) for m in getattr(codec.message(), motors)] == list(range(len(column)))
    codec.set_crc()
    assert codec.crc_ok() and codec.message().crc == unitree_crc(codec.message())
    assert not codec.load(codec.data[:-4])  # wrong length: not this type
    assert not codec.load(b"\x00\x07\x00\x00" + codec.data[4:])  # XCDR2: left to the IDL path
    with pytest.raises(KeyError):
        codec.view(f"{motors}.no_such_field")


def test_a_column_without_a_fixed_stride_is_refused():
    """unitree_go's LowCmd motors start 2-byte aligned: their uint8 mode has no fixed stride, the floats do."""
    codec = MessageCodec(go.LowCmd_)
    with pytest.raises(ValueError, match="fixed-stride"):
        codec.view("motor_cmd.mode")
    assert codec.view("motor_cmd.q").shape == (go.NUM_MOTORS,)
    codec.view("motor_cmd[0].mode")[...] = 1  # element by element still works
    assert codec.message().motor_cmd[0].mode == 1
