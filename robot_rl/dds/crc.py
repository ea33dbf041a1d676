"""Unitree's CRC32 over low-level messages.

The robot drops any ``LowCmd_`` whose ``crc`` field is wrong, silently. Unitree computes the CRC over
the message's C struct image (the struct the SDK's C++ class or ``LowCmd`` C struct lays out: natural
alignment, zeroed padding, little-endian), taken as uint32 words, all words but the trailing ``crc``
itself. The CRC is the MSB-first CRC-32 with polynomial 0x04C11DB7, initial value 0xFFFFFFFF, no final
XOR, each word fed from bit 31 down to bit 0 (``crc32_core`` in unitree_sdk2).

Here the C struct image is derived from the IDL class itself (every field's width and alignment, C
padding rules), packed with one precompiled ``struct.Struct``; the CRC runs in zlib's C code: feeding a
word MSB-first into the normal CRC is the same as feeding its bit-reversed image LSB-first into the
reflected CRC that zlib computes, so we byte-swap each word, bit-reverse each byte, and bit-reverse the
result back.
"""

from __future__ import annotations

import struct
import typing
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from robot_rl.dds import CYCLONEDDS_MISSING

try:
    import cyclonedds.idl as idl
    import cyclonedds.idl.types as types
except ImportError as exc:  # only without the deploy extra
    raise ImportError(CYCLONEDDS_MISSING) from exc

# The messages Unitree protects with this CRC (their last field is ``crc: uint32``).
CRC_TYPENAMES = (
    "unitree_go.msg.dds_.LowCmd_",
    "unitree_go.msg.dds_.LowState_",
    "unitree_hg.msg.dds_.LowCmd_",
    "unitree_hg.msg.dds_.LowState_",
)
_LOW_CMD_TYPENAMES = ("unitree_go.msg.dds_.LowCmd_", "unitree_hg.msg.dds_.LowCmd_")

# IDL primitive -> (struct format character, size = C alignment)
_PRIMITIVES = {
    "uint8": ("B", 1), "int8": ("b", 1), "uint16": ("H", 2), "int16": ("h", 2),
    "uint32": ("I", 4), "int32": ("i", 4), "float32": ("f", 4),
}
_BITREV8 = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))
BITREV8_TABLE = np.frombuffer(_BITREV8, dtype=np.uint8)  # the same table, for np.take
assert array("I").itemsize == 4, "array('I') must hold 32-bit words on this platform"

# A flatten step appends one struct's values (in struct.pack order) to a list.
_Step = Callable[[object, list], None]


@dataclass(frozen=True)
class CStructLayout:
    """The C struct image of one IDL struct type: ``fmt`` packs it (little-endian, padding explicit),
    ``offsets`` maps dotted field paths (``motor_cmd[3].kp``) to byte offsets, ``size`` is ``sizeof``."""

    typename: str
    fmt: str
    size: int
    align: int
    offsets: dict[str, int]


@dataclass(frozen=True)
class _Compiled:
    layout: CStructLayout
    packer: struct.Struct
    steps: tuple[_Step, ...]


def _primitive_name(hint: object) -> str | None:
    meta = getattr(hint, "__metadata__", None)
    if meta and isinstance(meta[0], str) and meta[0] in _PRIMITIVES:
        return meta[0]
    return None


def _array_meta(hint: object) -> types.array | None:
    meta = getattr(hint, "__metadata__", None)
    if meta and isinstance(meta[0], types.array):
        return meta[0]
    return None


class _LayoutBuilder:
    """Walks an IDL struct type and lays it out as a C compiler would (members at offsets that are
    multiples of their alignment, struct size a multiple of its largest member alignment)."""

    def __init__(self) -> None:
        self.fmt: list[str] = []
        self.offset = 0
        self.offsets: dict[str, int] = {}

    def _pad_to(self, align: int) -> None:
        pad = -self.offset % align
        if pad:
            self.fmt.append(f"{pad}x")
            self.offset += pad

    def struct(self, cls: type, path: str) -> tuple[int, tuple[_Step, ...]]:
        """Lay out ``cls`` at the current offset; returns its alignment and its flatten steps."""
        align = _struct_alignment(cls)
        self._pad_to(align)
        steps: list[_Step] = []
        scalar_run: list[str] = []

        def flush_scalars() -> None:
            if len(scalar_run) == 1:
                steps.append(_append_attr(scalar_run[0]))
            elif scalar_run:
                steps.append(_extend_attrs(tuple(scalar_run)))
            scalar_run.clear()

        for name, hint in typing.get_type_hints(cls, include_extras=True).items():
            here = f"{path}.{name}" if path else name
            prim = _primitive_name(hint)
            arr = _array_meta(hint)
            if prim is not None:
                char, size = _PRIMITIVES[prim]
                self._pad_to(size)
                self.offsets[here] = self.offset
                self.fmt.append(char)
                self.offset += size
                scalar_run.append(name)
                continue
            flush_scalars()
            if arr is not None and _primitive_name(arr.subtype) is not None:
                char, size = _PRIMITIVES[_primitive_name(arr.subtype)]
                self._pad_to(size)
                self.offsets[here] = self.offset
                if char == "B":  # uint8 arrays travel as bytes; one "Ns" item packs them in one go
                    self.fmt.append(f"{arr.length}s")
                    steps.append(_append_bytes(name, arr.length))
                else:
                    self.fmt.append(f"{arr.length}{char}")
                    steps.append(_extend_array(name, arr.length))
                self.offset += size * arr.length
            elif arr is not None and _is_idl_struct(arr.subtype):
                self.offsets[here] = self.offset + -self.offset % _struct_alignment(arr.subtype)
                element_steps: tuple[_Step, ...] = ()
                for i in range(arr.length):
                    _, element_steps = self.struct(arr.subtype, f"{here}[{i}]")
                steps.append(_each_struct(name, arr.length, element_steps))
            elif _is_idl_struct(hint):
                self.offsets[here] = self.offset + -self.offset % _struct_alignment(hint)
                _, member_steps = self.struct(hint, here)
                steps.append(_nested_struct(name, member_steps))
            else:
                raise TypeError(f"{cls.__name__}.{name}: IDL type {hint!r} has no C layout here "
                                "(only fixed-size primitives, arrays and structs)")
        flush_scalars()
        self._pad_to(align)
        return align, tuple(steps)


def _is_idl_struct(t: object) -> bool:
    return isinstance(t, type) and issubclass(t, idl.IdlStruct)


def _struct_alignment(cls: type) -> int:
    align = 1
    for hint in typing.get_type_hints(cls, include_extras=True).values():
        arr = _array_meta(hint)
        inner = arr.subtype if arr is not None else hint
        if _is_idl_struct(inner):
            align = max(align, _struct_alignment(inner))
        elif _primitive_name(inner) is not None:
            align = max(align, _PRIMITIVES[_primitive_name(inner)][1])
    return align


def _append_attr(name: str) -> _Step:
    get = attrgetter(name)
    return lambda msg, out: out.append(get(msg))


def _extend_attrs(names: tuple[str, ...]) -> _Step:
    get = attrgetter(*names)
    return lambda msg, out: out.extend(get(msg))


# Array steps check the length: "Ns" pads or truncates silently, and a short array next to a long one
# would keep struct's item count right while shifting every field between them.
def _extend_array(name: str, length: int) -> _Step:
    get = attrgetter(name)

    def run(msg: object, out: list) -> None:
        values = get(msg)
        if len(values) != length:
            raise ValueError(f"{name} has {len(values)} elements, the IDL array has {length}")
        out.extend(values)
    return run


def _append_bytes(name: str, length: int) -> _Step:
    get = attrgetter(name)

    def run(msg: object, out: list) -> None:
        values = bytes(get(msg))
        if len(values) != length:
            raise ValueError(f"{name} has {len(values)} elements, the IDL array has {length}")
        out.append(values)
    return run


def _nested_struct(name: str, steps: tuple[_Step, ...]) -> _Step:
    get = attrgetter(name)

    def run(msg: object, out: list) -> None:
        member = get(msg)
        for step in steps:
            step(member, out)
    return run


def _each_struct(name: str, length: int, steps: tuple[_Step, ...]) -> _Step:
    get = attrgetter(name)

    def run(msg: object, out: list) -> None:
        elements = get(msg)
        if len(elements) != length:
            raise ValueError(f"{name} has {len(elements)} elements, the IDL array has {length}")
        for element in elements:
            for step in steps:
                step(element, out)
    return run


_compiled: dict[type, _Compiled] = {}


def _compile(cls: type) -> _Compiled:
    found = _compiled.get(cls)
    if found is not None:
        return found
    typename = getattr(cls, "__idl_typename__", None)
    if typename not in CRC_TYPENAMES:
        raise TypeError(f"Unitree CRC: {cls.__module__}.{cls.__qualname__} (IDL type {typename!r}) carries no "
                        f"Unitree CRC; supported: {', '.join(CRC_TYPENAMES)}")
    builder = _LayoutBuilder()
    try:
        align, steps = builder.struct(cls, "")
    except NameError as exc:  # string annotations (e.g. Unitree's own generated classes) that do not resolve
        raise TypeError(f"Unitree CRC: cannot resolve the field types of {cls.__qualname__}: {exc}; "
                        "use the classes in robot_rl.dds.unitree_go / unitree_hg") from exc
    layout = CStructLayout(typename, "<" + "".join(builder.fmt), builder.offset, align, builder.offsets)
    if layout.offsets.get("crc") != layout.size - 4:
        raise TypeError(f"Unitree CRC: {typename} must end with 'crc: uint32' (crc at offset "
                        f"{layout.offsets.get('crc')}, struct size {layout.size})")
    compiled = _Compiled(layout, struct.Struct(layout.fmt), steps)
    assert compiled.packer.size == layout.size
    _compiled[cls] = compiled
    return compiled


def c_layout(msg_type: type) -> CStructLayout:
    """The C struct layout Unitree's CRC is computed over, for a ``LowCmd_``/``LowState_`` class."""
    return _compile(msg_type).layout


def _field_problem(value: object, hint: object, path: str) -> str | None:
    """Why ``value`` cannot be packed as ``hint`` (None when it can): the slow path behind a clear error."""
    prim = _primitive_name(hint)
    arr = _array_meta(hint)
    if prim is not None:
        try:
            struct.pack("<" + _PRIMITIVES[prim][0], value)
        except (struct.error, OverflowError, TypeError) as exc:
            return f"{path} = {value!r} is not a valid {prim} ({exc})"
        return None
    if arr is not None:
        try:
            count = len(value)  # type: ignore[arg-type]
        except TypeError:
            return f"{path} = {value!r} is not a sequence of {arr.length}"
        if count != arr.length:
            return f"{path} has {count} elements, the IDL array has {arr.length}"
        for i, item in enumerate(value):  # type: ignore[arg-type]
            problem = _field_problem(item, arr.subtype, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if _is_idl_struct(hint):
        if not isinstance(value, hint):
            return f"{path} = {value!r} is not a {hint.__name__}"
        for name, sub in typing.get_type_hints(hint, include_extras=True).items():
            problem = _field_problem(getattr(value, name, None), sub, f"{path}.{name}")
            if problem:
                return problem
    return None


def pack_c_struct(msg: idl.IdlStruct) -> bytes:
    """The C struct image of ``msg`` (padding zeroed, ``crc`` included as it stands)."""
    compiled = _compile(type(msg))
    values: list = []
    try:
        for step in compiled.steps:
            step(msg, values)
        return compiled.packer.pack(*values)
    except (struct.error, OverflowError, TypeError, ValueError, AttributeError) as exc:
        problem = _field_problem(msg, type(msg), compiled.layout.typename)
        raise ValueError(f"Unitree CRC: cannot pack {problem or compiled.layout.typename}: {exc}") from exc


def crc32_core(words: bytes) -> int:
    """Unitree's ``crc32_core`` over little-endian uint32 words (``len(words)`` a multiple of 4)."""
    if len(words) % 4:
        raise ValueError(f"crc32_core: {len(words)} bytes is not a whole number of uint32 words")
    swapped = array("I")
    swapped.frombytes(words)
    swapped.byteswap()
    return crc32_of_prepared(swapped.tobytes().translate(_BITREV8))


def crc32_of_prepared(prepared: bytes | np.ndarray) -> int:
    """:func:`crc32_core` of words already byte-swapped and bit-reversed byte by byte (the codec's gather
    produces them that way: robot_rl.dds.codec)."""
    reflected = zlib.crc32(prepared) ^ 0xFFFFFFFF
    return int.from_bytes(reflected.to_bytes(4, "little").translate(_BITREV8), "big")


def unitree_crc(msg: idl.IdlStruct) -> int:
    """The CRC Unitree expects in ``msg.crc`` for a ``LowCmd_`` or ``LowState_`` of either family."""
    return crc32_core(pack_c_struct(msg)[:-4])


def low_cmd_crc(msg: idl.IdlStruct) -> int:
    """The CRC of a ``unitree_go`` or ``unitree_hg`` ``LowCmd_`` (what the robot checks)."""
    typename = getattr(msg, "__idl_typename__", None)
    if typename not in _LOW_CMD_TYPENAMES:
        raise TypeError(f"low_cmd_crc: expected a LowCmd_ ({', '.join(_LOW_CMD_TYPENAMES)}), "
                        f"got {type(msg).__qualname__} ({typename!r})")
    return unitree_crc(msg)


_M = typing.TypeVar("_M", bound=idl.IdlStruct)


def with_crc(msg: _M) -> _M:
    """Sets ``msg.crc`` in place (no copy: this runs every control period) and returns ``msg``."""
    msg.crc = unitree_crc(msg)
    return msg


def crc_ok(msg: idl.IdlStruct) -> bool:
    """Whether ``msg.crc`` matches its contents."""
    return msg.crc == unitree_crc(msg)
