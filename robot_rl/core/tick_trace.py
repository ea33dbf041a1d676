"""Where a control tick's time went: per-phase wall times, and the kernel's account of the loop's thread.

A missed deadline says *that* a tick was late, not why. :class:`TickTrace` stamps ``time.perf_counter()``
at each phase boundary of a tick (wake → read → step → write → record) and reads, at the wake and at the end
of the tick, the loop thread's own counters from the kernel:

- ``time.thread_time()``: CPU time of this thread; ``/proc/thread-self/schedstat``: time it spent
  runnable but waiting for a CPU (the run queue);
- ``getrusage(RUSAGE_THREAD)``: voluntary context switches (the thread blocked: a lock, the GIL held by
  another thread of the process, I/O), involuntary ones (it was preempted), and page faults.

With those, a slow interval (the work from wake to end, or the wait from the previous end to the wake)
is split into CPU time, run-queue time and the rest ("off CPU"), and :func:`attribute` names the cause:

- ``cpu``: the loop's own thread computed (its code, page faults, a garbage collection);
- ``runqueue``: it was ready but other threads held every CPU (other processes; under SCHED_FIFO only
  threads of equal or higher real-time priority can do that);
- ``blocked``: off CPU after a voluntary switch: it waited for something (another thread of the process
  holding the GIL or a lock, I/O);
- ``vm``: off CPU without a switch: the virtual CPU itself was not running (hypervisor steal) — the kernel
  of a guest cannot see that time, so it shows up as neither CPU nor run queue — or, for a late wake, the
  timer fired late.

Cost: two each of ``thread_time()``, ``pread`` of a proc file and ``getrusage`` per tick (≈ 6 µs together
on an idle core, 10–15 µs on a loaded one) and stores into preallocated arrays; nothing grows with the run.
Each ``pread`` releases the GIL for a moment, so another thread of the process can take it; getting it
back waits at most the loop's switch interval (``robot_rl.core.loop_timing.REALTIME_SWITCH_INTERVAL_S``).
On a system without those files (not Linux) the run-queue column is NaN.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

try:
    import resource

    _RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)
except ImportError:  # pragma: no cover - not on Linux
    resource, _RUSAGE_THREAD = None, None

PHASES = ("read", "step", "write", "record")  # record: the run's arrays and the log queue
# Raw columns of one tick: wall stamps, then the kernel counters at the wake and at the end.
_DEADLINE, _WAKE = 0, 1  # then one stamp per phase end: 2 .. 2 + len(PHASES) - 1
_END = 1 + len(PHASES)  # the last phase's end is the end of the tick
_COUNTERS = ("cpu_s", "runq_s", "vcsw", "ivcsw", "faults")
_AT_WAKE = _END + 1
_AT_END = _AT_WAKE + len(_COUNTERS)
COLUMNS = _AT_END + len(_COUNTERS)
ROW_SIZE = COLUMNS + 1 + len(_COUNTERS)  # and the previous tick's end: wall stamp and counters
DEFAULT_KEEP = 8


@dataclass(frozen=True, slots=True)
class Interval:
    """One stretch of a tick (the work, or the wait before it), as the kernel accounted the loop's thread."""

    wall_s: float
    cpu_s: float
    runq_s: float
    vcsw: int  # voluntary context switches
    ivcsw: int  # involuntary context switches (preempted)
    faults: int  # page faults, minor and major

    @property
    def off_cpu_s(self) -> float:
        """Neither on a CPU nor waiting for one: blocked, or the VM's virtual CPU was not running."""
        return max(0.0, self.wall_s - self.cpu_s - self.runq_s)


def attribute(interval: Interval, expected_vcsw: int = 0) -> str:
    """The main cause of ``interval``'s wall time: ``cpu``, ``runqueue``, ``blocked`` or ``vm`` (see the
    module docstring); ``unknown`` without kernel counters. ``expected_vcsw``: voluntary switches the
    interval makes by design (a wait's sleep is one), not counted as blocking."""
    if math.isnan(interval.cpu_s) or math.isnan(interval.runq_s):
        return "unknown"
    off = interval.off_cpu_s
    largest = max(interval.cpu_s, interval.runq_s, off)
    if largest == interval.cpu_s:
        return "cpu"
    if largest == interval.runq_s:
        return "runqueue"
    return "blocked" if interval.vcsw > expected_vcsw else "vm"


class _ThreadCounters:
    """The calling thread's kernel counters, read without allocating more than the syscall results."""

    def __init__(self) -> None:
        self._fd: int | None = None
        try:  # /proc/thread-self is the thread that opens it: open from the loop's own thread
            self._fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = None

    def read_into(self, row: np.ndarray, at: int) -> None:
        # CPU time from the clock, not schedstat: the kernel updates a running thread's schedstat CPU time
        # only at scheduler events (it can be milliseconds behind); its run-queue time changes only when the
        # thread is switched in, so it is exact for the thread reading it.
        row[at] = time.thread_time()
        row[at + 1] = int(os.pread(self._fd, 96, 0).split()[1]) * 1e-9 if self._fd is not None else math.nan
        if _RUSAGE_THREAD is not None:
            usage = resource.getrusage(_RUSAGE_THREAD)
            row[at + 2] = usage.ru_nvcsw
            row[at + 3] = usage.ru_nivcsw
            row[at + 4] = usage.ru_minflt + usage.ru_majflt
        else:
            row[at + 2] = row[at + 3] = row[at + 4] = math.nan

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class TickTrace:
    """Phase stamps and kernel counters of the current tick of one loop, and the slowest ticks so far.

    Call from the loop's own thread: :meth:`begin` right after the wake, :meth:`mark` at the end of each
    phase in :data:`PHASES` order (the last one ends the tick and reads the counters again). :meth:`row`
    is the tick just finished (raw numbers, for a log; :func:`decode` reads them). The ``keep`` ticks that
    ended furthest past their deadline are kept in a preallocated table (:meth:`slowest`): a long run's
    worst moments, without keeping the run.
    """

    def __init__(self, keep: int = DEFAULT_KEEP) -> None:
        if keep < 1:
            raise ValueError(f"TickTrace keep must be >= 1, got {keep!r}")
        self._row = np.full(ROW_SIZE, np.nan)  # this tick's columns, then the previous tick's end
        self._worst = np.full((keep, ROW_SIZE), np.nan)
        self._worst_key = np.full(keep, -np.inf)  # end − deadline of each kept tick
        self._counters: _ThreadCounters | None = None
        self._count = 0
        self._phase = 0

    def begin(self, deadline: float, wake: float) -> None:
        if self._counters is None:  # opened on the first tick: the loop's thread, not the constructor's
            self._counters = _ThreadCounters()
        row = self._row
        row[COLUMNS] = row[_END]  # the previous tick's end (NaN before the first), for the wait interval
        row[COLUMNS + 1:] = row[_AT_END:COLUMNS]
        row[:COLUMNS] = np.nan
        row[_DEADLINE] = deadline
        row[_WAKE] = wake
        self._counters.read_into(row, _AT_WAKE)
        self._phase = 0

    def mark(self) -> None:
        """The current phase ended now; after the last phase, the tick ended."""
        row = self._row
        row[_WAKE + 1 + self._phase] = time.perf_counter()
        self._phase += 1
        if self._phase == len(PHASES):
            self._counters.read_into(row, _AT_END)
            self._count += 1
            key = row[_END] - row[_DEADLINE]
            slot = int(self._worst_key.argmin())
            if key > self._worst_key[slot]:
                self._worst_key[slot] = key
                self._worst[slot] = row

    @property
    def ticks(self) -> int:
        return self._count

    def row(self) -> np.ndarray:
        """A copy of the last finished tick's raw numbers (what :func:`decode` reads)."""
        return self._row.copy()

    def slowest(self) -> list[TickBreakdown]:
        """The kept ticks, slowest first (end of the tick − its deadline)."""
        order = np.argsort(-self._worst_key)
        return [decode(self._worst[i]) for i in order if np.isfinite(self._worst_key[i])]

    def close(self) -> None:
        if self._counters is not None:
            self._counters.close()
            self._counters = None


@dataclass(frozen=True, slots=True)
class TickBreakdown:
    """One tick decoded: its deadline and the wake's lateness, each phase's wall time, the work (wake → end)
    and the wait before it (end of the previous tick → wake; NaN on the first tick)."""

    deadline: float  # the loop's clock (perf_counter)
    lateness_s: float
    phases_s: tuple[float, ...]  # in PHASES order
    work: Interval
    wait: Interval

    @property
    def past_deadline_s(self) -> float:
        """How far past its deadline the tick ended: the wake's lateness plus the work."""
        return self.lateness_s + self.work.wall_s

    @property
    def slowest_phase(self) -> str:
        finite = [x if math.isfinite(x) else -math.inf for x in self.phases_s]
        return PHASES[finite.index(max(finite))] if max(finite) > -math.inf else "-"

    def _late_wake(self) -> bool:
        return math.isfinite(self.lateness_s) and self.lateness_s > self.work.wall_s

    def cause(self) -> str:
        """Where the slow part of this tick went: ``"<phase>: <cause>"`` when the work dominated, else
        ``"wake: <cause>"``. A wake is late by ``lateness_s``; the wait before it is mostly the sleep (off
        CPU and one voluntary switch by design), so its cause is ``runqueue`` when the run-queue time covers
        half the lateness or more, ``blocked`` with a second voluntary switch (the GIL or a lock taken
        after the sleep), else ``vm`` (nothing the guest kernel saw: steal, or a timer that fired late)."""
        if not self._late_wake():
            return f"{self.slowest_phase}: {attribute(self.work)}"
        if math.isnan(self.wait.runq_s):
            return "wake: unknown"
        if self.wait.runq_s >= 0.5 * self.lateness_s:
            return "wake: runqueue"
        return "wake: blocked" if self.wait.vcsw > 1 else "wake: vm"

    def as_dict(self) -> dict:
        """JSON-ready (NaN as None): ``phases_s``, ``work`` and ``wait`` as ``[wall, cpu, runq, vcsw, ivcsw,
        faults]``; :meth:`from_dict` reads it back."""
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        def interval(i: Interval) -> list:
            return [num(i.wall_s), num(i.cpu_s), num(i.runq_s), i.vcsw, i.ivcsw, i.faults]

        return {"lateness_s": num(self.lateness_s), "phases_s": [num(x) for x in self.phases_s],
                "work": interval(self.work), "wait": interval(self.wait)}

    @classmethod
    def from_dict(cls, d: dict, deadline: float = math.nan) -> TickBreakdown:
        def num(x: float | None) -> float:
            return math.nan if x is None else float(x)

        def interval(v: list) -> Interval:
            return Interval(num(v[0]), num(v[1]), num(v[2]), int(v[3]), int(v[4]), int(v[5]))

        return cls(deadline, num(d["lateness_s"]), tuple(num(x) for x in d["phases_s"]), interval(d["work"]),
                   interval(d["wait"]))

    def describe(self) -> str:
        """One line for a person: how late, which phase, and the kernel's account of the slow part."""
        phases = ", ".join(f"{name} {1e3 * x:.2f}" for name, x in zip(PHASES, self.phases_s, strict=True)
                           if math.isfinite(x))
        w = self.wait if self._late_wake() else self.work
        split = (f"wait before the wake: run queue {1e3 * w.runq_s:.2f} ms, switches {w.vcsw} voluntary / "
                 f"{w.ivcsw} involuntary" if self._late_wake() else
                 f"work: cpu {1e3 * w.cpu_s:.2f} ms, run queue {1e3 * w.runq_s:.2f} ms, off cpu "
                 f"{1e3 * w.off_cpu_s:.2f} ms, switches {w.vcsw} voluntary / {w.ivcsw} involuntary, {w.faults} "
                 "page faults")
        return (f"{1e3 * self.past_deadline_s:.2f} ms past its deadline (wake {1e3 * self.lateness_s:.2f} ms late; "
                f"{phases} ms) → {self.cause()} ({split})")


def _interval(start: np.ndarray, end: np.ndarray) -> Interval:
    d = end - start  # wall, cpu, runq, vcsw, ivcsw, faults

    def count(x: float) -> int:
        return int(x) if math.isfinite(x) else 0

    return Interval(float(d[0]), float(d[1]), float(d[2]), count(d[3]), count(d[4]), count(d[5]))


def decode(raw: np.ndarray) -> TickBreakdown:
    """A :meth:`TickTrace.row` as a :class:`TickBreakdown`."""
    raw = np.asarray(raw, dtype=np.float64)
    stamps = raw[_WAKE:_END + 1]
    wake = np.concatenate(([raw[_WAKE]], raw[_AT_WAKE:_AT_END]))
    end = np.concatenate(([raw[_END]], raw[_AT_END:COLUMNS]))
    return TickBreakdown(deadline=float(raw[_DEADLINE]), lateness_s=float(raw[_WAKE] - raw[_DEADLINE]),
                         phases_s=tuple(float(x) for x in np.diff(stamps)),
                         work=_interval(wake, end), wait=_interval(raw[COLUMNS:], wake))
