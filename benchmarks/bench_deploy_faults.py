"""Every way to kill or starve a running deploy, and how long until the robot is damped.

The robot is the sim bridge (``python -m robot_rl.hardware.sim_bridge``, A1 over DDS on loopback), which
like Unitree's low-level firmware holds the last command forever. ``robot-rl deploy --interface
unitree-dds`` runs the shipped A1 policy against it (with its supervisor), and once the policy walks the
fault is injected:

- ``SIGINT`` / ``SIGTERM`` / ``SIGHUP`` / ``SIGQUIT``: deploy's own handlers → its damping ticks;
- ``SIGKILL`` (what the OOM killer and a segfault look like from outside): the supervisor takes over;
- ``hang (SIGSTOP)``: the controller freezes, its DDS threads with it: the supervisor takes over;
- ``bridge restart``: the robot's computer is killed and restarted; the controller's stale-state watchdog
  damps, and the restarted robot's first commands are damping (timed from the restarted bridge's tick 0);
- ``state link down``: no ``rt/lowstate`` reaches the controller (SIGUSR2 to the bridge): stale state →
  the controller's own damping;
- ``link down both ways, 0.5 s``: nothing reaches either side (SIGUSR1): no one can damp a robot that
  receives nothing, so the robot holds the policy's command until the link returns; then the damping the
  controller switched to is the first command through (timed from the fault and from the link's return).

Time to damping = the bridge tick that first applied a damping command (``damping_since_monotonic_s`` in
its status side channel; time.monotonic() is one clock for all processes) − the moment the fault was
injected (time.monotonic() just before the signal). Goal: within 2 × the spec's stale-state limit.

    .venv/bin/python benchmarks/bench_deploy_faults.py --reps 5 \
        --markdown-out benchmarks/results/RESULTS_deploy_faults.md
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import platform
import random
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from robot_rl.core.loop_timing import fifo_scheduling

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from robot_rl.dds import close_domain  # noqa: E402
from robot_rl.robots.spec import load_robot  # noqa: E402
from robot_rl.safety.supervisor import SupervisorLimits  # noqa: E402


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_hw = REPO / "tests" / "hardware"
harness = _load("deploy_process", _hw / "deploy_process.py")  # the fault tests' deploy-as-a-process helper
fixtures = _load("hardware_conftest", _hw / "conftest.py")  # BridgeProcess, StatusReader

SPEC = load_robot("a1")
STALE_S = SupervisorLimits.from_spec(SPEC).stale_s
LINK_DOWN_S = 0.5
FAULTS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGKILL", "hang (SIGSTOP)", "bridge restart",
          "state link down", "link down both ways, 0.5 s")


@dataclass
class Row:
    fault: str
    latencies: list[float] = field(default_factory=list)  # s, fault → damping applied
    after_restore: list[float] = field(default_factory=list)  # link faults: link back → damping applied
    misses: int = 0  # reps where the bridge never applied damping within the wait
    statuses: list[int | None] = field(default_factory=list)
    damped_by: set[str] = field(default_factory=set)
    replaced: list[str] = field(default_factory=list)  # deploys that faulted by themselves first: why
    skipped: int = 0  # reps without a deploy that ran until the fault


class Bench:
    def __init__(self, domain: int, fifo_priority: int | None) -> None:
        self.domain, self.fifo = domain, fifo_priority
        self.bridge = None
        self.bridge_args: list[str] = []  # sim bridge flags (faults) for every bridge started from now on
        self.status = fixtures.StatusReader(domain)
        self.supervisor_cpu: list[float] = []  # share of one core the supervisor used while watching

    def start_bridge(self) -> float:
        if self.bridge is not None:
            self.bridge.stop()
        started = time.monotonic()
        self.bridge = fixtures.BridgeProcess(self.domain, list(self.bridge_args), 3600.0)
        settled = self.status.wait_for(lambda s: s.tick_origin_monotonic_s > started and s.sim_time_s > 1.0, 60)
        assert settled is not None, "the sim bridge did not start"
        return started

    def running_deploy(self, row: Row, *extra: str, duration_s: float = 120.0):
        """A deploy whose policy walks; one that faulted by itself first (an overrun on this loaded machine,
        a robot that fell on its side after repeated damping) is counted and replaced, on a fresh bridge, or
        its damping would be timed against a fault it never saw. ``extra``: more deploy arguments."""
        for _ in range(5):
            t0 = time.monotonic()
            deploy = harness.DeployProcess(self.domain, duration_s, *extra, fifo_priority=self.fifo)
            ok = self.status.wait_for(lambda s, t0=t0: s.command_kp_max > 0 and s.last_command_monotonic_s > t0,
                                      60)
            if ok is None or ok.command_kp_max == 0:
                deploy.end()
                raise RuntimeError(f"deploy never commanded the robot:\n{deploy.stdout}\n{deploy.stderr}")
            pid = deploy.supervisor_pid()
            cpu0, t_cpu = _cpu_s(pid), time.monotonic()
            time.sleep(SPEC.safety.ramp_duration_s + 0.5)  # the policy walks
            now = time.monotonic()
            if cpu0 is not None and (cpu1 := _cpu_s(pid)) is not None:
                self.supervisor_cpu.append((cpu1 - cpu0) / (now - t_cpu))
            s = self.status.wait_for(lambda s, now=now: s.tick_origin_monotonic_s + s.sim_time_s > now, 2.0)
            if s is not None and s.command_kp_max > 0 and not s.command_damping:
                return deploy
            deploy.signal(signal.SIGTERM)
            deploy.wait(20)
            deploy.end()
            why = next((ln.strip() for ln in deploy.out if "last fault" in ln), "damping before the fault")
            row.replaced.append(why)
            self.start_bridge()  # a fresh robot: one that fell on its side faults every deploy on tilt
        return None

    def damped_after(self, t: float, timeout_s: float = 5.0):
        s = self.status.wait_for(lambda s: s.command_damping == 1 and s.damping_since_monotonic_s > t, timeout_s)
        return s if s is not None and s.command_damping == 1 and s.damping_since_monotonic_s > t else None

    def rep(self, fault: str, row: Row) -> None:
        deploy = self.running_deploy(row)
        if deploy is None:  # five in a row faulted by themselves (a loaded machine): no rep
            row.skipped += 1
            return
        restored_at, states_cut = None, False
        try:
            if fault.startswith("SIG") and fault != "SIGKILL":
                t = deploy.signal(getattr(signal, fault))
                row.damped_by.add("deploy (signal handler)")
            elif fault == "SIGKILL":
                t = deploy.signal(signal.SIGKILL)
                row.damped_by.add("supervisor")
            elif fault == "hang (SIGSTOP)":
                t = deploy.signal(signal.SIGSTOP)
                row.damped_by.add("supervisor")
            elif fault == "bridge restart":
                self.bridge.proc.kill()
                self.bridge.stop()
                restarted = time.monotonic()
                self.bridge = fixtures.BridgeProcess(self.domain, [], 3600.0)
                first = self.status.wait_for(lambda s: s.tick_origin_monotonic_s > restarted, 60)
                t = first.tick_origin_monotonic_s  # timed from the restarted robot's tick 0
                row.damped_by.add("deploy (stale state → fault)")
            elif fault == "state link down":
                t = time.monotonic()
                self.bridge.proc.send_signal(signal.SIGUSR2)
                states_cut = True
                row.damped_by.add("deploy (stale state → fault)")
            else:
                t = time.monotonic()
                self.bridge.proc.send_signal(signal.SIGUSR1)
                time.sleep(LINK_DOWN_S)
                restored_at = time.monotonic()
                self.bridge.proc.send_signal(signal.SIGUSR1)
                row.damped_by.add("deploy (stale state → fault), once the link is back")
            status = self.damped_after(t)
            if status is None:
                row.misses += 1
            else:
                row.latencies.append(status.damping_since_monotonic_s - t)
                if restored_at is not None:
                    row.after_restore.append(status.damping_since_monotonic_s - restored_at)
            if states_cut:
                self.bridge.proc.send_signal(signal.SIGUSR2)
            if fault.startswith("SIG") and fault != "SIGKILL":
                row.statuses.append(deploy.wait(20))
            elif fault in ("SIGKILL", "hang (SIGSTOP)"):
                row.statuses.append(None)
            else:
                deploy.signal(signal.SIGTERM)
                row.statuses.append(deploy.wait(20))
        finally:
            deploy.end()  # kills a stopped or killed deploy's supervisor too


def _cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system) a process has used so far, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(values: list[float], q: str) -> str:
    if not values:
        return "-"
    v = statistics.median(values) if q == "p50" else max(values)
    return f"{1e3 * v:.0f}"


def report(rows: list[Row], reps: int, wall_s: float, fifo: int | None, cpu: list[float]) -> str:
    limit = 2 * STALE_S
    lines = [
        "# Deploy faults: time until the robot is damped",
        "",
        f"`benchmarks/bench_deploy_faults.py --reps {reps}`: A1 sim bridge + `robot-rl deploy --interface unitree-dds`"
        f" (shipped policy, supervisor on) over DDS on loopback; {platform.node()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end; SCHED_FIFO {fifo if fifo else 'off'}; "
        f"{wall_s / 60:.1f} min.",
        "",
        f"Stale-state limit {1e3 * STALE_S:.0f} ms (5 policy periods); goal: damped within 2 × = {1e3 * limit:.0f} ms. "
        "Time = the bridge tick that first applied damping − the moment the fault was injected.",
        "",
        "| fault | damped by | p50 ms | max ms | within goal | deploy exit status |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        met = row.latencies and not row.misses and max(row.latencies) <= limit
        codes = sorted({"killed" if c is None else str(c) for c in row.statuses})
        extra = ""
        if row.after_restore:
            extra = f" (link back → damped: p50 {_ms(row.after_restore, 'p50')}, max {_ms(row.after_restore, 'max')})"
        miss = f", {row.misses} of {reps} never damped" if row.misses else ""
        miss += f", {row.skipped} of {reps} not run" if row.skipped else ""
        verdict = "yes" if met else "**no**"
        if row.after_restore:  # nothing reaches the robot while the link is down: judge the return
            back = not row.misses and max(row.after_restore) <= limit
            verdict = f"n/a while cut off; after: {'yes' if back else '**no**'}"
        lines.append(f"| {row.fault} | {', '.join(sorted(row.damped_by))} | {_ms(row.latencies, 'p50')}{extra} | "
                     f"{_ms(row.latencies, 'max')}{miss} | {verdict} | {', '.join(codes)} |")
    if cpu:
        lines += ["", f"Supervisor cost while it watches a walking deploy (polls `rt/lowcmd` every 10 ms): p50 "
                  f"{100 * statistics.median(cpu):.1f} %, max {100 * max(cpu):.1f} % of one core ({len(cpu)} runs)."]
    replaced = [(row.fault, why) for row in rows for why in row.replaced]
    if replaced:
        lines += ["", "Deploys that faulted by themselves before the fault was injected (replaced by a new one, "
                  "not timed):", ""] + [f"- {fault}: {why}" for fault, why in replaced]
    lines += [
        "",
        "Reading it: the signal rows are deploy's own stop (next tick + the damping command's way to the robot). "
        "SIGKILL and the hang are the supervisor: it takes over once `rt/lowcmd` has been silent for the stale "
        "limit, so those rows sit just above it. The bridge restart row is timed from the restarted robot's first "
        "tick: its first commands are the damping the controller switched to when the state went stale, after "
        "DDS discovery of the new process. A link that is down both ways cannot carry damping: the robot holds "
        "the policy's last command until the link returns (row timed from the outage; nothing can meet the goal "
        "there, only the firmware could).",
        "",
        "Exit statuses: 0 completed, 1 fault (here: stale state or overrun), 128 + N stopped by signal N.",
    ]
    return "\n".join(lines) + "\n"


_RUN = contextlib.ExitStack()  # held for the process's life: what the run is entered into


def run_under_fifo(priority: int | None) -> int | None:
    """This process under SCHED_FIFO for the rest of the run, so the bridge and every deploy it starts
    inherit it, as on a robot's computer; the priority in force (None: not asked for, or refused)."""
    if priority is None:
        return None
    refused = _RUN.enter_context(fifo_scheduling(priority))
    if refused:
        print(f"{refused}; running at normal priority", file=sys.stderr)
        return None
    return priority


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--faults", nargs="*", default=list(FAULTS), choices=FAULTS, metavar="FAULT")
    parser.add_argument("--fifo-priority", type=int, default=10, help="0: off")
    parser.add_argument("--markdown-out", type=Path)
    args = parser.parse_args()
    fifo = run_under_fifo(args.fifo_priority or None)
    domain = random.SystemRandom().randint(150, 230)
    bench = Bench(domain, fifo)
    rows = []
    t0 = time.monotonic()
    try:
        bench.start_bridge()
        for fault in args.faults:
            row = Row(fault)
            for _ in range(args.reps):
                bench.rep(fault, row)
                print(f"{fault}: {1e3 * row.latencies[-1]:.0f} ms" if row.latencies else f"{fault}: not damped",
                      *row.replaced[-1:], flush=True)
            rows.append(row)
    finally:
        if bench.bridge is not None:
            bench.bridge.stop()
        close_domain(domain)
    text = report(rows, args.reps, time.monotonic() - t0, fifo, bench.supervisor_cpu)
    print(text)
    if args.markdown_out:
        args.markdown_out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
