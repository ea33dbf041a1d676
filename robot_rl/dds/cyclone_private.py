"""The one place robot_rl touches Cyclone DDS Python internals, each with a public-API fallback.

The 500 Hz command stream re-sends stored bytes and the supervisor notes raw arrivals without decoding
them; Cyclone's public Python API (``DataWriter.write`` / ``DataReader.take``) always (de)serializes, which
costs two orders of magnitude more per ``LowCmd`` in Python. So, where the binding is one we verified,
this module uses its internals:

- ``cyclonedds._clayer.ddspy_write(writer._ref, bytes)``: publish already serialized bytes;
- ``cyclonedds._clayer.ddspy_take(reader._ref, mask, n)``: take samples as bytes, undecoded;
- ``Entity.__del__()``: delete a DDS entity now (the binding has no public ``delete``).

Everything else (the encoding a writer uses, serializing) goes through public API. With any other
binding version, or with ``ROBOT_RL_DDS_PUBLIC_API=1`` in the environment, the same functions use the
public API only (``DataWriter.write`` of the message, ``DataReader.take`` re-serialized, deletion by
dropping the last reference): the same bytes on the wire (tests/dds/test_cyclone_private.py), only slower
(figures below).

Supported versions: the fast path is used for cyclonedds >= 11.0, < 11.1 (``FAST_PATH_VERSIONS``).
Run and tested with 11.0.1, the version pyproject pins (tests/dds/test_cyclone_private.py: both paths
put the same bytes on the wire). Read in the binding's source: 11.0.0 and its master of 2026-05-11 call
``ddspy_write(ref, bytes)`` / ``ddspy_take(ref, mask, N)`` exactly as 11.0.1 does; 0.10.x does not
(``ddspy_take(ref, N)``, no mask), so 0.10.x and anything outside the range run on the public-API
fallback, which needs only ``DataWriter.write``, ``DataReader.take``, ``get_qos`` and ``IdlStruct``
(de)serialization. Widen the range after running the tests above against a new release.

The fallback is much slower per message (figures: benchmarks/results/RESULTS_dds_write_path.md), which is
why the fast path exists at all.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import re
from collections.abc import Sequence

from robot_rl.dds import CYCLONEDDS_MISSING

try:
    from cyclonedds.core import InstanceState, SampleState, ViewState, WaitSet
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy
    from cyclonedds.sub import DataReader
except ImportError as exc:  # only without the deploy extra
    raise ImportError(CYCLONEDDS_MISSING) from exc

# (lowest, first excluded) binding versions whose internals below were verified.
FAST_PATH_VERSIONS = ((11, 0), (11, 1))
CYCLONEDDS_VERSION = importlib.metadata.version("cyclonedds")
_ANY = SampleState.Any | ViewState.Any | InstanceState.Any


def _version_tuple(version: str) -> tuple[int, ...]:
    """Leading release numbers: "11.0.1" → (11, 0, 1), "0.10.5rc1" → (0, 10, 5)."""
    parts = []
    for piece in version.split("."):
        match = re.match(r"\d+", piece)
        if match is None:
            break
        parts.append(int(match.group()))
        if match.end() < len(piece):
            break
    return tuple(parts)


def _load_fast_path() -> tuple | None:
    if os.environ.get("ROBOT_RL_DDS_PUBLIC_API", "") not in ("", "0"):
        return None
    lo, hi = FAST_PATH_VERSIONS
    if not lo <= _version_tuple(CYCLONEDDS_VERSION) < hi:
        return None
    try:
        from cyclonedds._clayer import ddspy_take, ddspy_write
    except ImportError:
        return None
    return ddspy_write, ddspy_take


_FAST = _load_fast_path()
FAST_PATH = _FAST is not None  # whether the internals are in use in this process


def use_version_2(writer: DataWriter) -> bool | None:
    """The ``use_version_2`` argument of ``serialize`` that ``writer.write`` uses (from its public QoS):
    None for the type's native encoding, True for XCDR2 only, False for XCDR1 only."""
    rep = writer.get_qos()[Policy.DataRepresentation]
    if rep is None or (rep.use_cdrv0_representation and rep.use_xcdrv2_representation):
        return None
    return bool(rep.use_xcdrv2_representation)


def serialize_for(writer: DataWriter, msg: object, version_2: bool | str | None = "ask") -> bytes:
    """The bytes ``writer.write(msg)`` would send (serialized, padded to 4 bytes). Pass ``version_2`` (from
    :func:`use_version_2`, once per writer) on a hot path to skip the QoS query."""
    data = msg.serialize(use_version_2=use_version_2(writer) if version_2 == "ask" else version_2)
    return data.ljust((len(data) + 3) & ~3, b"\0")


def write_serialized(writer: DataWriter, data: bytes, msg: object | None = None, *, fast: bool | None = None) -> None:
    """Publish bytes made by :func:`serialize_for`. ``msg`` (optional) is the message they were made from,
    unchanged since: the public-API path writes it instead of decoding ``data`` again. ``fast`` forces a
    path (tests); by default the fast one where available."""
    if _FAST is not None and fast is not False:
        ret = _FAST[0](writer._ref, data)
        if ret < 0:
            raise RuntimeError(f"DDS write on {writer.topic.name} failed with return code {ret}")
        return
    if fast:
        raise RuntimeError(f"the Cyclone DDS fast path is not available (cyclonedds {CYCLONEDDS_VERSION})")
    writer.write(msg if msg is not None else writer.data_type.deserialize(data))


def take_serialized(reader: DataReader, n: int, *, fast: bool | None = None) -> list[bytes]:
    """Take up to ``n`` samples with data (not a writer's goodbye) as serialized bytes, oldest first.
    The fast path does not decode them; the public path decodes and re-encodes (same content)."""
    if _FAST is not None and fast is not False:
        return [data for data, info in _FAST[1](reader._ref, _ANY, n) if info.valid_data]
    if fast:
        raise RuntimeError(f"the Cyclone DDS fast path is not available (cyclonedds {CYCLONEDDS_VERSION})")
    return [s.serialize() for s in reader.take(N=n) if s.sample_info.valid_data]


def delete_entities(entities: Sequence) -> None:
    """Delete DDS entities now, in the order given (a WaitSet first, the participant last), rather than
    whenever the garbage collector gets to them. Fast path: ``Entity.__del__`` deletes the C entity and
    marks it deleted, so the collector's later call is a no-op. Public path: the caller must hold no other
    reference to them; the list is cleared and the collector run."""
    if _FAST is not None:
        for entity in entities:
            entity.__del__()
            if isinstance(entity, WaitSet):
                entity.attached = []
        return
    for entity in entities:
        if isinstance(entity, WaitSet):
            for condition in list(entity.attached):
                entity.detach(condition)
    if isinstance(entities, list):
        entities.clear()
    gc.collect()
