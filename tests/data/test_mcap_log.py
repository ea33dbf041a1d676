"""Deploy logs: records queued from a control thread come back from the MCAP file, complete and in order;
the summary counts them; a full queue drops and counts instead of blocking; an unfinished log still reads."""

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.data.mcap_log import (
    EVENTS,
    PROPOSED,
    SENT,
    STATE,
    TIMING,
    TOPICS,
    DeployLogWriter,
    LogExistsError,
)
from robot_rl.data.mcap_log_reader import log_summarize, read_log, summarize_log
from robot_rl.safety.filters import SafetyEvent

N = 3000
ROOT = Path(__file__).resolve().parents[2]


def _state(k: int) -> RobotState:
    return RobotState(timestamp=100.0 + 0.002 * k, tick=k, q=np.full(12, 0.001 * k), dq=np.arange(12.0),
                      tau=np.zeros(12), base_lin_vel=np.array([0.1, 0.0, -0.1]) if k % 2 else None)


def _control_thread(log: DeployLogWriter) -> None:
    """Stands in for the runtime's control thread: logs every record of a tick, as fast as it can."""
    for k in range(N):
        proposed = JointCommand.hold(np.full(12, 0.01 * k), np.full(12, 20.0), np.full(12, 0.5))
        log.log_state(_state(k))
        log.log_command(proposed, sent=False, t=float(k))
        proposed.q_target[0] = -1.0  # mutating after logging must not change what was logged
        log.log_command(proposed, sent=True, t=float(k))
        log.log_timing(k, lateness_s=1e-5 * (k % 100), work_s=2e-4, missed=int(k % 1000 == 999))
        if k % 500 == 0:
            log.log_event(SafetyEvent("rate_limit", False, f"joint 3 rate limited at tick {k}", (3,)))
    log.log_event(SafetyEvent("staleness", True, "no new state for 5 periods"))


def test_records_logged_from_a_thread_come_back_complete(tmp_path) -> None:
    path = tmp_path / "run.mcap"
    log = DeployLogWriter(path, metadata={"robot": "a1"})
    thread = threading.Thread(target=_control_thread, args=(log,))
    thread.start()
    thread.join()
    log.close()
    assert log.dropped == 0 and log.written == log.enqueued == 4 * N + N // 500 + 1

    records = list(read_log(path))
    by_topic = {topic: [r for r in records if r.topic == topic] for topic in TOPICS}
    assert [len(by_topic[t]) for t in (STATE, PROPOSED, SENT, TIMING, EVENTS)] == [N, N, N, N, N // 500 + 1]
    assert [r.data["tick"] for r in by_topic[STATE]] == list(range(N))
    s = by_topic[STATE][1234].data
    assert s["q"] == pytest.approx([1.234] * 12) and s["t"] == pytest.approx(100.0 + 0.002 * 1234)
    assert by_topic[STATE][1].data["base_lin_vel"] == pytest.approx([0.1, 0.0, -0.1])
    assert by_topic[STATE][2].data["base_lin_vel"] is None
    assert by_topic[PROPOSED][7].data["q_target"][0] == pytest.approx(0.07)
    assert by_topic[SENT][7].data["q_target"][:2] == pytest.approx([-1.0, 0.07])
    assert by_topic[EVENTS][-1].data == {"t": by_topic[EVENTS][-1].data["t"], "filter": "staleness", "fault": True,
                                        "detail": "no new state for 5 periods", "joints": []}

    with path.open("rb") as stream:  # each channel carries its JSON schema and JSON messages
        summary = make_reader(stream).get_summary()
    assert {c.message_encoding for c in summary.channels.values()} == {"json"}
    assert {s.encoding for s in summary.schemas.values()} == {"jsonschema"}
    schema = next(s for s in summary.schemas.values() if s.name == "robot_rl/RobotState")
    assert "base_quat" in json.loads(schema.data)["properties"]


def test_summary_counts_channels_events_timing_and_drops(tmp_path, capsys) -> None:
    path = tmp_path / "run.mcap"
    with DeployLogWriter(path) as log:
        _control_thread(log)
        nan_command = JointCommand.passive(12)
        nan_command.q_target[2] = np.nan  # JSON has no NaN: written as null
        log.log_command(nan_command, sent=False)
    summary = summarize_log(path)
    assert summary["messages"] == {STATE: N, PROPOSED: N + 1, SENT: N, EVENTS: N // 500 + 1, TIMING: N}
    assert summary["safety_events"]["by_filter"] == {"rate_limit": N // 500, "staleness": 1}
    assert summary["safety_events"]["faults"] == 1
    assert summary["safety_events"]["first"][0] == "[limit] rate_limit: joint 3 rate limited at tick 0"
    lateness = 1e-5 * (np.arange(N) % 100)
    assert summary["timing"]["ticks"] == N and summary["timing"]["missed_deadlines"] == N // 1000
    assert summary["timing"]["lateness_s"]["p99"] == pytest.approx(np.percentile(lateness, 99))
    assert summary["timing"]["lateness_s"]["max"] == pytest.approx(99e-5)
    assert summary["dropped_records"] == 0 and summary["closed_cleanly"] and summary["duration_s"] > 0
    last = list(read_log(path, topics=(PROPOSED,)))[-1]
    assert last.data["q_target"][2] is None

    assert log_summarize(str(path)) == 0
    out = capsys.readouterr().out
    assert "/robot/command_sent" in out and "dropped records: 0" in out and "staleness: 1" in out


def test_full_queue_drops_and_counts_instead_of_blocking(tmp_path) -> None:
    path = tmp_path / "small.mcap"
    log = DeployLogWriter(path, queue_capacity=10, poll_s=10.0)  # the writer drains at most once meanwhile
    for k in range(100):
        log.log_state(_state(k))
    log.close()
    assert log.enqueued + log.dropped == 100 and log.dropped >= 80
    summary = summarize_log(path)
    assert summary["dropped_records"] == log.dropped
    assert summary["messages"][STATE] == log.enqueued
    assert not log.log_state(_state(0))  # after close: refused and counted, never an exception


def test_a_log_whose_writer_died_still_reads(tmp_path) -> None:
    path, copy = tmp_path / "run.mcap", tmp_path / "crashed.mcap"
    log = DeployLogWriter(path, flush_s=3600.0)  # no timed flush: the last chunk stays unfinished, as before
    for k in range(20000):
        log.log_state(_state(k))
        if k % 2000 == 0:
            time.sleep(0.01)  # let the writer keep up
    deadline = time.monotonic() + 20
    while log.written < log.enqueued and time.monotonic() < deadline:
        time.sleep(0.01)
    log._stream.flush()
    shutil.copy(path, copy)  # the file as a crash would leave it: no summary, last chunk unfinished
    log.close()
    records = list(read_log(copy))
    assert 0 < len(records) < 20000
    assert [r.data["tick"] for r in records] == list(range(len(records)))
    summary = summarize_log(copy)
    assert not summary["closed_cleanly"] and summary["dropped_records"] is None
    assert summary["truncated"] and summary["records"] == len(records)


def test_not_an_mcap_file_is_named(tmp_path) -> None:
    bad = tmp_path / "notes.mcap"
    bad.write_text("not a log")
    with pytest.raises(ValueError, match=r"notes\.mcap: not a readable MCAP deploy log"):
        summarize_log(bad)


@pytest.mark.parametrize("content", [None, b"garbage", b""])
def test_the_log_command_names_a_missing_or_broken_file_in_one_line(tmp_path, capsys, content) -> None:
    """`robot-rl log summarize`: a missing file, short garbage (the MCAP reader's struct.error) or an empty file."""
    from robot_rl.cli import main

    path = tmp_path / "run.mcap"
    if content is not None:
        path.write_bytes(content)
    assert main(["log", "summarize", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}:") and "Traceback" not in err


# --- crash safety: a killed writer loses at most about a second --------------------------------------------------

CHILD = r"""
import mmap, struct, sys, time
import numpy as np
from robot_rl.core.types import JointCommand, RobotState
from robot_rl.data.mcap_log import DeployLogWriter

path, counter, rate = sys.argv[1], sys.argv[2], float(sys.argv[3])
counter_file = open(counter, "r+b")
shared = mmap.mmap(counter_file.fileno(), 16)
log = DeployLogWriter(path)
command = JointCommand.hold(np.full(12, 0.2), np.full(12, 20.0), np.full(12, 0.5))
start, k = time.monotonic(), 0
print("ready", flush=True)
while True:  # a deploy loop's records at `rate` ticks per second, until SIGKILL
    delay = start + k / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    log.log_state(RobotState(timestamp=time.monotonic(), tick=k, q=np.full(12, 0.1), dq=np.zeros(12),
                             tau=np.zeros(12)))
    log.log_command(command, sent=False)
    log.log_command(command, sent=True)
    log.log_timing(k, 0.0, 1e-4)
    k += 1
    struct.pack_into("<qq", shared, 0, log.enqueued, time.time_ns())
"""


def test_a_sigkilled_writer_loses_at_most_a_second(tmp_path, capsys) -> None:
    """A real process logging at 500 Hz, SIGKILLed after 3 s: the file reads back up to ~1 s before the kill."""
    path, counter = tmp_path / "killed.mcap", tmp_path / "counter"
    counter.write_bytes(bytes(16))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(counter), "500"], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(3.0)
        enqueued, last_enqueue_ns = struct.unpack("<qq", counter.read_bytes())
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert enqueued > 4 * 500 * 2  # it did run at about the deploy rate
    summary = summarize_log(path)
    assert summary["truncated"] and not summary["closed_cleanly"]
    assert summary["records"] >= enqueued - 4 * 500 * 1.0, (summary["records"], enqueued)
    last = max(r.log_time_ns for r in read_log(path))
    assert last >= last_enqueue_ns - 1e9, (last_enqueue_ns - last) * 1e-9
    ticks = [r.data["tick"] for r in read_log(path, topics=(STATE,))]
    assert ticks == list(range(len(ticks)))  # what was recovered is complete: no hole

    assert log_summarize(str(path)) == 1  # truncated: the summary of what was recovered, and exit 1
    captured = capsys.readouterr()
    assert "truncated" in captured.err and f"recovered {summary['records']} records" in captured.err
    assert str(path) in captured.out


def test_a_log_cut_mid_file_recovers_every_complete_chunk(tmp_path, capsys) -> None:
    path = tmp_path / "run.mcap"
    log = DeployLogWriter(path, flush_s=0.05, fsync=False)
    for k in range(2000):
        log.log_state(_state(k))
        if k % 200 == 199:
            time.sleep(0.1)  # ≥ one flush per 200 states: about ten chunks
    log.close()
    data = path.read_bytes()
    for cut in (len(data) // 3, 2 * len(data) // 3, len(data) - 10):
        part = tmp_path / f"cut{cut}.mcap"
        part.write_bytes(data[:cut])
        summary = summarize_log(part)
        assert summary["truncated"] and summary["problem"]
        ticks = [r.data["tick"] for r in read_log(part)]
        assert ticks == list(range(len(ticks)))
        assert len(ticks) >= (2000 * cut / len(data)) - 400  # all but the chunk the cut fell in
        assert log_summarize(str(part)) == 1
        assert "truncated" in capsys.readouterr().err
    assert summarize_log(path)["truncated"] is False and summarize_log(path)["records"] == 2000


@pytest.mark.parametrize("content", [b"\x89MCAP0\r\n" + b"\x01" * 22, "prefix", "png"])
def test_a_30_byte_file_is_one_line_naming_it(tmp_path, capsys, content) -> None:
    from robot_rl.cli import main

    if content == "prefix":  # the first 30 bytes of a real log: cut inside its header
        with DeployLogWriter(tmp_path / "real.mcap"):
            pass
        content = (tmp_path / "real.mcap").read_bytes()[:30]
    elif content == "png":
        content = b"\x89PNG\r\n\x1a\n" + bytes(22)
    path = tmp_path / "tiny.mcap"
    path.write_bytes(content)
    assert len(content) == 30
    assert main(["log", "summarize", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: not a readable MCAP deploy log") and len(err.splitlines()) == 1, err


def test_an_existing_log_is_never_replaced_unless_asked(tmp_path) -> None:
    path = tmp_path / "run.mcap"
    path.write_bytes(b"yesterday's run")
    with pytest.raises(LogExistsError, match=rf"{path}: a file is already there"):
        DeployLogWriter(path)
    assert path.read_bytes() == b"yesterday's run"
    with DeployLogWriter(path, overwrite=True) as log:
        log.log_state(_state(0))
    assert [r.data["tick"] for r in read_log(path)] == [0]


def test_a_log_cut_before_its_first_chunk_is_not_an_empty_clean_run(tmp_path, capsys) -> None:
    """The old symptom: a cut log summarized as an empty 0-second run with exit 0."""
    path = tmp_path / "run.mcap"
    with DeployLogWriter(path) as log:
        for k in range(100):
            log.log_state(_state(k))
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(path.read_bytes()[:100])  # the header, then the first chunk cut off
    assert log_summarize(str(cut)) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"warning: {cut}: truncated: the file ends mid-record after byte ")
    assert "recovered 0 records" in err


def test_traced_ticks_are_logged_and_the_slowest_explained(tmp_path, capsys) -> None:
    """The loop's tick trace goes into each timing record; the summary names the slowest ticks and why."""
    from robot_rl.core.tick_trace import PHASES, TickTrace

    path = tmp_path / "run.mcap"
    trace = TickTrace()
    with DeployLogWriter(path) as log:
        for k in range(40):
            wake = time.perf_counter()
            trace.begin(wake, wake)
            for phase in PHASES:
                if k == 25 and phase == "write":
                    time.sleep(0.03)  # a write that blocks
                trace.mark()
            log.log_timing(k, 0.0, time.perf_counter() - wake, t=wake, trace=trace.row())
        log.log_timing(40, 0.0, 1e-4)  # an untraced record (a loop without a trace) still reads
    timing = [r.data for r in read_log(path, (TIMING,))]
    assert len(timing) == 41 and "trace" not in timing[-1]
    assert len(timing[3]["trace"]["phases_s"]) == len(PHASES) and len(timing[3]["trace"]["work"]) == 6
    assert timing[25]["trace"]["phases_s"][PHASES.index("write")] >= 0.03
    slowest = summarize_log(path)["timing"]["slowest_ticks"]
    assert slowest[0]["tick"] == 25 and slowest[0]["cause"] == "write: blocked"
    assert slowest[0]["past_deadline_s"] >= 0.03
    assert log_summarize(str(path)) == 0
    assert "slow tick 25:" in capsys.readouterr().out
