"""``robot-rl deploy``: run a policy on a robot in real time, log it, and always leave the robot damped.

One deployment is:

    load the runtime (spec + policy, contract checked) → connect the robot (in-process sim in real time,
    or Unitree over DDS) → arm → run_loop in real time (ramp from the measured pose, then the policy under
    the operator command) → stop → a few damping ticks → close

The damping ticks are what make "the program ended" safe: motors hold their last command when the stream
stops (Unitree firmware and our sim bridge both do), so the last command sent must be damping, not a
policy target. Every catchable ending requests the same ending early - SIGINT (Ctrl-C), SIGTERM, SIGHUP
(the ssh session or terminal went away), SIGQUIT (Ctrl-\\): the loop leaves at the start of its next tick,
before the read, so a tick is never cut between reading and writing. What no handler can catch - SIGKILL,
the OOM killer, a segfault, a hang (SIGSTOP, a deadlock) - is the supervisor's job: for the unitree-dds
interface deploy starts ``robot_rl.control.supervisor`` in its own session, which damps the robot when
``rt/lowcmd`` goes silent, and releases it after its own damping ticks.

Exit status: 0 the run completed; 1 it ended in damping on a fault (the safety chain, or the supervisor
died); 2 a bad argument or no robot / supervisor to start with; 128 + N stopped by signal N, after damping
(129 SIGHUP, 130 SIGINT, 131 SIGQUIT, 143 SIGTERM), as a shell reports a signal.

:func:`run_deployment` is the part between connect and close, for tests and scripts; :func:`deploy` is the
command-line entry point around it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from robot_rl.control.deploy_loop import CommandStep, RunRecord, run_loop
from robot_rl.control.runtime import DeployRuntime
from robot_rl.core.errors import RobotRLError
from robot_rl.core.loop_timing import fifo_scheduling, gc_paused
from robot_rl.core.types import RobotInterface
from robot_rl.core.validate import in_range, positive
from robot_rl.robots.spec import RobotSpec

InterfaceName = Literal["sim", "unitree-dds"]
SimulatorName = Literal["mujoco", "pybullet"]
DAMPING_S = 0.5  # damping ticks sent before close: 25 at 50 Hz, enough that the last command is damping
DDS_CONNECT_TIMEOUT_S = 5.0
DDS_MAX_DOMAIN_ID = 232  # the DDS specification's port mapping leaves room for domains 0-232
SUPERVISOR_START_TIMEOUT_S = 20.0  # a fresh interpreter imports cyclonedds and waits for DDS discovery
EXIT_COMPLETED, EXIT_FAULTED, EXIT_BAD_ARGUMENT = 0, 1, 2
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class DeployError(RobotRLError, ValueError):
    """A deploy argument that cannot work (wrong command size, robot without that interface)."""


def command_age_limit(spec: RobotSpec) -> float:
    """How long the DDS re-publish thread keeps re-sending a command the loop has not renewed: half the
    stale limit, so that a hung loop (last write ≤ one policy period before it hung) is silent on rt/lowcmd
    and the supervisor's takeover (one stale limit later) lands within 2 × the stale limit of the hang."""
    return 0.5 * spec.safety.stale_state_periods * spec.timing.policy_period_s


def exit_status(faulted: bool, stop_signal: int | None, supervisor_lost: bool = False) -> int:
    """The documented exit status of a deployment that reached the robot (see the module docstring)."""
    if faulted or supervisor_lost:
        return EXIT_FAULTED
    if stop_signal is not None:
        return 128 + int(stop_signal)
    return EXIT_COMPLETED


def _say(text: str, stream=None) -> None:
    """Print, ignoring a terminal that hung up (EIO after SIGHUP) or a closed pipe: the deploy must still
    send its damping and exit with its status."""
    with suppress(OSError, ValueError):
        print(text, file=stream or sys.stdout, flush=True)


class _StopRequested(Exception):
    """Raised from the loop's ``on_tick`` when an operator asked to stop (Ctrl-C); never escapes here."""


@dataclass
class DeployResult:
    """What one deployment did. ``record`` is None when the run was interrupted (the loop's record of an
    interrupted run is not kept; the mode changes, safety counters and the log still are)."""

    record: RunRecord | None
    damping: RunRecord  # the closing damping ticks
    interrupted: bool
    mode_changes: list[tuple[float, str]]  # (s since the first tick, mode entered)
    diagnostics: dict  # runtime.diagnostics() after the damping ticks
    log_path: Path | None = None
    log_counts: dict = field(default_factory=dict)  # enqueued / written / dropped records

    @property
    def faulted(self) -> bool:
        return bool(self.diagnostics.get("fault_latched"))


def command_values(runtime: DeployRuntime, command: Sequence[float]) -> tuple[float, ...]:
    """The operator command, checked against the policy's command names and ranges (empty: all zero)."""
    if runtime.contract is None:
        if command:
            raise DeployError(f"command {tuple(command)} given, but there is no policy to take it")
        return ()
    names, ranges = runtime.contract.commands.names, runtime.contract.commands.ranges
    if not command:
        return tuple(0.0 for _ in names)
    if len(command) != len(names):
        raise DeployError(f"command has {len(command)} values, the policy takes {len(names)}: {', '.join(names)}")
    for name, value, (low, high) in zip(names, command, ranges, strict=True):
        if not (np.isfinite(value) and low <= value <= high):
            raise DeployError(f"command {name} = {value!r} is outside the range the policy was trained on "
                              f"[{low:g}, {high:g}]")
    return tuple(float(v) for v in command)


def connect_robot(spec: RobotSpec, interface: InterfaceName, *, simulator: SimulatorName = "mujoco",
                  domain_id: int | None = None, network_interface: str | None = None,
                  connect_timeout_s: float = DDS_CONNECT_TIMEOUT_S) -> RobotInterface:
    """A connected robot: the in-process simulator stepping in real time, or Unitree over DDS."""
    if interface == "sim":
        from robot_rl.hardware.sim_robot import SimRobot

        robot: RobotInterface = SimRobot(spec, simulator, realtime=True)
    elif interface == "unitree-dds":
        if spec.interface.type != "unitree_dds":
            raise DeployError(f"robot {spec.name!r} ({spec.source_file}) has interface.type "
                              f"{spec.interface.type!r}; --interface unitree-dds needs 'unitree_dds'")
        from robot_rl.hardware.unitree_dds import UnitreeDdsRobot

        robot = UnitreeDdsRobot(spec, domain_id, network_interface, connect_timeout_s=connect_timeout_s,
                                max_command_age_s=command_age_limit(spec))
    else:
        raise DeployError(f"unknown interface {interface!r} (known: sim, unitree-dds)")
    robot.connect()
    return robot


def run_deployment(runtime: DeployRuntime, robot: RobotInterface, duration_s: float, *,
                   command: Sequence[float] = (), log_path: str | Path | None = None,
                   fifo_priority: int | None = None, damping_s: float = DAMPING_S,
                   stop_requested: threading.Event | None = None, log_metadata: dict[str, str] | None = None,
                   log_overwrite: bool = False) -> DeployResult:
    """Arm, run in real time for ``duration_s`` (or until ``stop_requested`` is set), then stop and send
    ``damping_s`` of damping ticks. The robot must be connected; the caller closes it.

    With ``log_path``, both phases go to one MCAP deploy log (closed before returning).
    """
    values = command_values(runtime, command)
    stop_requested = stop_requested or threading.Event()
    log = None
    if log_path is not None:
        from robot_rl.data.mcap_log import DeployLogWriter

        log = DeployLogWriter(log_path, metadata=log_metadata, overwrite=log_overwrite)
    origin: list[float] = []  # perf_counter at the first tick ≈ that tick's deadline (the runtime's `now`)
    changes_before = len(runtime.mode_changes)
    # The run's last tick (run_loop runs round(duration / period) ticks) already sends damping, and so does
    # the tick after a stop request: the pause before the damping loop's first tick then holds damping,
    # never a policy target. Garbage is collected once, before arming (gc_paused around both loops): a
    # second full collection between the loops held the GIL for 20–27 ms and stalled every thread, the
    # DDS re-publish thread included (benchmarks/results/RESULTS_deploy_soak.md).
    last_tick = max(1, round(duration_s / runtime.spec.timing.policy_period_s)) - 1
    damping_sent = threading.Event()

    def on_tick(k: int, t: float) -> None:
        if k == 0:
            origin.append(time.perf_counter() - t)
        if damping_sent.is_set():
            raise _StopRequested
        if stop_requested.is_set() or k == last_tick:
            runtime.stop()
            if k != last_tick:
                damping_sent.set()

    record: RunRecord | None = None
    interrupted = stop_requested.is_set()
    try:
        with gc_paused():
            try:
                if not interrupted:
                    record = run_loop(runtime, robot, duration_s, realtime=True, arm=True, on_tick=on_tick,
                                      commands=[CommandStep(0.0, values)] if values else (),
                                      fifo_priority=fifo_priority, log=log)
            except _StopRequested:
                interrupted = True
            finally:  # every way out of the run, an error included, ends in damping
                runtime.stop()
                damping = run_loop(runtime, robot, damping_s, realtime=True, arm=False,
                                   fifo_priority=fifo_priority, log=log)
    finally:
        if log is not None:
            log.close()
    t0 = origin[0] if origin else 0.0
    return DeployResult(
        record=record, damping=damping, interrupted=interrupted,
        mode_changes=[(max(0.0, now - t0), mode) for now, mode in runtime.mode_changes[changes_before:]],
        diagnostics=runtime.diagnostics(), log_path=None if log is None else log.path,
        log_counts={} if log is None else {"enqueued": log.enqueued, "written": log.written,
                                           "dropped": log.dropped},
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1e3 * value:.3f}"


def format_summary(result: DeployResult) -> str:
    """The lines printed after a deployment: modes, safety counters, loop timing, log."""
    lines = []
    modes = ", ".join(f"{t:.2f} s {mode}" for t, mode in result.mode_changes) or "none"
    lines.append(f"mode changes: {modes}" + ("  (interrupted by the operator)" if result.interrupted else ""))
    safety = result.diagnostics.get("safety", {})
    interventions = ", ".join(f"{k} {v}" for k, v in safety.get("interventions", {}).items()) or "none"
    faults = ", ".join(f"{k} {v}" for k, v in safety.get("faults", {}).items()) or "none"
    lines.append(f"safety: {safety.get('steps', 0)} steps; interventions: {interventions}; faults: {faults}")
    for text in safety.get("last_fault", []):
        lines.append(f"  last fault: {text}")
    if result.record is not None:
        timing = result.record.timing
        for name in ("lateness_s", "work_s"):
            d = timing[name]
            lines.append(f"loop {name.removesuffix('_s')} (ms): p50 {_ms(d['p50'])}  p99 {_ms(d['p99'])}  "
                         f"p99.9 {_ms(d['p99.9'])}  max {_ms(d['max'])}")
        lines.append(f"loop: {timing['ticks']} ticks at {1 / timing['period_nominal_s']:g} Hz, "
                     f"{timing['missed_deadlines']} missed deadlines (most in a row: "
                     f"{timing['max_consecutive_overruns']})")
        if timing.get("slowest_ticks"):
            lines.append(f"slowest tick: {timing['slowest_ticks'][0].describe()}")
    else:
        lines.append("loop timing: not kept for an interrupted run" + (" (see the log)" if result.log_path else ""))
    if result.log_path is not None:
        c = result.log_counts
        lines.append(f"log: {result.log_path} ({c.get('written', 0)} records, {c.get('dropped', 0)} dropped)")
    final = result.damping.mode[-1] if result.damping.mode else result.diagnostics.get("mode")
    lines.append(f"ended in {final} ({result.damping.ticks} damping ticks sent)")
    return "\n".join(lines)


@contextmanager
def _stop_on_signals(stop: threading.Event, caught: list[int]) -> Iterator[None]:
    """SIGINT / SIGTERM / SIGHUP / SIGQUIT set ``stop`` (and the first one lands in ``caught``) instead of
    killing the process, so the loop ends on a tick boundary and damps."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        if not caught:
            caught.append(signum)
            _say(f"\n{signal.Signals(signum).name}: stopping → damping", sys.stderr)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _stop_when_supervisor_exits(supervisor, stop: threading.Event, lost: list[int]) -> None:
    """A supervisor that dies while we run leaves the robot unguarded: stop (→ damping, exit 1)."""
    def watch() -> None:
        code = supervisor.proc.wait()
        if not supervisor.released and not stop.is_set():
            lost.append(code)
            _say(f"\nsupervisor exited (status {code}): stopping → damping", sys.stderr)
            stop.set()

    threading.Thread(target=watch, daemon=True, name="deploy-supervisor-watch").start()


@contextmanager
def _fifo_for_new_threads(priority: int | None) -> Iterator[None]:
    """SCHED_FIFO for the calling thread *before* the robot connects, so that every thread started from
    here on inherits it: the DDS re-publish thread, the log writer, DDS's own threads. FIFO for the loop's
    thread alone is not enough: a normal-priority thread descheduled while it holds the GIL makes the loop
    wait (priority inversion), and on a loaded machine the overrun watchdog trips. Refusal is reported."""
    with fifo_scheduling(priority) as refused:
        if refused:
            print(f"warning: {refused}; running at normal priority", file=sys.stderr)
        yield


def deploy(robot: str = "a1", policy: str = "policies/a1_flat/policy.onnx", interface: InterfaceName = "sim",
           simulator: SimulatorName = "mujoco", duration_s: float = 20.0, command: tuple[float, ...] = (),
           domain_id: int | None = None, network_interface: str | None = None, log: str | None = None,
           overwrite: bool = False, fifo_priority: int | None = None, supervisor: bool = True) -> int:
    """Run a policy on a robot in real time (sim or Unitree DDS), log it, and end in damping.

    Arms, ramps from the measured pose to the default pose, runs the policy under the command, then stops
    and sends damping before closing. SIGINT (Ctrl-C), SIGTERM, SIGHUP (lost terminal / ssh) and SIGQUIT
    stop early the same way. With unitree-dds a supervisor process (`robot-rl supervise`) watches rt/lowcmd
    and damps the robot if this process dies or hangs (SIGKILL, OOM, segfault, SIGSTOP). Exit status:
    0 completed; 1 ended in damping on a fault (safety chain, or the supervisor died); 2 bad argument,
    no robot or no supervisor; 128+N stopped by signal N after damping (129 SIGHUP, 130 SIGINT,
    131 SIGQUIT, 143 SIGTERM).

    Args:
        robot: robot name (hardware/robots/NAME.yaml) or path to a spec file.
        policy: exported policy (.onnx with its contract); checked against the robot spec and task.
        interface: sim (in-process simulator stepping in real time) or unitree-dds (rt/lowcmd, rt/lowstate;
            a robot, or `robot-rl bridge`).
        simulator: the simulator for --interface sim.
        duration_s: how long to run (ramp included) before stopping.
        command: the operator command, one value per policy command (A1: lin_vel_x lin_vel_y ang_vel_z);
            empty: all zero.
        domain_id: DDS domain (default: the spec's interface.domain_id).
        network_interface: network interface for DDS (default: the spec's interface.network_interface).
        log: write an MCAP deploy log here (state, proposed and sent commands, safety events, timing). An
            existing file is refused before the robot is touched, unless --overwrite.
        overwrite: replace an existing --log file.
        fifo_priority: run the control loop, and every thread started for it (DDS, re-publish, log writer),
            under SCHED_FIFO at this priority (needs CAP_SYS_NICE or root; refused: normal priority).
        supervisor: unitree-dds: start the supervisor and refuse to run without it (--no-supervisor: run
            unguarded; a killed or hung deploy then leaves the robot on its last command).
    """
    try:
        positive(duration_s=duration_s)
        in_range(0, DDS_MAX_DOMAIN_ID, domain_id=domain_id)
        if log is not None and not overwrite and Path(log).exists():
            raise DeployError(f"--log {log}: a file is already there; choose another path, or pass --overwrite "
                              "to replace it")
        from robot_rl.policy.onnx_policy import resolve_policy  # the default is the repository's, not the cwd's

        runtime = DeployRuntime.load(robot, resolve_policy(policy) or policy)
        values = command_values(runtime, command)
        spec = runtime.spec
        if fifo_priority is not None and hasattr(os, "sched_get_priority_max"):
            low, high = os.sched_get_priority_min(os.SCHED_FIFO), os.sched_get_priority_max(os.SCHED_FIFO)
            in_range(low, high, fifo_priority=fifo_priority)
        target = (f"DDS domain {spec.interface.domain_id if domain_id is None else domain_id}"
                  if interface == "unitree-dds" else f"{simulator}, real time")
        print(f"deploy: robot {spec.name}, policy {policy}, {interface} ({target}), {duration_s:g} s, command "
              + (", ".join(f"{n}={v:g}" for n, v in zip(runtime.contract.commands.names, values, strict=True))),
              flush=True)
    except ValueError as exc:  # DeployError, a spec / contract mismatch, a task for another robot
        print(f"error: {exc}", file=sys.stderr)
        return 2
    guard = None
    with _fifo_for_new_threads(fifo_priority):  # the supervisor runs one FIFO level above the loop
        if interface == "unitree-dds" and supervisor:
            from robot_rl.control.supervisor import SupervisorProcess

            above = None if fifo_priority is None else min(fifo_priority + 1, os.sched_get_priority_max(os.SCHED_FIFO))
            guard = SupervisorProcess(robot, domain_id, network_interface, above)  # starts while we connect
        try:
            connected = connect_robot(spec, interface, simulator=simulator, domain_id=domain_id,
                                      network_interface=network_interface)
        except ValueError as exc:
            _kill(guard)
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_BAD_ARGUMENT
        except KeyboardInterrupt:  # before arming: nothing was sent to the robot
            _kill(guard)
            print("interrupted before the robot was armed", file=sys.stderr)
            return 128 + signal.SIGINT
        except BaseException:
            _kill(guard)
            raise
        stop, caught, lost = threading.Event(), [], []
        try:
            with _stop_on_signals(stop, caught):  # a signal while the supervisor starts: never armed
                if guard is not None:
                    try:
                        guard.wait_ready(SUPERVISOR_START_TIMEOUT_S)
                    except RobotRLError:  # no supervisor: nothing was sent to the robot, and nothing will be
                        _kill(guard)
                        raise
                    _say(f"supervisor: pid {guard.pid} damps the robot if this process dies or hangs")
                    _stop_when_supervisor_exits(guard, stop, lost)
                result = run_deployment(runtime, connected, duration_s, command=values, log_path=log,
                                        fifo_priority=fifo_priority, stop_requested=stop, log_overwrite=overwrite,
                                        log_metadata={"robot": spec.name, "policy": str(policy),
                                                      "interface": interface})
            if guard is not None:  # our damping went out: the supervisor may go
                guard.release()
        finally:  # an error past this point leaves the supervisor on guard: it damps if our damping failed
            connected.close()
    status = exit_status(result.faulted, caught[0] if caught else None, supervisor_lost=bool(lost))
    _say(format_summary(result))
    if status != EXIT_COMPLETED:
        why = (signal.Signals(caught[0]).name if caught and status != EXIT_FAULTED
               else "supervisor lost" if lost and not result.faulted else "safety fault")
        _say(f"exit status {status} ({why})")
    return status


def _kill(guard) -> None:
    if guard is not None:
        guard.kill()
