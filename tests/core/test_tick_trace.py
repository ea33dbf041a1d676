"""TickTrace: a slow tick is pinned on the phase that took the time and on why — the thread computing, waiting
for a CPU, or blocked (a lock, the GIL held by another thread); the slowest ticks of a run are kept."""

import math
import random
import sys
import threading
import time

import pytest

from robot_rl.core.tick_trace import PHASES, Interval, TickBreakdown, TickTrace, attribute, decode

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/thread-self")


def _burn_cpu(seconds: float) -> None:
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def _tick(trace: TickTrace, phase_work: dict[str, object]) -> TickBreakdown:
    """One traced tick whose phases run ``phase_work[name]()`` (nothing where absent)."""
    now = time.perf_counter()
    trace.begin(deadline=now, wake=now)
    for name in PHASES:
        work = phase_work.get(name)
        if work is not None:
            work()
        trace.mark()
    return decode(trace.row())


def test_cpu_work_in_a_phase_is_that_phases_cpu_time() -> None:
    trace = TickTrace()
    b = _tick(trace, {"step": lambda: _burn_cpu(0.03)})
    assert b.slowest_phase == "step"
    assert b.phases_s[PHASES.index("step")] >= 0.03
    assert 0.03 <= b.work.cpu_s <= b.work.wall_s + 1e-3
    # The wall time is the CPU time, plus any time another process held the CPU: never blocked.
    assert b.cause() in ("step: cpu", "step: runqueue") and b.work.vcsw == 0
    assert b.cause() == "step: cpu" or b.work.runq_s > b.work.cpu_s


def test_waiting_on_a_lock_another_thread_holds_is_blocked() -> None:
    lock, held = threading.Lock(), threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            time.sleep(0.05)

    threading.Thread(target=holder).start()
    held.wait()
    b = _tick(TickTrace(), {"write": lambda: lock.acquire() and lock.release()})
    assert b.slowest_phase == "write" and b.phases_s[PHASES.index("write")] >= 0.03
    assert b.work.off_cpu_s >= 0.03 and b.work.cpu_s < 0.02 and b.work.vcsw >= 1
    assert b.cause() == "write: blocked"


def test_another_thread_holding_the_gil_in_c_code_blocks_the_loop_thread() -> None:
    """The deploy process's other threads (log writer, DDS re-publish) share the GIL: one long C call
    without a release stalls the loop even with a CPU free. The trace shows it as blocked, not as CPU."""
    values = [random.random() for _ in range(600_000)]
    go = threading.Event()
    sorted_at: list[float] = []

    def sorter() -> None:
        go.wait()
        start = time.perf_counter()
        sorted(values)  # one C call: holds the GIL throughout
        sorted_at.append(time.perf_counter() - start)

    thread = threading.Thread(target=sorter)
    thread.start()

    def let_it_sort() -> None:
        go.set()
        time.sleep(0.002)  # hands the GIL over; taking it back waits for the sort to finish

    b = _tick(TickTrace(), {"read": let_it_sort})
    thread.join()
    stalled = b.phases_s[PHASES.index("read")]
    assert stalled >= 0.5 * sorted_at[0] > 0.01
    assert b.work.cpu_s < 0.5 * stalled and b.work.off_cpu_s >= 0.4 * stalled
    assert b.work.vcsw >= 2  # the sleep, and the wait for the GIL after it
    assert b.cause() == "read: blocked"


def test_the_slowest_ticks_are_kept_slowest_first() -> None:
    trace = TickTrace(keep=3)
    slow = {4: 0.030, 9: 0.050, 13: 0.010, 17: 0.040}
    for k in range(20):
        stall = slow.get(k, 0.0)
        _tick(trace, {"read": lambda: time.sleep(stall)})  # noqa: B023 - called within this iteration
    assert trace.ticks == 20
    kept = trace.slowest()
    assert len(kept) == 3
    assert [round(b.phases_s[0], 2) for b in kept] == pytest.approx([0.05, 0.04, 0.03], abs=0.009)
    assert kept[0].past_deadline_s >= kept[1].past_deadline_s >= kept[2].past_deadline_s


def test_the_wait_interval_and_a_late_wake() -> None:
    trace = TickTrace()
    _tick(trace, {})
    time.sleep(0.02)  # the loop sleeps until its next deadline, and wakes 5 ms late
    deadline = time.perf_counter() - 0.005
    trace.begin(deadline, time.perf_counter())
    for _ in PHASES:
        trace.mark()
    b = decode(trace.row())
    assert b.lateness_s == pytest.approx(0.005, abs=1e-3)
    assert b.wait.wall_s >= 0.02 and b.wait.vcsw >= 1
    assert b.cause().startswith("wake: ")


def test_a_breakdown_survives_json_and_the_first_tick_has_no_wait() -> None:
    trace = TickTrace()
    b = _tick(trace, {"step": lambda: _burn_cpu(0.002)})
    assert math.isnan(b.wait.wall_s)  # no tick before the first
    back = TickBreakdown.from_dict(b.as_dict(), b.deadline)
    assert back.phases_s == pytest.approx(b.phases_s) and back.work == b.work and back.cause() == b.cause()
    assert "step" in back.describe() and "ms past its deadline" in back.describe()


@pytest.mark.parametrize(("interval", "expected"), [
    (Interval(0.03, 0.028, 0.001, 0, 1, 0), "cpu"),
    (Interval(0.03, 0.002, 0.027, 0, 3, 0), "runqueue"),
    (Interval(0.03, 0.001, 0.0, 2, 0, 0), "blocked"),
    (Interval(0.03, 0.001, 0.0, 0, 0, 0), "vm"),
    (Interval(0.03, math.nan, math.nan, 0, 0, 0), "unknown"),
])
def test_attribution_rules(interval: Interval, expected: str) -> None:
    assert attribute(interval) == expected
