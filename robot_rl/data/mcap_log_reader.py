"""Reading deploy logs (written by :class:`~robot_rl.data.mcap_log.DeployLogWriter`): the records, and a
summary of a run (duration, messages per channel, safety events, loop timing, dropped records).

Read from the start, record by record (``mcap``'s streaming reader: no index, no footer needed), so a log
whose writer was killed reads up to its last complete record, and the summary says it is ``truncated``.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.core.tick_trace import TickBreakdown
from robot_rl.data.mcap_log import EVENTS, METADATA_NAME, TIMING, TOPICS

try:
    from mcap.exceptions import EndOfFile, McapError, RecordLengthLimitExceeded
    from mcap.records import Channel, DataEnd, Header, Message, Metadata
    from mcap.stream_reader import StreamReader
    from zstandard import ZstdError
except ImportError as exc:  # pragma: no cover - part of the deploy extra
    raise ImportError("robot_rl.data.mcap_log_reader needs the mcap package: pip install 'robot-rl[deploy]'") from exc

SLOW_TICKS = 5  # the slowest ticks summarize_log explains


class LogReadError(RobotRLError, ValueError):
    """A deploy log that does not exist or is not a readable MCAP deploy log (the message names the file)."""


@dataclass(frozen=True)
class LogRecord:
    topic: str
    log_time_ns: int
    data: dict[str, Any]


class _LogScan:
    """One pass over a deploy log, record by record from the start (``mcap``'s streaming reader: no index,
    no footer needed). Iterate it for the messages; afterwards ``complete`` says whether the file ended
    with its footer, ``problem`` why reading stopped early, ``metadata`` holds the writer's counters."""

    def __init__(self, path: Path, topics: tuple[str, ...] | None = None) -> None:
        self.path, self.topics = path, None if topics is None else set(topics)
        self.complete = self.data_complete = False
        self.problem: str | None = None
        self.metadata: dict[str, str] = {}
        self.messages = 0
        self.bytes_read = 0

    def _fail(self, what: str) -> LogReadError:
        return LogReadError(f"{self.path}: not a readable MCAP deploy log ({what})")

    def __iter__(self) -> Iterator[LogRecord]:
        path = self.path
        if not path.is_file():
            raise LogReadError(f"{path}: no such deploy log")
        size = path.stat().st_size
        channels: dict[int, Channel] = {}
        header = False
        with path.open("rb") as stream:
            records = StreamReader(stream, validate_crcs=True, record_size_limit=max(size, 1)).records
            while True:
                try:
                    record = next(records)
                except StopIteration:
                    self.complete = True
                    break
                except (McapError, EOFError, ValueError, struct.error, ZstdError) as exc:
                    if not header:  # not MCAP at all, or cut inside the first record
                        raise self._fail(f"{type(exc).__name__}: {exc}" if str(exc) else
                                         f"ends after {size} bytes, before its header") from exc
                    if isinstance(exc, EndOfFile | struct.error):
                        self.problem = "the next record is cut off"
                    elif isinstance(exc, RecordLengthLimitExceeded):
                        self.problem = "the next record claims to be longer than the rest of the file"
                    else:  # a chunk that does not decompress or fails its CRC: corrupt, not just cut
                        self.problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    break
                self.bytes_read = stream.tell()
                if isinstance(record, Header):
                    header = True
                elif isinstance(record, Channel):
                    channels[record.id] = record
                elif isinstance(record, Metadata) and record.name == METADATA_NAME:
                    self.metadata = dict(record.metadata)
                elif isinstance(record, DataEnd):
                    self.data_complete = True
                elif isinstance(record, Message):
                    channel = channels.get(record.channel_id)
                    if channel is None:
                        raise self._fail(f"message on channel {record.channel_id}, which was never declared")
                    if self.topics is not None and channel.topic not in self.topics:
                        continue
                    if channel.message_encoding != "json":
                        raise self._fail(f"channel {channel.topic} carries {channel.message_encoding!r} "
                                         "messages; a deploy log's are JSON")
                    try:
                        data = json.loads(record.data)
                    except ValueError as exc:
                        raise self._fail(f"a {channel.topic} message is not JSON: {exc}") from exc
                    self.messages += 1
                    yield LogRecord(channel.topic, record.log_time, data)


def read_log(path: str | Path, topics: tuple[str, ...] | None = None) -> Iterator[LogRecord]:
    """The log's messages in the order written (log-time order for one writer), all topics or ``topics``.

    Read from the start, record by record, so a log whose writer never finished (the process was killed)
    reads up to its last complete chunk; :func:`summarize_log` also says whether the file was complete.
    A file that is not an MCAP deploy log raises :class:`LogReadError` naming it.
    """
    yield from _LogScan(Path(path), topics)


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    a = np.asarray(values, dtype=np.float64)
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def summarize_log(path: str | Path) -> dict[str, Any]:
    """Duration, messages per channel, safety events, loop-timing percentiles and dropped records.

    ``truncated`` is True when the file ends before its footer (the writer was killed): everything before
    the first incomplete record is summarized, and ``problem`` says where reading stopped.
    """
    path = Path(path)
    scan = _LogScan(path)
    counts: Counter[str] = Counter()
    first = last = None
    by_filter: Counter[str] = Counter()
    faults, examples = 0, []
    lateness, work, missed = [], [], 0
    slow: list[tuple[float, int, float, dict]] = []  # (past deadline s, tick, t, trace): the slowest traced ticks
    for record in scan:
        counts[record.topic] += 1
        first = record.log_time_ns if first is None else min(first, record.log_time_ns)
        last = record.log_time_ns if last is None else max(last, record.log_time_ns)
        d = record.data
        if record.topic == EVENTS:
            by_filter[d["filter"]] += 1
            faults += bool(d["fault"])
            if len(examples) < 10:
                examples.append(f"[{'FAULT' if d['fault'] else 'limit'}] {d['filter']}: {d['detail']}")
        elif record.topic == TIMING:
            if d["lateness_s"] is not None:
                lateness.append(d["lateness_s"])
            if d["work_s"] is not None:
                work.append(d["work_s"])
            missed += d["missed"]
            if d.get("trace") is not None and d["lateness_s"] is not None and d["work_s"] is not None:
                slow.append((d["lateness_s"] + d["work_s"], d["tick"], d["t"], d["trace"]))
                if len(slow) > 2 * SLOW_TICKS:
                    slow = sorted(slow, reverse=True)[:SLOW_TICKS]
    meta = scan.metadata  # empty when not finished: the counters are written by close()
    return {
        "file": str(path),
        "duration_s": 0.0 if first is None else (last - first) * 1e-9,
        "messages": {topic: counts.get(topic, 0) for topic in TOPICS} | {t: n for t, n in counts.items()
                                                                         if t not in TOPICS},
        "safety_events": {"total": sum(by_filter.values()), "faults": faults, "by_filter": dict(by_filter),
                          "first": examples},
        "timing": {"ticks": len(lateness), "missed_deadlines": missed, "lateness_s": _percentiles(lateness),
                   "work_s": _percentiles(work),
                   "slowest_ticks": [{"tick": tick, "t": t, "past_deadline_s": past,
                                      "cause": (b := TickBreakdown.from_dict(tr, t)).cause(),
                                      "describe": b.describe()}
                                     for past, tick, t, tr in sorted(slow, reverse=True)[:SLOW_TICKS]]},
        "dropped_records": int(meta["dropped_records"]) if "dropped_records" in meta else None,
        "closed_cleanly": bool(meta),
        "truncated": not scan.complete,
        "records": scan.messages,
        "problem": None if scan.complete else (
            f"the index after the last record is cut off ({scan.problem})" if scan.data_complete
            else f"the file ends mid-record after byte {scan.bytes_read} of {path.stat().st_size} "
                 f"({scan.problem})"),
    }


def log_summarize(file: str, /) -> int:
    """Summarize a deploy log (MCAP): duration, messages per channel, safety events, loop timing, drops.

    Exit status: 0 for a complete log; 1 for a truncated one (its writer was killed: the summary covers the
    records recovered, and a warning on stderr says so); 2 when the file is missing or not a deploy log.
    """
    import sys

    from rich.console import Console
    from rich.table import Table

    summary = summarize_log(file)
    if summary["truncated"]:
        print(f"warning: {summary['file']}: truncated: {summary['problem']}; recovered {summary['records']} "
              f"records / {summary['duration_s']:.2f} s, and the summary below covers only those", file=sys.stderr,
              flush=True)
    console = Console()
    console.print(f"[bold]{summary['file']}[/bold]: {summary['duration_s']:.2f} s"
                  + ("" if summary["closed_cleanly"] else "  [red](not closed cleanly: no counters)[/red]"))
    table = Table(title="messages")
    table.add_column("channel")
    table.add_column("count", justify="right")
    for topic, count in summary["messages"].items():
        table.add_row(topic, str(count))
    console.print(table)
    timing = summary["timing"]
    table = Table(title=f"loop timing ({timing['ticks']} ticks, {timing['missed_deadlines']} missed deadlines)")
    for col in ("", "p50 (ms)", "p99 (ms)", "max (ms)"):
        table.add_column(col, justify="right" if col else "left")
    for name in ("lateness_s", "work_s"):
        row = timing[name]
        table.add_row(name.removesuffix("_s"), *("-" if row[k] is None else f"{1e3 * row[k]:.3f}"
                                                 for k in ("p50", "p99", "max")))
    console.print(table)
    for slow in timing["slowest_ticks"]:
        console.print(f"  slow tick {slow['tick']}: {slow['describe']}", markup=False)
    events = summary["safety_events"]
    console.print(f"safety events: {events['total']} ({events['faults']} faults) "
                  + ", ".join(f"{k}: {v}" for k, v in sorted(events["by_filter"].items())))
    for line in events["first"]:
        console.print(f"  {line}", markup=False)
    console.print(f"dropped records: {summary['dropped_records'] if summary['dropped_records'] is not None else '?'}")
    return 1 if summary["truncated"] else 0
