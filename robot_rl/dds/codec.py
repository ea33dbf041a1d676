"""A struct codec for Unitree's LowCmd_ / LowState_: the serialized message as a byte buffer with numpy views.

Cyclone's Python IDL path turns a ``unitree_go`` / ``unitree_hg`` message into bytes field by field in
Python (≈ 200 µs for a LowCmd, ≈ 300 µs to decode a LowState: benchmarks/results/RESULTS_dds_latency.md).
These messages are fixed-size structs of numbers, so their serialized form is a fixed layout: this module
derives it once from the IDL class (XCDR1, little-endian, the encoding Cyclone's writers and Unitree's
SDK use for these ``@final`` types) and keeps one message as a preallocated buffer with a numpy view on
every field. Encoding writes arrays into the views; decoding copies the received bytes into the buffer and
reads the views; nothing walks the message in Python.

Layout rules (XCDR1, OMG DDS-XTypes 7.4.3): a 4-byte encapsulation header (``00 01 00 00``: CDR, little
endian), then every primitive at an offset, from the end of the header, that is a multiple of its size;
structs and arrays add no padding of their own. A column of a struct array (``motor_state.q``) therefore
has a fixed stride once its first element is aligned; columns whose stride is not fixed (the ``uint8``
``mode`` of unitree_go's motors after a 2-byte-aligned start) are reachable element by element only.

Unitree's CRC is computed over the message's *C struct* image (see :mod:`robot_rl.dds.crc`), which pads
differently; the codec gathers that image from its buffer with one precomputed index (already byte-swapped
and bit-reversed the way :func:`robot_rl.dds.crc.crc32_core` needs it), so the CRC costs one ``np.take``
and one zlib call. Tests (tests/dds/test_codec.py) check every byte against Cyclone's own serializer and
every CRC against :func:`robot_rl.dds.crc.unitree_crc` on random messages of all four types.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass

import numpy as np

from robot_rl.dds.crc import BITREV8_TABLE, CRC_TYPENAMES, c_layout, crc32_of_prepared

# IDL primitive → numpy little-endian dtype (size = XCDR1 alignment; none of these messages has 8-byte types).
_DTYPES = {"uint8": "u1", "int8": "i1", "uint16": "<u2", "int16": "<i2", "uint32": "<u4", "int32": "<i4",
           "float32": "<f4"}
HEADER_XCDR1_LE = b"\x00\x01\x00\x00"


@dataclass(frozen=True)
class Leaf:
    """One primitive field or primitive array: ``path`` as in :func:`robot_rl.dds.crc.c_layout`."""

    path: str
    dtype: np.dtype
    count: int  # elements (1 for a scalar)
    offset: int  # in the serialized body (after the 4-byte header)
    is_array: bool = False


def _meta(hint: object) -> object | None:
    meta = getattr(hint, "__metadata__", None)
    return meta[0] if meta else None


def _walk(cls: type, path: str, offset: int, leaves: list[Leaf]) -> int:
    """Lay out ``cls`` from ``offset`` (XCDR1); append its leaves; return the offset after it."""
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        here = f"{path}.{name}" if path else name
        meta = _meta(hint)
        if isinstance(meta, str) and meta in _DTYPES:
            dtype = np.dtype(_DTYPES[meta])
            offset += -offset % dtype.itemsize
            leaves.append(Leaf(here, dtype, 1, offset))
            offset += dtype.itemsize
            continue
        length, subtype = getattr(meta, "length", None), getattr(meta, "subtype", None)
        if length is not None and isinstance(_meta(subtype), str) and _meta(subtype) in _DTYPES:
            dtype = np.dtype(_DTYPES[_meta(subtype)])
            offset += -offset % dtype.itemsize
            leaves.append(Leaf(here, dtype, length, offset, True))
            offset += dtype.itemsize * length
        elif length is not None and isinstance(subtype, type):
            for i in range(length):
                offset = _walk(subtype, f"{here}[{i}]", offset, leaves)
        elif isinstance(hint, type):
            offset = _walk(hint, here, offset, leaves)
        else:
            raise TypeError(f"{cls.__name__}.{name}: IDL type {hint!r} is not a fixed-size primitive, array or struct")
    return offset


class MessageCodec:
    """One message of a Unitree ``LowCmd_`` / ``LowState_`` type as serialized bytes with numpy views.

    ``view(path)`` is a numpy array onto the buffer: a field (``"tick"``, ``"imu_state.quaternion"``,
    ``"motor_cmd[3].kp"``) or a column of a struct array (``"motor_state.q"``, one value per element).
    Writing a view changes the bytes ``data`` returns; :meth:`load` makes the views read a received message.
    Not thread-safe: one codec per message stream.
    """

    def __init__(self, msg_type: type):
        typename = getattr(msg_type, "__idl_typename__", None)
        if typename not in CRC_TYPENAMES:
            raise TypeError(f"MessageCodec: {msg_type.__qualname__} ({typename!r}) is not one of {CRC_TYPENAMES}")
        self.msg_type = msg_type
        leaves: list[Leaf] = []
        body = _walk(msg_type, "", 0, leaves)
        self.leaves = {leaf.path: leaf for leaf in leaves}
        self.size = 4 + body + (-body % 4)  # what Cyclone sends: header + body, padded to 4 bytes
        # One spare zero byte past the message: the C image's padding bytes are gathered from it.
        self._buffer = np.zeros(self.size + 1, dtype=np.uint8)
        self._buffer[:4] = np.frombuffer(HEADER_XCDR1_LE, dtype=np.uint8)
        self._message = self._buffer[: self.size]
        self._views: dict[str, np.ndarray] = {}
        # The CRC's input: the C struct image without its trailing crc word, byte-swapped per word.
        layout = c_layout(msg_type)
        image = np.full(layout.size, self.size, dtype=np.intp)  # padding → the spare zero byte
        for leaf in leaves:
            start = layout.offsets[leaf.path]
            width = leaf.dtype.itemsize * leaf.count
            image[start : start + width] = 4 + leaf.offset + np.arange(width)
        swapped = np.arange(layout.size - 4) ^ 3  # byte j of a little-endian word, read most significant first
        self._crc_gather = image[swapped]
        self._crc_bytes = np.empty(layout.size - 4, dtype=np.uint8)
        self._crc_view = self.view("crc")

    @property
    def data(self) -> bytes:
        """The serialized message (header included), as Cyclone's writer would send it."""
        return self._message.tobytes()

    def view(self, path: str) -> np.ndarray:
        """A writable numpy view onto the buffer (see the class docstring); 0-d for a scalar field."""
        found = self._views.get(path)
        if found is not None:
            return found
        leaf = self.leaves.get(path)
        if leaf is not None:
            view = np.ndarray((leaf.count,) if leaf.is_array else (), leaf.dtype, self._buffer, 4 + leaf.offset)
        else:
            view = self._column(path)
        self._views[path] = view
        return view

    def _column(self, path: str) -> np.ndarray:
        head, _, field = path.rpartition(".")
        offsets = []
        while True:
            leaf = self.leaves.get(f"{head}[{len(offsets)}].{field}")
            if leaf is None:
                break
            offsets.append(leaf.offset)
            dtype, count = leaf.dtype, leaf.count
        if not offsets:
            raise KeyError(f"{self.msg_type.__idl_typename__} has no field or column {path!r}")
        strides = set(np.diff(offsets).tolist())
        if len(strides) > 1 or count != 1:
            raise ValueError(f"{path}: not a fixed-stride column of scalars (offsets {offsets[:3]}...); "
                             "use its elements' paths")
        stride = strides.pop() if strides else dtype.itemsize
        return np.ndarray((len(offsets),), dtype, self._buffer, 4 + offsets[0], (stride,))

    def load(self, data: bytes) -> bool:
        """Make the views read ``data`` (a serialized message); False, and nothing changed, when it is not
        this type in XCDR1 little-endian (then decode it with the IDL class: ``msg_type.deserialize``)."""
        if len(data) != self.size or data[:4] != HEADER_XCDR1_LE:
            return False
        self._message[:] = np.frombuffer(data, dtype=np.uint8)
        return True

    def load_message(self, msg: object) -> None:
        """Set every field from an IDL message (setup, tests, the fallback for other encodings)."""
        data = msg.serialize(use_version_2=False)
        data = data.ljust(self.size, b"\0")
        if not self.load(data):
            raise ValueError(f"{self.msg_type.__idl_typename__}: the IDL serializer produced {len(data)} bytes "
                             f"starting {data[:4].hex()}, the codec's layout has {self.size} starting 00010000")

    def message(self) -> object:
        """The buffer as an IDL message (Cyclone's deserializer: for tests and diagnostics, not the hot path)."""
        return self.msg_type.deserialize(self.data)

    def crc(self) -> int:
        """Unitree's CRC of the message as it stands in the buffer (its crc field excluded)."""
        np.take(self._buffer, self._crc_gather, out=self._crc_bytes, mode="clip")
        np.take(BITREV8_TABLE, self._crc_bytes, out=self._crc_bytes, mode="clip")
        return crc32_of_prepared(self._crc_bytes)

    def set_crc(self) -> int:
        value = self.crc()
        self._crc_view[...] = value
        return value

    def crc_ok(self) -> bool:
        return int(self._crc_view) == self.crc()
