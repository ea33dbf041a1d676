"""How late a thread gets the GIL back after a short sleep while another thread of the process runs Python.

A deploy's control loop sleeps until its deadline; when it wakes, its log writer or DDS re-publish thread is
often running Python code, and CPython lets the waiting thread ask the holder to let go only after its
switch interval (``sys.getswitchinterval()``, 5 ms by default). ``robot_rl.core.loop_timing.realtime_context``
lowers it to ``REALTIME_SWITCH_INTERVAL_S`` while a loop runs; this measures what that buys (medians, one
run, the same machine for every interval).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_gil_switch.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

from robot_rl.core.loop_timing import REALTIME_SWITCH_INTERVAL_S


def _late_after_sleep(interval_s: float, samples: int, sleep_s: float) -> list[float]:
    """Seconds past ``sleep_s`` until this thread runs again, while a second thread spins in Python."""
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            pass

    previous = sys.getswitchinterval()
    sys.setswitchinterval(interval_s)
    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    try:
        late = []
        for _ in range(samples):
            start = time.perf_counter()
            time.sleep(sleep_s)
            late.append(time.perf_counter() - start - sleep_s)
        return late
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(previous)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    print("| switch interval ms | late p50 ms | late p99 ms |\n|---|---|---|")
    for interval in (0.005, 0.001, REALTIME_SWITCH_INTERVAL_S):
        late = sorted(_late_after_sleep(interval, args.samples, 0.002))
        print(f"| {1e3 * interval:g} | {1e3 * statistics.median(late):.2f} | "
              f"{1e3 * late[int(0.99 * (len(late) - 1))]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
