"""Soak test: deploy after deploy against the sim bridge for N minutes, with random faults injected.

The set-up of ``bench_deploy_faults.py`` (A1 sim bridge over DDS on loopback, ``robot-rl deploy --interface
unitree-dds`` with the shipped A1 policy and its supervisor, SCHED_FIFO inherited from this process), run as
a sequence of segments: each deploy runs for a random 20–60 s with ``--log`` on, and one fault, drawn at
random, is injected at a random moment once the policy walks (or none):

- on the controller: SIGTERM, SIGKILL (the supervisor takes over), a hang (SIGSTOP; the supervisor);
- on the robot: a bridge restart (killed and restarted mid-walk);
- on the link: the state direction down (SIGUSR2 to the bridge), both directions down for 0.5 s (SIGUSR1);
- bridge flags, for the whole segment (a bridge started with them): LowState drops (``--drop 0.2``), a
  20 ms LowState delay (``--delay-ms 20``), LowCmd CRC corruption (``--corrupt-command 0.1``: the bridge
  rejects 10 % of commands, as the firmware would), and a sensor freeze at a random time
  (``--freeze-at-s``: LowState keeps coming with the same tick).

After each segment its log is read (``robot_rl.data.mcap_log_reader``): loop missed deadlines outside and inside
the fault window (from the fault to the end; for the whole-segment bridge flags, the whole segment), lost
records (the writer's ``dropped_records`` counter, and gaps in the loop's tick sequence), and, for the
faults that must end in damping, the time from the fault to the bridge tick that first applied damping
(``damping_since_monotonic_s`` in the bridge's status side channel). Every 2 s the RSS of the deploy, its
supervisor and the bridge is read from /proc.

Every tick that ran past the next deadline outside a fault window is listed with its tick trace from the
log (``robot_rl.core.tick_trace``: which phase took the time, and whether the loop's thread computed, waited
for a CPU, was blocked, or was not running at all). ``--keep-logs DIR`` (a new directory) keeps the logs.

Goal: 0 missed deadlines outside injected faults, 0 lost records, flat memory.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_deploy_soak.py --minutes 30 --keep-logs /tmp/soak_logs \\
        --markdown-out benchmarks/results/RESULTS_deploy_soak.md
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_deploy_faults as faults_bench

from robot_rl.core.tick_trace import TickBreakdown
from robot_rl.data.mcap_log import TIMING
from robot_rl.data.mcap_log_reader import read_log, summarize_log
from robot_rl.dds import close_domain

Bench, Row, STALE_S, LINK_DOWN_S = faults_bench.Bench, faults_bench.Row, faults_bench.STALE_S, faults_bench.LINK_DOWN_S
RAMP_S = faults_bench.SPEC.safety.ramp_duration_s
PERIOD_S = 1.0 / 50

# fault → bridge flags for the whole segment (a bridge started with them), or None: the plain bridge
BRIDGE_FLAGS = {"drop 20 %": ["--drop", "0.2"], "delay 20 ms": ["--delay-ms", "20"],
                "LowCmd CRC corrupt 10 %": ["--corrupt-command", "0.1"], "sensor freeze": None}
FAULTS = ("none", "SIGTERM", "SIGKILL", "hang (SIGSTOP)", "bridge restart", "state link down",
          "link down both ways, 0.5 s", *BRIDGE_FLAGS)
WHOLE_SEGMENT = ("drop 20 %", "delay 20 ms", "LowCmd CRC corrupt 10 %")  # the fault window is the segment
MUST_DAMP = ("SIGTERM", "SIGKILL", "hang (SIGSTOP)", "bridge restart", "state link down",
             "link down both ways, 0.5 s", "sensor freeze")


@dataclass
class Segment:
    index: int
    fault: str
    duration_s: float
    start: float = 0.0  # monotonic
    fault_t: float | None = None  # monotonic; whole-segment faults: the start
    window_t: float | None = None  # start of the fault window when not fault_t (bridge restart: the kill)
    damping_s: float | None = None
    after_restore_s: float | None = None  # link down both ways: link back → damping applied
    exit_status: str = ""
    replaced: list[str] = field(default_factory=list)
    ticks: int = 0
    missed_out: int = 0
    missed_in: int = 0
    dropped_records: int | None = None
    tick_gaps: int = 0
    unflushed: int = 0  # killed deploys: loop ticks after the log's last record (the writer never flushed)
    truncated: bool = False
    records: int = 0
    problem: str = ""
    late_ticks: list[str] = field(default_factory=list)  # missed deadlines outside the fault window: why


class RssSampler(threading.Thread):
    """Every ``period_s``, VmRSS of the processes in ``self.watch`` (kind → pid), from /proc."""

    def __init__(self, period_s: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.period_s, self.watch = period_s, {}
        self.samples: dict[tuple[str, int], list[tuple[float, float]]] = {}  # (kind, pid) → [(t, MiB)]
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.period_s):
            for kind, pid in list(self.watch.items()):
                mib = _rss_mib(pid)
                if mib is not None:
                    self.samples.setdefault((kind, pid), []).append((time.monotonic(), mib))


def _rss_mib(pid: int | None) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def analyse_log(seg: Segment, path: Path, killed_at: float | None) -> None:
    try:
        summary = summarize_log(path)
        seg.dropped_records, seg.truncated, seg.records = (summary["dropped_records"], summary["truncated"],
                                                           summary["records"])
        window = 0.0 if seg.fault in WHOLE_SEGMENT else seg.window_t or seg.fault_t
        ticks, last_t = [], None
        for record in read_log(path, (TIMING,)):
            d = record.data
            ticks.append(d["tick"])
            last_t = d["t"]
            if window is not None and d["t"] >= window:
                seg.missed_in += d["missed"]
            else:
                seg.missed_out += d["missed"]
            # the tick that ran past the next deadline (it shows as `missed` on the tick after it), or a late wake
            past = (d["lateness_s"] or 0.0) + (d["work_s"] or 0.0)
            if d.get("trace") and past > PERIOD_S and (window is None or d["t"] < window):
                b = TickBreakdown.from_dict(d["trace"], d["t"])
                seg.late_ticks.append(f"tick {d['tick']}: {b.describe()}")
        seg.ticks = len(ticks)
        if ticks:
            seg.tick_gaps = (max(ticks) - min(ticks) + 1) - len(set(ticks))
        if killed_at is not None and last_t is not None:  # loop ticks the killed writer had not flushed
            seg.unflushed = max(0, round((killed_at - last_t) / PERIOD_S) - 1)
    except Exception as exc:
        seg.problem = f"{type(exc).__name__}: {exc}"


class Soak:
    def __init__(self, bench: Bench, rng: random.Random, logdir: Path, sampler: RssSampler) -> None:
        self.bench, self.rng, self.logdir, self.sampler = bench, rng, logdir, sampler
        self.fresh = False  # the next segment needs a fresh bridge

    def _bridge(self, args: list[str]) -> None:
        """A bridge with these flags (a fresh one when they change)."""
        bridge = self.bench.bridge
        if self.fresh or bridge is None or bridge.proc.poll() is not None or args != self.bench.bridge_args:
            self.fresh = False
            self.bench.bridge_args = args
            self.bench.start_bridge()
        self.sampler.watch["bridge"] = self.bench.bridge.proc.pid

    def segment(self, seg: Segment) -> None:
        bench, rng = self.bench, self.rng
        flags = BRIDGE_FLAGS.get(seg.fault)
        if seg.fault == "sensor freeze":  # bridge time of the freeze: drawn in the walking part of the segment
            freeze_at = 1.0 + rng.uniform(8.0 + RAMP_S, seg.duration_s - 3.0)
            flags = ["--freeze-at-s", f"{freeze_at:.2f}"]
            self.fresh = True  # a fresh bridge: its clock starts now
            self._bridge(flags)
        else:
            self._bridge(flags or [])
        path = self.logdir / f"segment_{seg.index:03d}.mcap"
        row = Row(seg.fault)
        seg.start = time.monotonic()
        try:
            deploy = bench.running_deploy(row, "--log", str(path), "--overwrite", duration_s=seg.duration_s)
        except RuntimeError as exc:  # it never commanded the robot (one that fell over faults on tilt at once)
            deploy = None
            row.replaced.append(str(exc).splitlines()[-1] if str(exc).strip() else "never commanded")
            self.fresh = True
        self.sampler.watch["bridge"] = bench.bridge.proc.pid
        seg.replaced = row.replaced
        if deploy is None:
            seg.exit_status = "no deploy walked"
            return
        self.sampler.watch["deploy"] = deploy.proc.pid
        sup = deploy.supervisor_pid()
        if sup is not None:
            self.sampler.watch["supervisor"] = sup
        walking = time.monotonic()
        seg.start = walking - RAMP_S - 0.5  # about when this deploy's loop started
        end_by = seg.start + seg.duration_s
        killed_at = None
        try:
            if seg.fault == "sensor freeze":
                status = bench.status.latest
                seg.fault_t = status.tick_origin_monotonic_s + freeze_at
                seg.damping_s = self._damped(seg.fault_t, max(5.0, seg.fault_t - time.monotonic() + 5.0))
            elif seg.fault in ("none", *WHOLE_SEGMENT):
                if seg.fault != "none":
                    seg.fault_t = seg.start
            else:
                time.sleep(rng.uniform(0.0, max(0.0, end_by - walking - 4.0)))
                seg.fault_t, killed_at = self._inject(seg.fault, deploy)
                seg.damping_s = self._damped(seg.fault_t, 5.0)
                if seg.fault == "bridge restart":  # the controller is without a robot from the kill on
                    seg.window_t = self.killed_bridge_at
                if seg.fault.startswith("link down both") and seg.damping_s is not None:
                    seg.after_restore_s = seg.fault_t + seg.damping_s - self.restored_at
            if seg.fault in ("SIGKILL", "hang (SIGSTOP)"):
                seg.exit_status = "killed"
                time.sleep(1.0)  # the supervisor holds damping
            else:
                if seg.fault not in ("none", *WHOLE_SEGMENT, "SIGTERM"):
                    deploy.signal(signal.SIGTERM)  # the deploy damps until it is stopped
                try:
                    code = deploy.wait(max(20.0, end_by - time.monotonic() + 20.0))
                    seg.exit_status = str(code)
                except Exception:
                    seg.exit_status = "did not exit"
        finally:
            deploy.end()
            if seg.fault in MUST_DAMP and seg.damping_s is None:
                seg.problem = "never damped; deploy/supervisor said: " + " | ".join(
                    ln.strip() for ln in (deploy.out + deploy.err)[-8:] if ln.strip())
            for kind in ("deploy", "supervisor"):
                self.sampler.watch.pop(kind, None)
            if seg.fault in ("state link down",):
                bench.bridge.proc.send_signal(signal.SIGUSR2)  # the state link back
        analyse_log(seg, path, killed_at)
        # a frozen bridge stays frozen; one whose deploy faulted by itself may hold a fallen robot
        self.fresh = seg.fault == "sensor freeze" or (seg.fault not in MUST_DAMP and seg.exit_status != "0")

    def _inject(self, fault: str, deploy) -> tuple[float, float | None]:
        bench = self.bench
        if fault == "SIGTERM":
            return deploy.signal(signal.SIGTERM), None
        if fault == "SIGKILL":
            t = deploy.signal(signal.SIGKILL)
            return t, t
        if fault == "hang (SIGSTOP)":  # stopped, then killed: its log ends where it stopped
            t = deploy.signal(signal.SIGSTOP)
            return t, t
        if fault == "bridge restart":
            self.killed_bridge_at = time.monotonic()
            bench.bridge.proc.kill()
            bench.bridge.stop()
            restarted = time.monotonic()
            bench.bridge = faults_bench.fixtures.BridgeProcess(bench.domain, [], 3600.0)
            bench.bridge_args = []
            self.sampler.watch["bridge"] = bench.bridge.proc.pid
            first = bench.status.wait_for(lambda s: s.tick_origin_monotonic_s > restarted, 60)
            return first.tick_origin_monotonic_s, None  # timed from the restarted robot's tick 0
        if fault == "state link down":
            t = time.monotonic()
            bench.bridge.proc.send_signal(signal.SIGUSR2)
            return t, None
        t = time.monotonic()  # link down both ways
        bench.bridge.proc.send_signal(signal.SIGUSR1)
        time.sleep(LINK_DOWN_S)
        bench.bridge.proc.send_signal(signal.SIGUSR1)
        self.restored_at = time.monotonic()
        return t, None

    def _damped(self, t: float, timeout_s: float) -> float | None:
        status = self.bench.damped_after(t, timeout_s)
        return None if status is None else status.damping_since_monotonic_s - t


def _fmt(values: list[float], scale: float = 1e3) -> str:
    if not values:
        return "-"
    return f"{scale * statistics.median(values):.0f} / {scale * max(values):.0f}"


def memory_lines(sampler: RssSampler) -> list[str]:
    lines = ["| process | processes | RSS at start MiB (p50) | RSS at end MiB (p50) | growth per process MiB "
             "(p50 / max) | longest-lived: minutes, growth MiB |", "|---|---|---|---|---|---|"]
    for kind in ("deploy", "supervisor", "bridge"):
        runs = [s for (k, _), s in sampler.samples.items() if k == kind and len(s) >= 3]
        if not runs:
            continue
        # start: the first sample 10 s into a process's life (imports and DDS set-up done), where there is one
        starts = [next((m for t, m in s if t - s[0][0] >= 10.0), s[-1][1]) for s in runs]
        ends = [s[-1][1] for s in runs]
        growth = [e - b for b, e in zip(starts, ends, strict=False)]
        longest = max(runs, key=lambda s: s[-1][0] - s[0][0])
        i = runs.index(longest)
        lines.append(f"| {kind} | {len(runs)} | {statistics.median(starts):.0f} | {statistics.median(ends):.0f} | "
                     f"{statistics.median(growth):+.1f} / {max(growth, key=abs):+.1f} | "
                     f"{(longest[-1][0] - longest[0][0]) / 60:.1f}, {growth[i]:+.1f} |")
    return lines


def report(segs: list[Segment], sampler: RssSampler, args, wall_s: float, fifo: int | None) -> str:
    ok = [s for s in segs if s.exit_status != "no deploy walked"]
    missed_out = sum(s.missed_out for s in ok)
    missed_in = sum(s.missed_in for s in ok)
    dropped = sum(s.dropped_records or 0 for s in ok)
    unclosed = sum(s.dropped_records is None for s in ok)
    gaps = sum(s.tick_gaps for s in ok)
    unflushed = sum(s.unflushed for s in ok)
    ticks = sum(s.ticks for s in ok)
    lines = [
        "# Deploy soak: deploy after deploy, with random faults",
        "",
        f"`benchmarks/bench_deploy_soak.py --minutes {args.minutes:g} --seed {args.seed}`: A1 sim bridge + "
        "`robot-rl deploy --interface unitree-dds --log` (shipped policy, supervisor on) over DDS on loopback, "
        f"50 Hz; {platform.node()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
        f"SCHED_FIFO {fifo if fifo else 'off'}; {wall_s / 60:.1f} min, {len(segs)} segments "
        f"({len(ok)} with a walking deploy), {ticks} loop ticks logged.",
        "",
        "Goal: 0 missed deadlines outside injected faults, 0 lost log records, flat memory.",
        "",
        "| figure | result |",
        "|---|---|",
        f"| loop missed deadlines outside fault windows | {missed_out} |",
        f"| loop missed deadlines inside fault windows | {missed_in} |",
        f"| log records dropped by the writer (`dropped_records`) | {dropped}"
        f"{f' ({unclosed} logs without the counter: deploy killed)' if unclosed else ''} |",
        f"| gaps in the logged tick sequence | {gaps} |",
        f"| ticks not in the log of a SIGKILLed deploy (never flushed: the process died) | {unflushed} |",
        "",
        "## Per fault",
        "",
        "| fault | segments | time to damping ms (p50 / max) | never damped | missed outside / inside | "
        "exit statuses | replaced before the fault |",
        "|---|---|---|---|---|---|---|",
    ]
    for fault in FAULTS:
        group = [s for s in segs if s.fault == fault]
        if not group:
            continue
        lat = [s.damping_s for s in group if s.damping_s is not None]
        never = sum(s.damping_s is None for s in group if s.exit_status != "no deploy walked") \
            if fault in MUST_DAMP else "-"
        codes = Counter(s.exit_status for s in group)
        back = [s.after_restore_s for s in group if s.after_restore_s is not None]
        lat_text = _fmt(lat) + (f" (link back → damped: {_fmt(back)})" if back else "")
        lines.append(f"| {fault} | {len(group)} | {lat_text if fault in MUST_DAMP else '-'} | {never} | "
                     f"{sum(s.missed_out for s in group)} / {sum(s.missed_in for s in group)} | "
                     f"{', '.join(f'{c} ×{n}' for c, n in sorted(codes.items()))} | "
                     f"{sum(len(s.replaced) for s in group)} |")
    lines += ["", "## Memory (VmRSS every 2 s from /proc)", "", *memory_lines(sampler)]
    problems = [f"- segment {s.index} ({s.fault}): {s.problem}" for s in segs if s.problem]
    problems += [f"- segment {s.index} ({s.fault}): missed {s.missed_out} deadlines outside the fault window"
                 for s in ok if s.missed_out]
    problems += [f"- segment {s.index} ({s.fault}): {why}" for s in ok for why in s.late_ticks]
    problems += [f"- segment {s.index} ({s.fault}): replaced a deploy that faulted by itself: {why}"
                 for s in segs for why in s.replaced]
    if problems:
        lines += ["", "## Findings per segment", "", *problems]
    lines += [
        "",
        "Fault windows: from the injection to the end of the segment (the deploy damps and is stopped; the bridge "
        "restart: from the kill); for the drop, delay and CRC segments (bridge flags for the whole segment) the "
        "whole segment. Time to damping as "
        "in `RESULTS_deploy_faults.md` (bridge tick that first applied damping − injection; the bridge restart "
        "from the restarted robot's first tick; the sensor freeze from the bridge tick that froze). Segments are "
        "20–60 s; a deploy that faulted by itself before its fault is counted, replaced and not timed. "
        "Exit statuses: 0 completed, 1 fault, 128 + N stopped by signal N, killed: SIGKILL or SIGSTOP + kill. "
        "Each tick that ran past the next deadline outside a fault window is listed with its tick trace "
        "(phase times, and the cause: cpu, runqueue, blocked, vm); how to read it and what earlier runs found: "
        "RESULTS_deploy_soak_stalls.md.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faults", nargs="*", default=list(FAULTS), choices=FAULTS, metavar="FAULT",
                        help="draw from these only")
    parser.add_argument("--fifo-priority", type=int, default=10, help="0: off")
    parser.add_argument("--markdown-out", type=Path)
    parser.add_argument("--keep-logs", type=Path, help="keep every segment's deploy log in this (new) directory")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    fifo = faults_bench.run_under_fifo(args.fifo_priority or None)
    domain = random.SystemRandom().randint(150, 230)
    bench = Bench(domain, fifo)
    sampler = RssSampler()
    sampler.start()
    segs: list[Segment] = []
    t0 = time.monotonic()
    deadline = t0 + 60.0 * args.minutes
    if args.keep_logs is not None and args.keep_logs.exists():  # its logs would be overwritten
        parser.error(f"--keep-logs {args.keep_logs}: already exists; name a new directory")
    if args.keep_logs is not None:
        args.keep_logs.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="soak_") as tmp:
        logdir = args.keep_logs or tmp
        soak = Soak(bench, rng, Path(logdir), sampler)
        try:
            while True:
                left = deadline - time.monotonic()
                if left < 20.0 + 25.0:  # a segment + start-up and teardown no longer fit
                    break
                seg = Segment(len(segs), rng.choice(args.faults), rng.uniform(20.0, min(60.0, left - 25.0)))
                try:
                    soak.segment(seg)
                except Exception as exc:  # one broken segment is a finding; the soak goes on, on a fresh bridge
                    seg.problem = f"segment failed: {type(exc).__name__}: {exc}"
                    seg.exit_status = seg.exit_status or "segment failed"
                    soak.fresh = True
                    for kind in ("deploy", "supervisor"):
                        sampler.watch.pop(kind, None)
                segs.append(seg)
                dmp = "-" if seg.damping_s is None else f"{1e3 * seg.damping_s:.0f} ms"
                print(f"[{(time.monotonic() - t0) / 60:5.1f} min] {seg.index} {seg.fault} ({seg.duration_s:.0f} s):"
                      f" exit {seg.exit_status}, damping {dmp}, ticks {seg.ticks}, missed out/in "
                      f"{seg.missed_out}/{seg.missed_in}, dropped {seg.dropped_records}, gaps {seg.tick_gaps}, "
                      f"unflushed {seg.unflushed} {seg.problem} {'; '.join(seg.replaced)}"
                      + "".join(f"\n    {why}" for why in seg.late_ticks), flush=True)
        finally:
            sampler.done.set()
            if bench.bridge is not None:
                bench.bridge.stop()
            close_domain(domain)
    text = report(segs, sampler, args, time.monotonic() - t0, fifo)
    print(text)
    if args.markdown_out:
        args.markdown_out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
