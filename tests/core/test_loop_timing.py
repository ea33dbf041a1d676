import gc
import itertools
import math
import os
import sys
import time

import numpy as np
import pytest

from robot_rl.core.loop_timing import LoopStats, RateLoop, gc_paused, realtime_context

PERIOD = 0.02
SPIN = 0.00025
READ_STEP = 2.0**-20  # ≈ 1 µs, a binary fraction so sums of clock values stay exact


class FakeClock:
    """Stands in for time.perf_counter + time.sleep: every read advances time by READ_STEP (so the spin
    loop terminates, as a real clock would), sleep() advances by the requested time plus `oversleep`."""

    def __init__(self, start: float = 100.0) -> None:
        self.t = start
        self.sleeps: list[tuple[float, float]] = []  # (called at, duration)
        self.oversleep = 0.0

    def now(self) -> float:
        self.t += READ_STEP
        return self.t

    def sleep(self, duration: float) -> None:
        assert duration > 0
        self.sleeps.append((self.t, duration))
        self.t += duration + self.oversleep

    def work(self, duration: float) -> None:
        self.t += duration


def make_loop(clock: FakeClock, spin_s: float = SPIN) -> RateLoop:
    return RateLoop(PERIOD, spin_s, clock=clock.now, sleep=clock.sleep)


def test_deadlines_are_on_a_fixed_grid_and_work_does_not_shift_them():
    clock = FakeClock()
    loop = make_loop(clock)
    loop.start(first_deadline=101.0)
    for k, work in enumerate([0.001, 0.015, 0.0, 0.019]):
        tick = loop.wait_next()
        assert tick.index == k
        assert tick.deadline == 101.0 + k * PERIOD
        assert tick.missed == 0
        assert 0 <= tick.lateness <= 2 * READ_STEP
        clock.work(work)


def test_wait_sleeps_until_spin_window_then_spins_to_the_deadline():
    clock = FakeClock()
    loop = make_loop(clock)
    loop.start(first_deadline=100.5)
    tick = loop.wait_next()
    (called_at, duration), = clock.sleeps
    assert called_at + duration == pytest.approx(100.5 - SPIN, abs=1e-12)
    assert tick.wake >= tick.deadline  # the spin, not the sleep, reached the deadline


def test_overrun_of_two_and_a_half_periods_counts_two_misses_and_skips_without_burst():
    clock = FakeClock()
    loop = make_loop(clock)
    loop.start(first_deadline=101.0)
    first = loop.wait_next()
    clock.work(2.5 * PERIOD)  # deadlines 1 and 2 pass while working

    after = loop.wait_next()
    assert after.missed == 2
    assert after.index == 3
    assert after.deadline == 101.0 + 3 * PERIOD
    assert after.deadline > first.wake + 2.5 * PERIOD  # the chosen deadline was in the future
    assert 0 <= after.lateness <= 2 * READ_STEP

    following = [loop.wait_next() for _ in range(3)]
    assert [t.index for t in following] == [4, 5, 6]
    assert all(t.missed == 0 for t in following)
    wakes = [after.wake] + [t.wake for t in following]
    assert min(np.diff(wakes)) > PERIOD - 3 * READ_STEP  # one tick per period, never back-to-back

    summary = loop.stats.summary()
    assert summary["missed_deadlines"] == 2
    assert summary["overrun_ticks"] == 1
    assert summary["max_consecutive_overruns"] == 1
    assert summary["ticks"] == 5


def test_overrun_ending_exactly_on_a_deadline_serves_it():
    clock = FakeClock()
    loop = RateLoop(2.0**-6, 0.0, clock=clock.now, sleep=clock.sleep)  # binary fractions: exact arithmetic
    loop.start(first_deadline=101.0)
    loop.wait_next()
    clock.t = loop.deadline(2) - READ_STEP  # the next clock read lands exactly on deadline 2
    tick = loop.wait_next()
    assert (tick.index, tick.missed) == (2, 1)
    assert tick.lateness == READ_STEP  # served at once: only the wake read itself came after the deadline


def test_late_wake_reports_true_lateness_then_counts_the_passed_deadline_as_missed():
    clock = FakeClock()
    loop = make_loop(clock)
    loop.start(first_deadline=101.0)
    loop.wait_next()
    clock.oversleep = 1.5 * PERIOD  # the OS wakes us 1.5 periods late once
    late = loop.wait_next()
    clock.oversleep = 0.0
    assert late.index == 1
    assert late.lateness == pytest.approx(1.5 * PERIOD - SPIN, abs=1e-5)
    assert late.missed == 0
    nxt = loop.wait_next()
    assert (nxt.index, nxt.missed) == (3, 1)
    assert loop.stats.max_lateness_s == pytest.approx(late.lateness)


def test_consecutive_overruns_streak_is_tracked_and_resets():
    clock = FakeClock()
    loop = make_loop(clock)
    loop.start(first_deadline=101.0)
    loop.wait_next()
    for _ in range(3):
        clock.work(1.2 * PERIOD)
        assert loop.wait_next().missed == 1
    assert loop.stats.consecutive_overruns == 3
    loop.wait_next()
    assert loop.stats.consecutive_overruns == 0
    assert loop.stats.max_consecutive_overruns == 3


def test_stats_summary_values_from_fake_clock():
    clock = FakeClock()
    loop = make_loop(clock)
    loop.start(first_deadline=101.0)
    for tick in loop:
        if tick.index == 9:
            break
        clock.work(0.004)
    summary = loop.stats.summary()
    assert summary["ticks"] == 10
    assert summary["period_nominal_s"] == PERIOD
    assert summary["work_s"]["p50"] == pytest.approx(0.004 + READ_STEP, abs=1e-9)
    assert summary["period_s"]["p50"] == pytest.approx(PERIOD, abs=5 * READ_STEP)
    assert summary["period_jitter_s"]["max"] < 5 * READ_STEP
    assert summary["lateness_s"]["max"] < 3 * READ_STEP


def test_stats_ring_keeps_newest_window_but_all_time_max():
    stats = LoopStats(PERIOD, capacity=4)
    for lateness in [9.0, 1.0, 2.0, 3.0, 4.0, 5.0]:
        stats.record_tick(lateness, PERIOD, missed=0)
    summary = stats.summary()
    assert summary["window_ticks"] == 4
    assert summary["lateness_s"]["p50"] == pytest.approx(np.percentile([2.0, 3.0, 4.0, 5.0], 50))
    assert summary["lateness_s"]["max"] == 9.0
    assert summary["ticks"] == 6


def test_empty_stats_summary_is_json_safe():
    summary = LoopStats(PERIOD).summary()
    assert summary["ticks"] == 0
    assert all(v is None for v in summary["lateness_s"].values())
    assert all(v is None for v in summary["work_s"].values())


@pytest.mark.parametrize(
    ("period", "spin", "match"),
    [(0.0, 0.0, "period_s"), (math.nan, 0.0, "period_s"), ("0.02", 0.0, "period_s"), (0.02, 0.02, "spin_s"),
     (0.02, -1e-3, "spin_s")],
)
def test_bad_loop_parameters_are_named(period, spin, match):
    with pytest.raises(ValueError, match=match):
        RateLoop(period, spin)


def test_real_clock_loop_runs_fifty_ticks_at_100_hz():
    loop = RateLoop(0.01)
    ticks = []
    with loop.realtime() as report:
        for tick in loop:
            ticks.append(tick)
            if len(ticks) == 50:
                break
    assert report.gc_frozen_objects > 0
    indices = [t.index for t in ticks]
    for previous, tick in itertools.pairwise(ticks):
        assert tick.index == previous.index + 1 + tick.missed
    assert np.all(np.diff([t.deadline for t in ticks]) > 0)
    assert all(t.wake >= t.deadline for t in ticks)
    # Deadlines stay on the grid whatever the wake times were (no accumulated drift).
    assert all(t.deadline == loop.deadline(t.index) for t in ticks)
    summary = loop.stats.summary()
    assert summary["ticks"] == 50
    assert summary["missed_deadlines"] == indices[-1] - 49
    for key in ("lateness_s", "period_s", "period_jitter_s", "work_s"):
        assert set(summary[key]) == {"p50", "p99", "p99.9", "max", "mean"}


def test_gc_paused_freezes_disables_and_restores():
    assert gc.isenabled()
    before = gc.get_freeze_count()
    with gc_paused() as frozen:
        assert not gc.isenabled()
        assert frozen > 0 and gc.get_freeze_count() > before
    assert gc.isenabled()
    assert gc.get_freeze_count() == before


def test_gc_paused_keeps_a_disabled_collector_disabled():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_realtime_context_reports_and_restores_scheduling():
    policy, param, cpus = os.sched_getscheduler(0), os.sched_getparam(0), os.sched_getaffinity(0)
    with realtime_context(fifo_priority=10, cpus=[min(cpus)]) as report:
        assert report.fifo_requested and report.affinity_requested
        if report.fifo_applied:  # granted where we are root / have CAP_SYS_NICE
            assert os.sched_getscheduler(0) == os.SCHED_FIFO
        else:
            assert "refused" in report.fifo_detail
        if report.affinity_applied:
            assert os.sched_getaffinity(0) == {min(cpus)}
    assert (os.sched_getscheduler(0), os.sched_getparam(0), os.sched_getaffinity(0)) == (policy, param, cpus)
    assert set(report.as_dict()) >= {"fifo_applied", "affinity_applied", "gc_frozen_objects"}


def test_refused_affinity_is_reported_not_raised():
    cpus = os.sched_getaffinity(0)
    with realtime_context(cpus=[4096]) as report:
        assert not report.affinity_applied
        assert "refused" in report.affinity_detail
        assert not report.fifo_requested
    assert os.sched_getaffinity(0) == cpus


def test_out_of_range_fifo_priority_is_a_caller_error():
    with pytest.raises(ValueError, match="fifo_priority"), realtime_context(fifo_priority=1000):
        pass
    assert gc.isenabled()


def test_real_clock_wait_next_without_iteration_api():
    loop = RateLoop(0.005, spin_s=0.0, clock=time.monotonic)
    loop.start()
    ticks = [loop.wait_next() for _ in range(5)]
    for previous, tick in itertools.pairwise(ticks):
        assert tick.index == previous.index + 1 + tick.missed
    assert loop.stats.ticks == 5


def test_fifo_scheduling_applies_for_the_block_and_restores_or_says_why_not():
    from robot_rl.core.loop_timing import fifo_scheduling

    before = os.sched_getscheduler(0)
    with fifo_scheduling(None) as refused:
        assert refused is None and os.sched_getscheduler(0) == before
    with fifo_scheduling(5) as refused:
        # Root (or CAP_SYS_NICE) gets FIFO; elsewhere the reason, and the block runs unchanged.
        assert (os.sched_getscheduler(0) == os.SCHED_FIFO) if refused is None else ("refused" in refused)
    assert os.sched_getscheduler(0) == before
    with pytest.raises(ValueError, match="fifo_priority"), fifo_scheduling(1000):
        pass


def test_nested_gc_pauses_collect_once():
    """An outer pause around several loops (a deploy's run and its damping) collects once, before the first."""
    seen: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        with gc_paused() as outer:
            assert seen == [2] and outer > 0
            with gc_paused() as inner:
                assert inner == 0 and not gc.isenabled()
            assert not gc.isenabled() and seen == [2]
            with realtime_context() as report:
                assert report.gc_frozen_objects == 0
        assert gc.isenabled() and seen == [2]
    finally:
        gc.callbacks.remove(note)


def test_realtime_context_shortens_the_gil_switch_interval_and_restores_it():
    from robot_rl.core.loop_timing import REALTIME_SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    with realtime_context():
        assert sys.getswitchinterval() == pytest.approx(min(before, REALTIME_SWITCH_INTERVAL_S))
    assert sys.getswitchinterval() == before
