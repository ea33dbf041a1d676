"""What deploy logging costs the control thread: DeployLogWriter's enqueue against writing in the loop.

Per control tick the runtime logs one state, the proposed and the sent command, and the tick's timing.
Both variants log the same records, interleaved in blocks in one process:

- ``queued``  ``DeployLogWriter.log_*``: copy the arrays, append to a deque; a writer thread encodes JSON
              and writes the MCAP file.
- ``inline``  the baseline: encode the same JSON and call ``mcap.Writer.add_message`` in the loop (what
              logging without a writer thread costs; chunk compression lands on whichever tick fills a chunk).

The loop runs at ``rate_hz`` on fixed deadlines (sleep only, so the writer thread can run between ticks).
Times are per tick (all four records), in µs.

    .venv/bin/python benchmarks/bench_deploy_log.py --ticks 5000 --rounds 3

``--sigkill-trials N``: what a crash costs instead. A child process logs a deploy loop's records at
``rate_hz`` into a DeployLogWriter and is SIGKILLed after ``run_s`` (+ 0.9 s per trial); the parent
counts the records the child had queued (shared memory, updated every tick) against those the file gives
back. Two writers: the flushing one (``flush_s`` 0.5, the default) and the old behaviour (chunks written
only when 1 MiB full).
Results: benchmarks/results/RESULTS_deploy_log.md.

    .venv/bin/python benchmarks/bench_deploy_log.py --sigkill-trials 5
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro
from mcap.writer import Writer

from robot_rl.core.loop_timing import RateLoop
from robot_rl.core.types import JointCommand, RobotState
from robot_rl.data.mcap_log import SCHEMAS, DeployLogWriter
from robot_rl.data.mcap_log_reader import read_log, summarize_log

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Args:
    ticks: int = 5000  # per block
    rounds: int = 3
    rate_hz: float = 500.0
    joints: int = 12
    sigkill_trials: int = 0  # > 0: measure records lost on SIGKILL instead of the per-tick cost
    run_s: float = 4.0  # how long the child logs before the first kill (each trial 0.9 s longer)


def _records(n: int, k: int) -> tuple[RobotState, JointCommand, JointCommand]:
    state = RobotState(timestamp=time.monotonic(), tick=k, q=np.full(n, 0.1), dq=np.zeros(n), tau=np.zeros(n))
    proposed = JointCommand.hold(np.full(n, 0.2), np.full(n, 20.0), np.full(n, 0.5))
    return state, proposed, proposed.copy()


def run_queued(path: Path, args: Args) -> np.ndarray:
    times = np.zeros(args.ticks)
    log = DeployLogWriter(path)
    loop = RateLoop(1.0 / args.rate_hz, spin_s=0.0)
    for k, tick in zip(range(args.ticks), loop, strict=False):
        state, proposed, sent = _records(args.joints, k)
        start = time.perf_counter()
        log.log_state(state)
        log.log_command(proposed, sent=False)
        log.log_command(sent, sent=True)
        log.log_timing(k, tick.lateness, 1e-4, tick.missed)
        times[k] = time.perf_counter() - start
    log.close()
    if log.dropped:
        print(f"  (queued: {log.dropped} records dropped)")
    return times


def run_inline(path: Path, args: Args) -> np.ndarray:
    times = np.zeros(args.ticks)
    with path.open("wb") as stream:
        writer = Writer(stream)
        writer.start()
        channels = {}
        for topic, schema in SCHEMAS.items():
            sid = writer.register_schema(name=schema["title"], encoding="jsonschema", data=json.dumps(schema).encode())
            channels[topic] = writer.register_channel(topic=topic, message_encoding="json", schema_id=sid)

        def put(topic: str, message: dict) -> None:
            now = time.time_ns()
            writer.add_message(channel_id=channels[topic], log_time=now, publish_time=now,
                               data=json.dumps(message, separators=(",", ":")).encode())

        loop = RateLoop(1.0 / args.rate_hz, spin_s=0.0)
        for k, tick in zip(range(args.ticks), loop, strict=False):
            state, proposed, sent = _records(args.joints, k)
            start = time.perf_counter()
            put("/robot/state", {"t": state.timestamp, "tick": k, "q": state.q.tolist(), "dq": state.dq.tolist(),
                                 "tau": state.tau.tolist(), "base_quat": state.base_quat.tolist(),
                                 "base_ang_vel": state.base_ang_vel.tolist(),
                                 "base_lin_acc": state.base_lin_acc.tolist(), "base_lin_vel": None, "base_pos": None})
            for topic, command in (("/robot/command_proposed", proposed), ("/robot/command_sent", sent)):
                put(topic, {"t": time.monotonic(), "q_target": command.q_target.tolist(),
                            "dq_target": command.dq_target.tolist(), "kp": command.kp.tolist(),
                            "kd": command.kd.tolist(), "tau_ff": command.tau_ff.tolist()})
            put("/loop/timing", {"t": time.monotonic(), "tick": k, "lateness_s": tick.lateness, "work_s": 1e-4,
                                 "missed": tick.missed})
            times[k] = time.perf_counter() - start
        writer.finish()
    return times


CHILD = r"""
import mmap, struct, sys, time
import numpy as np
from robot_rl.core.types import JointCommand, RobotState
from robot_rl.data.mcap_log import DeployLogWriter

path, counter = sys.argv[1], sys.argv[2]
rate, flush_s, n = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
counter_file = open(counter, "r+b")
shared = mmap.mmap(counter_file.fileno(), 16)
log = DeployLogWriter(path, flush_s=flush_s)
command = JointCommand.hold(np.full(n, 0.2), np.full(n, 20.0), np.full(n, 0.5))
start, k = time.monotonic(), 0
print("ready", flush=True)
while True:
    delay = start + k / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    state = RobotState(timestamp=time.monotonic(), tick=k, q=np.full(n, 0.1), dq=np.zeros(n), tau=np.zeros(n))
    log.log_state(state)
    log.log_command(command, sent=False)
    log.log_command(command, sent=True)
    log.log_timing(k, 0.0, 1e-4)
    k += 1
    struct.pack_into("<qq", shared, 0, log.enqueued, time.time_ns())
"""


def sigkill_trial(tmp: Path, args: Args, flush_s: float, name: str, run_s: float) -> tuple[int, int, float]:
    """(records queued at the kill, records recovered, seconds between the last queued and last recovered)."""
    path, counter = tmp / f"{name}.mcap", tmp / f"{name}.counter"
    counter.write_bytes(bytes(16))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(counter), str(args.rate_hz), str(flush_s),
                              str(args.joints)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(run_s)
        queued, last_queued_ns = struct.unpack("<qq", counter.read_bytes())
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    recovered = summarize_log(path)["records"]
    last = max((r.log_time_ns for r in read_log(path)), default=None)
    lost_s = run_s if last is None else (last_queued_ns - last) * 1e-9
    return queued, recovered, lost_s


def main_sigkill(args: Args) -> None:
    rows: dict[str, list[tuple[int, int, float]]] = {"flush every 0.5 s": [], "1 MiB chunks only (before)": []}
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(args.sigkill_trials):
            for variant, flush_s in (("flush every 0.5 s", 0.5), ("1 MiB chunks only (before)", 1e9)):
                run_s = args.run_s + 0.9 * trial  # kills land at different points of a chunk
                queued, recovered, lost_s = sigkill_trial(Path(tmp), args, flush_s, f"{trial}-{flush_s:g}", run_s)
                rows[variant].append((queued, recovered, lost_s))
                print(f"kill at {run_s:.1f} s {variant:>26}: queued {queued}, recovered {recovered}, "
                      f"lost {queued - recovered} records = {lost_s:.2f} s", flush=True)
    print(f"\nSIGKILL after {args.run_s:g} s + 0.9 s × trial at {args.rate_hz:g} Hz (4 records per tick), "
          f"{args.sigkill_trials} trials:")
    for variant, r in rows.items():
        lost = [q - k for q, k, _ in r]
        print(f"  {variant:>26}: records lost median {statistics.median(lost):.0f} (max {max(lost)}), "
              f"seconds lost median {statistics.median(x[2] for x in r):.2f} (max {max(x[2] for x in r):.2f})")


def main(args: Args) -> None:
    if args.sigkill_trials:
        main_sigkill(args)
        return
    results: dict[str, list[tuple[float, float, float]]] = {"queued": [], "inline": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ("queued", "inline") if r % 2 == 0 else ("inline", "queued")
            for variant in order:
                run = run_queued if variant == "queued" else run_inline
                t = 1e6 * run(Path(tmp) / f"{variant}{r}.mcap", args)
                p50, p99, peak = float(np.percentile(t, 50)), float(np.percentile(t, 99)), float(t.max())
                results[variant].append((p50, p99, peak))
                print(f"round {r} {variant:>6}: p50 {p50:.1f} µs  p99 {p99:.1f} µs  max {peak:.0f} µs per tick",
                      flush=True)
    med = {v: [statistics.median(x[i] for x in rows) for i in range(3)] for v, rows in results.items()}
    print(f"\nmedian over {args.rounds} blocks of {args.ticks} ticks at {args.rate_hz:g} Hz (4 records per tick):")
    for v, (p50, p99, peak) in med.items():
        print(f"  {v:>6}: p50 {p50:.1f} µs  p99 {p99:.1f} µs  max {peak:.0f} µs")
    print(f"  ratio queued/inline: p50 {med['queued'][0] / med['inline'][0]:.2f}  "
          f"p99 {med['queued'][1] / med['inline'][1]:.2f}  max {med['queued'][2] / med['inline'][2]:.2f}")


if __name__ == "__main__":
    main(tyro.cli(Args))
