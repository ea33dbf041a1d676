"""Deploy logs: what the robot measured, what the policy proposed, what was sent, safety events and loop
timing, in one MCAP file per run.

Written off the control thread. ``log_*`` only copies the record's arrays and appends a tuple to a
bounded deque (an append is atomic under the GIL: no lock, never blocks); when the deque is full the
record is dropped and counted. A writer thread wakes every ``poll_s``, turns records into JSON and hands
them to the ``mcap`` writer (zstd-compressed chunks). ``close()`` drains the queue, records the counters
as MCAP metadata (``robot_rl.deploy_log``) and finishes the file (summary section and index).

Crash safety: the writer thread ends the chunk in progress and writes it to the file every ``flush_s``
(0.5 s; ``os.fsync`` too, so a power cut keeps it as well), not only when a chunk reaches ``chunk_size``.
A process killed outright (SIGKILL, the OOM killer, a segfault) therefore loses at most the last
``flush_s`` plus the queue's backlog, not a whole 1 MiB chunk (≈ 8 s at 500 Hz); see
benchmarks/results/RESULTS_deploy_log.md. Such a file has no summary section: the reader
(:mod:`robot_rl.data.mcap_log_reader`: ``read_log``, ``summarize_log``) reads it from the start, record by
record, and stops at the first incomplete one; ``summarize_log`` says so (``truncated``).

An existing file is never replaced unless ``overwrite=True`` (:class:`LogExistsError`).

Channels, each with a JSON schema (``jsonschema`` encoding) and JSON messages (``json`` encoding):

======================== ===========================  ==========================================
topic                    schema name                  content
======================== ===========================  ==========================================
/robot/state             robot_rl/RobotState           ``RobotState`` as read
/robot/command_proposed  robot_rl/JointCommand         before the safety chain
/robot/command_sent      robot_rl/JointCommand         after it (what ``write()`` returned)
/safety/events           robot_rl/SafetyEvent          each event of the chain (filter, fault, detail)
/loop/timing             robot_rl/LoopTiming           per tick: lateness, work time, missed deadlines
======================== ===========================  ==========================================

rosbag2 compatibility: the container is what rosbag2's MCAP storage plugin writes (MCAP with chunks,
message indexes and a summary section; log_time in ns since the epoch), so Foxglove Studio, the ``mcap``
CLI and any MCAP reader open it, and the topic names follow ROS naming. The payloads are JSON, not CDR,
and the schemas are JSON schemas, not ``ros2msg`` definitions: ``ros2 bag play`` cannot republish these
channels as ROS messages (rosbag2 needs CDR messages of a ROS type), and ``ros2 bag info`` reads them only
as far as the MCAP summary goes. Not-a-number values are written as ``null`` (JSON has no NaN).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.core.tick_trace import decode
from robot_rl.core.types import JointCommand, RobotState

try:
    from mcap.writer import Writer
except ImportError as exc:  # pragma: no cover - part of the deploy extra
    raise ImportError("robot_rl.data.mcap_log needs the mcap package: pip install 'robot-rl[deploy]'") from exc

STATE, PROPOSED, SENT, EVENTS, TIMING = ("/robot/state", "/robot/command_proposed", "/robot/command_sent",
                                         "/safety/events", "/loop/timing")
METADATA_NAME = "robot_rl.deploy_log"
DEFAULT_QUEUE_CAPACITY = 1 << 16  # ≈ 20 s of 500 Hz state + command + timing records
DEFAULT_FLUSH_S = 0.5  # longest a record waits in memory (plus the queue's backlog) before it is in the file

_NUMBERS = {"type": "array", "items": {"type": ["number", "null"]}}
_VECTOR_OR_NULL = {"type": ["array", "null"], "items": {"type": ["number", "null"]}}
_TIME = {"type": "number", "description": "time.monotonic() of the control process, s"}
_COMMAND_SCHEMA = {"type": "object", "title": "robot_rl/JointCommand", "properties": {
    "t": _TIME, "q_target": _NUMBERS, "dq_target": _NUMBERS, "kp": _NUMBERS, "kd": _NUMBERS, "tau_ff": _NUMBERS}}
SCHEMAS: dict[str, dict[str, Any]] = {
    STATE: {"type": "object", "title": "robot_rl/RobotState", "properties": {
        "t": {"type": "number", "description": "RobotState.timestamp: arrival time, time.monotonic(), s"},
        "tick": {"type": "integer"}, "q": _NUMBERS, "dq": _NUMBERS, "tau": _NUMBERS,
        "base_quat": _NUMBERS, "base_ang_vel": _NUMBERS, "base_lin_acc": _NUMBERS,
        "base_lin_vel": _VECTOR_OR_NULL, "base_pos": _VECTOR_OR_NULL}},
    PROPOSED: _COMMAND_SCHEMA,
    SENT: _COMMAND_SCHEMA,
    EVENTS: {"type": "object", "title": "robot_rl/SafetyEvent", "properties": {
        "t": _TIME, "filter": {"type": "string"}, "fault": {"type": "boolean"}, "detail": {"type": "string"},
        "joints": {"type": "array", "items": {"type": "integer"}}}},
    TIMING: {"type": "object", "title": "robot_rl/LoopTiming", "properties": {
        "t": _TIME, "tick": {"type": "integer"}, "lateness_s": {"type": ["number", "null"]},
        "work_s": {"type": ["number", "null"]}, "missed": {"type": "integer"},
        "trace": {"type": "object", "description": "robot_rl.core.tick_trace.TickBreakdown.as_dict(): wall time "
                  "of each phase (read, step, write, record), and for the work (wake → end) and the wait before "
                  "it: [wall s, CPU s, run-queue s, voluntary switches, involuntary switches, page faults] of the "
                  "loop's thread", "properties": {
                      "lateness_s": {"type": ["number", "null"]}, "phases_s": _NUMBERS, "work": _NUMBERS,
                      "wait": _NUMBERS}}}},
}
TOPICS = tuple(SCHEMAS)


def _floats(values: np.ndarray | None) -> list | None:
    if values is None:
        return None
    values = np.asarray(values, dtype=np.float64)
    if np.isfinite(values).all():
        return values.tolist()
    return [v if np.isfinite(v) else None for v in values.tolist()]


def _scalar(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _copy(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else np.array(a, dtype=np.float64)


class LogExistsError(RobotRLError, FileExistsError):
    """A deploy log would replace an existing file (the message names it)."""


class DeployLogWriter:
    """Append records from the control thread; a background thread writes them. See the module docstring."""

    def __init__(self, path: str | Path, *, queue_capacity: int = DEFAULT_QUEUE_CAPACITY, poll_s: float = 0.01,
                 flush_s: float = DEFAULT_FLUSH_S, fsync: bool = True, overwrite: bool = False,
                 metadata: dict[str, str] | None = None) -> None:
        if queue_capacity < 1:
            raise ValueError(f"DeployLogWriter queue_capacity must be >= 1, got {queue_capacity!r}")
        if not flush_s > 0:
            raise ValueError(f"DeployLogWriter flush_s must be > 0, got {flush_s!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.queue_capacity, self.poll_s, self.flush_s, self.fsync = queue_capacity, poll_s, flush_s, fsync
        self.enqueued = self.dropped = self.written = 0
        self._queue: deque[tuple[str, int, tuple]] = deque()
        self._closing = threading.Event()
        self._error: BaseException | None = None
        try:  # "x": the check and the creation are one step, so nothing can slip in between
            self._stream = self.path.open("wb" if overwrite else "xb")
        except FileExistsError:
            raise LogExistsError(f"{self.path}: a file is already there; choose another log path, or pass "
                                 "--overwrite to replace it") from None
        self._writer = Writer(self._stream)
        self._writer.start(profile="", library="robot_rl deploy log")
        self._channels = {}
        for topic, schema in SCHEMAS.items():
            schema_id = self._writer.register_schema(name=schema["title"], encoding="jsonschema",
                                                     data=json.dumps(schema, sort_keys=True).encode())
            self._channels[topic] = self._writer.register_channel(topic=topic, message_encoding="json",
                                                                  schema_id=schema_id)
        self._sequence = dict.fromkeys(SCHEMAS, 0)
        self._unflushed = False
        self._writer.flush()  # the header and channels are in the file at once: even a run killed now reads
        self._user_metadata = dict(metadata or {})
        self._thread = threading.Thread(target=self._run, name="deploy-log-writer", daemon=True)
        self._thread.start()

    # --- control thread: enqueue only ---------------------------------------------------------------

    def _put(self, topic: str, payload: tuple) -> bool:
        if len(self._queue) >= self.queue_capacity or self._closing.is_set():
            self.dropped += 1
            return False
        self._queue.append((topic, time.time_ns(), payload))
        self.enqueued += 1
        return True

    def log_state(self, state: RobotState) -> bool:
        """Queue one state; False when it was dropped (queue full or writer closing)."""
        return self._put(STATE, (state.timestamp, state.tick, _copy(state.q), _copy(state.dq), _copy(state.tau),
                                 _copy(state.base_quat), _copy(state.base_ang_vel), _copy(state.base_lin_acc),
                                 _copy(state.base_lin_vel), _copy(state.base_pos)))

    def log_command(self, command: JointCommand, *, sent: bool, t: float | None = None) -> bool:
        """Queue a command: ``sent=False`` before the safety chain (proposed), ``True`` after it."""
        return self._put(SENT if sent else PROPOSED,
                         (time.monotonic() if t is None else t, _copy(command.q_target), _copy(command.dq_target),
                          _copy(command.kp), _copy(command.kd), _copy(command.tau_ff)))

    def log_event(self, event: object, t: float | None = None) -> bool:
        """Queue a safety event (``robot_rl.safety.filters.SafetyEvent`` or anything with ``filter_name``,
        ``fault``, ``detail`` and ``joints``; a plain string is logged as a non-fault "note")."""
        if isinstance(event, str):
            fields = ("note", False, event, ())
        else:
            fields = (str(event.filter_name), bool(event.fault), str(event.detail),
                      tuple(int(j) for j in getattr(event, "joints", ())))
        return self._put(EVENTS, (time.monotonic() if t is None else t, *fields))

    def log_timing(self, tick: int, lateness_s: float, work_s: float, missed: int = 0,
                   t: float | None = None, trace: np.ndarray | None = None) -> bool:
        """Queue one control tick's timing (``RateLoop``'s ``Tick`` fields and the work time); ``trace``: the
        tick's :meth:`robot_rl.core.tick_trace.TickTrace.row` (a copy the caller does not keep)."""
        return self._put(TIMING, (time.monotonic() if t is None else t, int(tick), float(lateness_s),
                                  float(work_s), int(missed), trace))

    # --- writer thread -------------------------------------------------------------------------------

    @staticmethod
    def _message(topic: str, p: tuple) -> dict[str, Any]:
        if topic == STATE:
            keys = ("q", "dq", "tau", "base_quat", "base_ang_vel", "base_lin_acc", "base_lin_vel", "base_pos")
            return {"t": p[0], "tick": p[1], **{k: _floats(v) for k, v in zip(keys, p[2:], strict=True)}}
        if topic in (PROPOSED, SENT):
            keys = ("q_target", "dq_target", "kp", "kd", "tau_ff")
            return {"t": p[0], **{k: _floats(v) for k, v in zip(keys, p[1:], strict=True)}}
        if topic == EVENTS:
            return {"t": p[0], "filter": p[1], "fault": p[2], "detail": p[3], "joints": list(p[4])}
        timing = {"t": p[0], "tick": p[1], "lateness_s": _scalar(p[2]), "work_s": _scalar(p[3]), "missed": p[4]}
        if p[5] is not None:
            timing["trace"] = decode(p[5]).as_dict()
        return timing

    def _drain(self) -> int:
        count = 0
        while self._queue:
            topic, log_time, payload = self._queue.popleft()
            data = json.dumps(self._message(topic, payload), allow_nan=False, separators=(",", ":")).encode()
            self._writer.add_message(channel_id=self._channels[topic], log_time=log_time, publish_time=log_time,
                                     data=data, sequence=self._sequence[topic])
            self._sequence[topic] += 1
            count += 1
        self.written += count
        return count

    def _flush(self) -> None:
        """End the chunk in progress and put it in the file (and on disk, with ``fsync``)."""
        self._writer.flush()
        if self.fsync:
            os.fsync(self._stream.fileno())

    def _run(self) -> None:
        try:
            next_flush = time.monotonic() + self.flush_s
            while not self._closing.is_set():
                wrote = self._drain()
                if time.monotonic() >= next_flush:
                    if wrote or self._unflushed:
                        self._flush()
                    self._unflushed = False
                    next_flush = time.monotonic() + self.flush_s
                elif wrote:
                    self._unflushed = True
                if not wrote:
                    self._closing.wait(min(self.poll_s, max(0.0, next_flush - time.monotonic())))
            self._drain()
        except BaseException as exc:  # disk full, bad value: reported by close(), never on the control thread
            self._error = exc
            self._closing.set()

    def close(self) -> None:
        """Write everything queued, the counters as metadata, and the MCAP summary. Idempotent."""
        if self._stream.closed:
            return
        self._closing.set()
        self._thread.join()
        try:
            if self._error is None:
                self._writer.add_metadata(METADATA_NAME, {
                    "enqueued": str(self.enqueued), "written": str(self.written), "dropped_records": str(self.dropped),
                    "queue_capacity": str(self.queue_capacity), **self._user_metadata})
            self._writer.finish()
        finally:
            self._stream.close()
        if self._error is not None:
            raise RuntimeError(f"deploy log {self.path}: the writer thread failed after {self.written} records: "
                               f"{self._error!r}") from self._error

    def __enter__(self) -> DeployLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
