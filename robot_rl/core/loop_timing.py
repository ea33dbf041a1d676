"""Fixed-rate control loop: absolute deadlines, sleep-then-spin waits, overrun skipping, timing stats.

Why each piece exists (the loop's timings: benchmarks/results/RESULTS_loop_timing.md):

- Deadlines are absolute, ``first_deadline + k·period``. A loop that does ``work(); sleep(period)`` runs
  slow by the work time plus the sleep overshoot every tick, so it drifts off the rate grid and loses a
  tick every few seconds.
- ``time.sleep`` alone wakes late by the kernel's timer slack and scheduling (≈ 150 µs at p50). Sleeping until
  ``deadline − spin_s`` and busy-reading the clock for the rest brings p50 lateness under 1 µs for the cost
  of ``spin_s`` of CPU per period (250 µs per 20 ms is ≈ 1 % of a core).
- An overrun (work finishing after the next deadline) counts each deadline that passed and waits for the
  next one still in the future. Running the skipped ticks back-to-back to "catch up" would send the robot
  a burst of commands computed from nearly the same state, which is worse than a dropped tick.
- One full garbage collection over a torch-sized heap takes tens of milliseconds: several missed ticks at
  50 Hz and dozens at 500–1000 Hz. :func:`gc_paused` collects once before the loop, freezes what
  survives (so later collections never walk it) and disables the collector until the loop ends.
- Under CPU load, spinning without real-time priority degrades badly; SCHED_FIFO restores it.
  :func:`realtime_scheduling` asks for it and reports whether it was granted instead of failing.
- Other Python threads of the process (a log writer, a DDS re-publish thread) hold the GIL when the loop
  wakes; Python makes a waiting thread wait its switch interval (5 ms) before the holder must let go.
  :func:`realtime_context` lowers it to :data:`REALTIME_SWITCH_INTERVAL_S` for the loop.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Collection, Iterator
from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_SPIN_S = 250e-6
# While a loop runs: how long the loop's thread, wanting the GIL back (after its sleep, or a call that
# released it), waits before it makes the thread holding it let go. Python's default is 5 ms, and a
# deploy's log writer or DDS re-publish thread is often running Python when the loop wakes: wakes up to
# ≈ 6 ms late in the deploy soak ("wake: blocked" in the tick trace), 5.4 ms at p50 in
# benchmarks/results/RESULTS_deploy_soak.md's GIL measurement against 1.0 ms at 0.5 ms.
REALTIME_SWITCH_INTERVAL_S = 0.5e-3
DEFAULT_STATS_CAPACITY = 1 << 16  # ≈ 22 min of history at 50 Hz, 2 min at 500 Hz
_PERCENTILES = (50.0, 99.0, 99.9)


class _Ring:
    """Preallocated float64 ring buffer; appending is an index store, no allocation."""

    def __init__(self, capacity: int) -> None:
        self._data = np.zeros(capacity, dtype=np.float64)
        self._count = 0

    def append(self, value: float) -> None:
        self._data[self._count % self._data.shape[0]] = value
        self._count += 1

    def values(self) -> np.ndarray:
        """The retained samples (the newest ``capacity``), in storage order — percentiles ignore order."""
        return self._data[: min(self._count, self._data.shape[0])]


def _distribution(values: np.ndarray, all_time_max: float | None) -> dict[str, float | None]:
    if values.size == 0:
        return {"p50": None, "p99": None, "p99.9": None, "max": None, "mean": None}
    p50, p99, p999 = np.percentile(values, _PERCENTILES)
    peak = float(values.max()) if all_time_max is None else all_time_max
    return {"p50": float(p50), "p99": float(p99), "p99.9": float(p999), "max": peak, "mean": float(values.mean())}


class LoopStats:
    """Per-tick timing of a fixed-rate loop.

    Recording is a few scalar updates and ring-buffer stores per tick; percentiles are computed only when
    :meth:`summary` is called. Percentiles cover the newest ``capacity`` ticks; counts and maxima cover
    the whole run.
    """

    def __init__(self, period_s: float, capacity: int = DEFAULT_STATS_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"LoopStats capacity must be >= 1, got {capacity!r}")
        self.period_s = period_s
        self._lateness = _Ring(capacity)
        self._period = _Ring(capacity)
        self._work = _Ring(capacity)
        self.ticks = 0  # ticks served
        self.missed_deadlines = 0  # deadlines skipped because work (or a late wake) ran past them
        self.overrun_ticks = 0  # ticks that were preceded by at least one missed deadline
        self.consecutive_overruns = 0  # current streak of such ticks; the runtime faults on a long one
        self.max_consecutive_overruns = 0
        self.last_lateness_s = math.nan
        self.max_lateness_s = -math.inf
        self.max_work_s = -math.inf
        self._min_period_s = math.inf
        self._max_period_s = -math.inf

    def record_tick(self, lateness_s: float, period_s: float | None, missed: int) -> None:
        self.ticks += 1
        self.last_lateness_s = lateness_s
        self._lateness.append(lateness_s)
        if lateness_s > self.max_lateness_s:
            self.max_lateness_s = lateness_s
        if period_s is not None:
            self._period.append(period_s)
            self._min_period_s = min(self._min_period_s, period_s)
            self._max_period_s = max(self._max_period_s, period_s)
        if missed:
            self.missed_deadlines += missed
            self.overrun_ticks += 1
            self.consecutive_overruns += 1
            self.max_consecutive_overruns = max(self.max_consecutive_overruns, self.consecutive_overruns)
        else:
            self.consecutive_overruns = 0

    def record_work(self, work_s: float) -> None:
        self._work.append(work_s)
        if work_s > self.max_work_s:
            self.max_work_s = work_s

    def summary(self) -> dict:
        """Counts and p50/p99/p99.9/max/mean of lateness, wake-to-wake period, jitter and work, in seconds.

        A distribution's ``max`` is over the whole run, its other fields over the newest ``capacity``
        ticks. Empty distributions report ``None`` (JSON-safe) rather than NaN.
        """
        periods = self._period.values()
        seen_period = periods.size > 0
        jitter_max = max(self._max_period_s - self.period_s, self.period_s - self._min_period_s)
        return {
            "period_nominal_s": self.period_s,
            "ticks": self.ticks,
            "missed_deadlines": self.missed_deadlines,
            "overrun_ticks": self.overrun_ticks,
            "max_consecutive_overruns": self.max_consecutive_overruns,
            "window_ticks": int(self._lateness.values().size),
            "lateness_s": _distribution(self._lateness.values(), self.max_lateness_s if self.ticks else None),
            "period_s": _distribution(periods, self._max_period_s if seen_period else None),
            "period_jitter_s": _distribution(np.abs(periods - self.period_s), jitter_max if seen_period else None),
            "work_s": _distribution(self._work.values(), self.max_work_s if self._work.values().size else None),
        }


@dataclass(frozen=True, slots=True)
class Tick:
    index: int  # deadline index k: deadline = first_deadline + k·period
    deadline: float  # clock seconds
    wake: float  # clock seconds when the wait returned
    lateness: float  # wake − deadline, seconds (≥ 0 with a monotonic clock)
    missed: int  # deadlines skipped just before this tick (0 on time)


class RateLoop:
    """A loop that wakes at fixed absolute deadlines.

    ``clock`` returns seconds from a monotonic source and ``sleep`` blocks for a number of seconds; tests
    inject a fake pair. Use either ``for tick in loop:`` (starts on first iteration, runs until ``break``)
    or ``loop.start()`` then ``loop.wait_next()`` once per iteration.
    """

    def __init__(
        self,
        period_s: float,
        spin_s: float = DEFAULT_SPIN_S,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
        stats_capacity: int = DEFAULT_STATS_CAPACITY,
    ) -> None:
        if not (isinstance(period_s, (int, float)) and math.isfinite(period_s) and period_s > 0):
            raise ValueError(f"RateLoop period_s must be a finite number > 0, got {period_s!r}")
        if not (isinstance(spin_s, (int, float)) and math.isfinite(spin_s) and 0 <= spin_s < period_s):
            raise ValueError(f"RateLoop spin_s must be in [0, period_s={period_s}), got {spin_s!r}")
        self.period_s = float(period_s)
        self.spin_s = float(spin_s)
        self._clock = clock
        self._sleep = sleep
        self.stats = LoopStats(self.period_s, stats_capacity)
        self._first_deadline: float | None = None
        self._next_index = 0
        self._last_wake: float | None = None

    def deadline(self, index: int) -> float:
        """Computed from the origin every time (never accumulated), so rounding cannot drift the grid."""
        if self._first_deadline is None:
            raise RuntimeError("RateLoop.deadline() called before start()")
        return self._first_deadline + index * self.period_s

    def start(self, first_deadline: float | None = None) -> None:
        """Set the grid origin; by default the first deadline is one period from now."""
        self._first_deadline = self._clock() + self.period_s if first_deadline is None else float(first_deadline)
        self._next_index = 0
        self._last_wake = None

    def wait_next(self) -> Tick:
        if self._first_deadline is None:
            self.start()
        now = self._clock()
        if self._last_wake is not None:
            self.stats.record_work(now - self._last_wake)

        index = self._next_index
        missed = 0
        if self.deadline(index) < now:
            # Overrun: every deadline already behind us is missed; aim at the first one not yet passed.
            index = max(index, math.floor((now - self.deadline(0)) / self.period_s))
            while self.deadline(index) < now:  # floor() of a rounded quotient can land one short
                index += 1
            missed = index - self._next_index
        deadline = self.deadline(index)

        sleep_until = deadline - self.spin_s
        if sleep_until > now:
            self._sleep(sleep_until - now)
        wake = self._clock()
        while wake < deadline:
            wake = self._clock()

        lateness = wake - deadline
        period = None if self._last_wake is None else wake - self._last_wake
        self.stats.record_tick(lateness, period, missed)
        self._last_wake = wake
        self._next_index = index + 1
        return Tick(index=index, deadline=deadline, wake=wake, lateness=lateness, missed=missed)

    def __iter__(self) -> Iterator[Tick]:
        if self._first_deadline is None:
            self.start()
        while True:
            yield self.wait_next()

    def realtime(
        self, *, fifo_priority: int | None = None, cpus: Collection[int] | None = None
    ) -> contextlib.AbstractContextManager[RealtimeReport]:
        """Garbage collection paused, plus SCHED_FIFO / CPU affinity when asked; see :func:`realtime_context`."""
        return realtime_context(fifo_priority=fifo_priority, cpus=cpus)


@contextlib.contextmanager
def gc_paused() -> Iterator[int]:
    """Collect, freeze the survivors and disable the collector; restore the previous state on exit.

    Yields the number of objects frozen. While paused, reference cycles created inside the loop are
    never freed, so loop code must not create cycles (plain arrays, dataclasses and dicts don't).

    A collector that is already disabled is left alone: no collection, nothing frozen (yields 0). An
    outer pause around several loops therefore collects once: a deploy's full collection (≈ 20–27 ms for
    its torch/onnxruntime/DDS heap) holds the GIL, and between its run and its damping loop it would
    stall every thread of the process, the 500 Hz DDS re-publish thread included
    (benchmarks/results/RESULTS_deploy_soak.md).
    """
    if not gc.isenabled():
        yield 0
        return
    frozen_before = gc.get_freeze_count()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield gc.get_freeze_count() - frozen_before
    finally:
        # unfreeze() releases every frozen object, not only ours; if someone else had frozen objects first,
        # leave the permanent generation alone rather than undo their freeze.
        if frozen_before == 0:
            gc.unfreeze()
        gc.enable()


@dataclass(frozen=True)
class RealtimeReport:
    gc_frozen_objects: int
    fifo_requested: bool
    fifo_applied: bool
    fifo_detail: str
    affinity_requested: bool
    affinity_applied: bool
    affinity_detail: str

    def as_dict(self) -> dict:
        return asdict(self)


def _try_fifo(priority: int) -> tuple[bool, str, Callable[[], None] | None]:
    if not hasattr(os, "sched_setscheduler"):
        return False, "SCHED_FIFO is not available on this platform", None
    low, high = os.sched_get_priority_min(os.SCHED_FIFO), os.sched_get_priority_max(os.SCHED_FIFO)
    if not (isinstance(priority, int) and low <= priority <= high):
        raise ValueError(f"fifo_priority must be an int in [{low}, {high}], got {priority!r}")
    previous_policy, previous_param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except OSError as error:  # EPERM without CAP_SYS_NICE / RLIMIT_RTPRIO
        return False, f"SCHED_FIFO {priority} refused: {error.strerror}", None

    def restore() -> None:
        try:
            os.sched_setscheduler(0, previous_policy, previous_param)
        except OSError as error:
            warnings.warn(f"could not restore the scheduling policy: {error.strerror}", stacklevel=2)

    return True, f"SCHED_FIFO priority {priority}", restore


@contextlib.contextmanager
def fifo_scheduling(priority: int | None) -> Iterator[str | None]:
    """The calling thread under SCHED_FIFO ``priority`` for the block (``None``: unchanged), restored after.

    Threads and child processes started inside the block inherit the policy, which is the point where a
    whole process must run real-time (its helper threads included). Yields ``None`` when applied or not
    asked for, else why the OS refused (the block runs at normal priority then)."""
    if priority is None:
        yield None
        return
    applied, detail, restore = _try_fifo(priority)
    try:
        yield None if applied else detail
    finally:
        if restore:
            restore()


def _try_affinity(cpus: Collection[int]) -> tuple[bool, str, Callable[[], None] | None]:
    if not hasattr(os, "sched_setaffinity"):
        return False, "CPU affinity is not available on this platform", None
    wanted = sorted(set(cpus))
    previous = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, wanted)
    except (OSError, ValueError, OverflowError) as error:
        return False, f"CPU affinity {wanted} refused: {getattr(error, 'strerror', None) or error}", None

    def restore() -> None:
        try:
            os.sched_setaffinity(0, previous)
        except OSError as error:
            warnings.warn(f"could not restore the CPU affinity: {error.strerror}", stacklevel=2)

    return True, f"CPUs {wanted}", restore


@contextlib.contextmanager
def realtime_context(
    *, fifo_priority: int | None = None, cpus: Collection[int] | None = None
) -> Iterator[RealtimeReport]:
    """Pause GC, shorten the GIL switch interval and, when asked, run the calling thread under SCHED_FIFO
    and/or pinned to ``cpus``.

    Scheduling requests that the OS refuses are reported in the yielded :class:`RealtimeReport`, never
    raised; an out-of-range priority is a caller error and raises ``ValueError``. On Linux both settings
    apply to the calling thread only, and the kernel's RT throttling (95 % of each second by default)
    keeps a runaway FIFO loop from locking the machine.
    """
    restores: list[Callable[[], None]] = []
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(min(switch_interval, REALTIME_SWITCH_INTERVAL_S))
    restores.append(lambda: sys.setswitchinterval(switch_interval))
    fifo_applied, fifo_detail = False, "not requested"
    affinity_applied, affinity_detail = False, "not requested"
    try:
        if fifo_priority is not None:
            fifo_applied, fifo_detail, restore = _try_fifo(fifo_priority)
            if restore:
                restores.append(restore)
        if cpus is not None:
            affinity_applied, affinity_detail, restore = _try_affinity(cpus)
            if restore:
                restores.append(restore)
        with gc_paused() as frozen:
            yield RealtimeReport(
                gc_frozen_objects=frozen,
                fifo_requested=fifo_priority is not None,
                fifo_applied=fifo_applied,
                fifo_detail=fifo_detail,
                affinity_requested=cpus is not None,
                affinity_applied=affinity_applied,
                affinity_detail=affinity_detail,
            )
    finally:
        for restore in reversed(restores):
            restore()
