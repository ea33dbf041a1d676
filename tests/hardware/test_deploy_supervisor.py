"""Every way a deploy can die ends in damping: real processes, real DDS on loopback, the sim bridge as the
robot (it holds the last command forever, as Unitree's low-level mode does).

- a catchable signal (SIGHUP: the ssh session dropped; SIGTERM; SIGQUIT; SIGINT is in test_deploy_e2e):
  deploy's own damping, exit status 128 + N, the supervisor released and never sending;
- SIGKILL (also what OOM and a segfault look like from outside): the supervisor damps within 2 × the stale
  limit, and without a supervisor the kp-20 command is still in force long after;
- a hung controller (SIGSTOP; a loop that stops writing while its re-publish thread lives): damped within
  2 × the stale limit; resumed, it finds its own fault and the supervisor hands back;
- a healthy run: the supervisor never sends a frame, exit status 0.

Times are the bridge's own: ``damping_since_monotonic_s`` is the bridge tick that first applied damping.
"""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from robot_rl.control.deploy_command import command_age_limit, exit_status
from robot_rl.control.supervisor import Supervisor
from robot_rl.core.loop_timing import fifo_scheduling
from robot_rl.core.types import JointCommand
from robot_rl.hardware.unitree_dds import UnitreeDdsRobot
from robot_rl.robots.spec import load_robot
from robot_rl.safety.supervisor import SupervisorLimits, SupervisorMode


def _load_harness():
    """tests/hardware/deploy_process.py, which the fault benchmark uses too (imported by path: the tests
    run with --import-mode=importlib, so a test's folder is not on sys.path)."""
    if "deploy_process" not in sys.modules:
        spec = importlib.util.spec_from_file_location("deploy_process", Path(__file__).with_name("deploy_process.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules["deploy_process"] = module
        spec.loader.exec_module(module)
    return sys.modules["deploy_process"]


_harness = _load_harness()
POLICY, DeployProcess, alive, kill_pid = _harness.POLICY, _harness.DeployProcess, _harness.alive, _harness.kill_pid
pytestmark = pytest.mark.skipif(not POLICY.exists(), reason=f"no shipped A1 policy at {POLICY}")

SPEC = load_robot("a1")
STALE_S = SupervisorLimits.from_spec(SPEC).stale_s  # 100 ms on the A1
START_TIMEOUT_S = 40.0  # two fresh interpreters (deploy, supervisor) import and discover on a shared machine
FIFO_PRIORITY = 10  # as test_deploy_e2e: the bridge, deploy and its supervisor under SCHED_FIFO


@pytest.fixture(autouse=True)
def realtime_priority() -> Iterator[None]:
    """This process (and so the bridge it starts) under SCHED_FIFO, as on a robot's computer; deploy gets
    --fifo-priority and starts its supervisor under it. On this shared machine a normal-priority controller
    is descheduled long enough for its own overrun watchdog (rightly) to fault, and a healthy run would not
    look healthy. Left at normal priority without the privilege."""
    with fifo_scheduling(FIFO_PRIORITY):  # refused (no CAP_SYS_NICE / RLIMIT_RTPRIO): normal priority
        yield


@pytest.fixture
def deploys() -> Iterator[list[DeployProcess]]:
    started: list[DeployProcess] = []
    yield started
    for deploy in started:
        deploy.end()


def _start(deploys: list, bridge_status, domain: int, *extra: str, duration_s: float = 60.0) -> DeployProcess:
    """Start deploy once the bridge's robot lies on the floor; return once the policy commands it."""
    settled = bridge_status.wait_for(lambda s: s.sim_time_s > 1.0, timeout_s=START_TIMEOUT_S)
    assert settled is not None and settled.command_active == 0, settled
    deploy = DeployProcess(domain, duration_s, *extra, fifo_priority=FIFO_PRIORITY)
    deploys.append(deploy)
    running = bridge_status.wait_for(lambda s: s.commands_applied > 100 and s.command_kp_max > 0,
                                     timeout_s=START_TIMEOUT_S)
    assert running is not None and running.command_kp_max > 0, (deploy.stdout, deploy.stderr)
    return deploy


def _damped_after(bridge_status, t_fault: float, timeout_s: float = 5.0):
    """The bridge status once it applies damping that started after ``t_fault``."""
    status = bridge_status.wait_for(lambda s: s.command_damping == 1 and s.damping_since_monotonic_s > t_fault,
                                    timeout_s=timeout_s)
    assert status is not None and status.command_damping == 1, status
    return status


def _supervisor_summary(deploy: DeployProcess) -> dict:
    found = re.search(r"supervisor exits in \w+: (\{.*\})", deploy.stderr)
    assert found, deploy.stderr
    return json.loads(found.group(1))


def test_exit_status_per_ending() -> None:
    assert exit_status(False, None) == 0
    assert exit_status(True, None) == 1
    assert exit_status(False, None, supervisor_lost=True) == 1
    assert exit_status(True, signal.SIGHUP) == 1  # a fault says more than the signal that came after it
    assert {sig.name: exit_status(False, sig) for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT,
                                                          signal.SIGTERM)} == \
        {"SIGHUP": 129, "SIGINT": 130, "SIGQUIT": 131, "SIGTERM": 143}


def test_healthy_run_completes_and_the_supervisor_never_sends(start_bridge, bridge_status, domain, deploys) -> None:
    start_bridge()
    deploy = _start(deploys, bridge_status, domain, duration_s=SPEC.safety.ramp_duration_s + 2.0)
    assert deploy.wait(timeout_s=30) == 0, (deploy.stdout, deploy.stderr)
    assert deploy.wait_stderr("supervisor exits", 5.0), deploy.stderr
    assert "released by the controller" in deploy.stderr
    assert _supervisor_summary(deploy) == {"mode": "done", "takeovers": 0, "handbacks": 0, "damping_sent": 0}
    assert not alive(deploy.supervisor_pid())
    status = bridge_status.wait_for(lambda s: s.command_damping == 1, timeout_s=2.0)
    assert status.command_damping == 1  # deploy's own damping ticks were the last command


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT])
def test_catchable_signal_ends_in_damping_with_its_exit_status(sig, start_bridge, bridge_status, domain,
                                                               deploys) -> None:
    start_bridge()
    deploy = _start(deploys, bridge_status, domain)
    t_signal = deploy.signal(sig)
    status = _damped_after(bridge_status, t_signal)
    # Deploy's own damping: on its next tick (≤ one policy period) plus the way to the bridge.
    assert status.damping_since_monotonic_s - t_signal < 2 * STALE_S
    assert deploy.wait(timeout_s=20) == 128 + sig, (deploy.stdout, deploy.stderr)
    assert f"{signal.Signals(sig).name}: stopping → damping" in deploy.stderr
    assert re.search(r"ended in damping \(\d+ damping ticks sent\)", deploy.stdout), deploy.stdout
    assert f"exit status {128 + sig} ({signal.Signals(sig).name})" in deploy.stdout
    assert deploy.wait_stderr("supervisor exits", 5.0), deploy.stderr
    assert _supervisor_summary(deploy)["damping_sent"] == 0
    held = bridge_status.wait_for(lambda s: s.sim_time_s > status.sim_time_s + 1.0, timeout_s=5.0)
    assert held.command_damping == 1 and held.damping_since_monotonic_s == status.damping_since_monotonic_s


def test_sigkill_the_supervisor_damps_within_twice_the_stale_limit(start_bridge, bridge_status, domain,
                                                                   deploys) -> None:
    start_bridge()
    deploy = _start(deploys, bridge_status, domain)
    supervisor = deploy.supervisor_pid()
    t_kill = deploy.signal(signal.SIGKILL)
    status = _damped_after(bridge_status, t_kill)
    latency = status.damping_since_monotonic_s - t_kill
    assert STALE_S < latency < 2 * STALE_S, f"damped {1e3 * latency:.0f} ms after SIGKILL"
    assert deploy.wait_stderr("taking over with damping", 5.0), deploy.stderr
    # It keeps sending damping: the bridge keeps receiving frames long after the deploy died.
    later = bridge_status.wait_for(lambda s: s.last_command_monotonic_s > t_kill + 1.0, timeout_s=5.0)
    assert later.command_damping == 1 and later.damping_since_monotonic_s == status.damping_since_monotonic_s
    assert alive(supervisor)
    kill_pid(supervisor)


def test_without_a_supervisor_a_killed_deploy_leaves_the_last_command_in_force(start_bridge, bridge_status,
                                                                                domain, deploys) -> None:
    """The bridge, like the firmware, has no timeout of its own: this is what the supervisor is for."""
    start_bridge()
    deploy = _start(deploys, bridge_status, domain, "--no-supervisor")
    assert "supervisor" not in deploy.stdout
    t_kill = deploy.signal(signal.SIGKILL)
    status = bridge_status.wait_for(lambda s: s.tick_origin_monotonic_s + s.sim_time_s > t_kill + 10 * STALE_S,
                                    timeout_s=5.0)
    assert status.command_damping == 0 and status.command_kp_max == SPEC.kp.max()
    assert status.last_command_monotonic_s < t_kill + 0.01  # nothing arrived since: the command is held


def test_stopped_deploy_is_damped_and_handed_back_when_it_resumes(start_bridge, bridge_status, domain,
                                                                  deploys) -> None:
    start_bridge()
    deploy = _start(deploys, bridge_status, domain)
    t_stop = deploy.signal(signal.SIGSTOP)
    status = _damped_after(bridge_status, t_stop)
    latency = status.damping_since_monotonic_s - t_stop
    assert latency < 2 * STALE_S, f"damped {1e3 * latency:.0f} ms after SIGSTOP"
    time.sleep(0.5)
    # Resumed, the loop finds its deadlines missed (overrun fault → its own damping); the supervisor sees a
    # fresh stream again and hands the robot back; the robot stays damped throughout.
    # (The loop's first tick after the stop is ~0.5 s past its deadline before its write, so it sends
    # damping, not the policy command it computed: run_loop's late check. Only a stop that lands inside a
    # DDS write itself - microseconds of every 2 ms re-publish period - could still let one stale frame out
    # after SIGCONT, which is why the damping's start is bounded here rather than required unchanged.)
    t_cont = deploy.signal(signal.SIGCONT)
    assert deploy.wait_stderr("handing back", 5.0), deploy.stderr
    after = bridge_status.wait_for(lambda s: s.last_command_monotonic_s > t_cont + 0.5, timeout_s=5.0)
    assert after.command_damping == 1 and after.damping_since_monotonic_s < t_cont + 2 * STALE_S
    deploy.signal(signal.SIGTERM)
    assert deploy.wait(timeout_s=20) == 1, (deploy.stdout, deploy.stderr)  # the fault outranks the signal
    assert "overrun" in deploy.stdout
    assert deploy.wait_stderr("supervisor exits", 5.0), deploy.stderr
    summary = _supervisor_summary(deploy)
    assert summary["takeovers"] == 1 and summary["handbacks"] == 1 and summary["mode"] == "done"


def test_hung_loop_goes_silent_despite_the_republish_thread_and_is_damped(start_bridge, bridge_status,
                                                                          domain) -> None:
    """A control loop that stops writing while its process lives (a deadlock in Python, a blocking call):
    the re-publish thread stops after command_age_limit, and the supervisor damps."""
    start_bridge()
    robot = UnitreeDdsRobot(SPEC, domain_id=domain, connect_timeout_s=START_TIMEOUT_S,
                            max_command_age_s=command_age_limit(SPEC))
    supervisor = Supervisor(SPEC, domain_id=domain)
    supervisor.open()
    watcher = threading.Thread(target=supervisor.run, kwargs={"on_event": lambda _: None}, daemon=True)
    robot.connect()
    try:
        assert supervisor.wait_matched(10.0)
        watcher.start()
        hold = JointCommand.hold(robot.read().q, SPEC.kp, SPEC.kd)
        for _ in range(25):  # half a second of a 50 Hz loop
            robot.write(hold)
            time.sleep(SPEC.timing.policy_period_s)
        t_hang = time.monotonic()  # the loop stops writing; the robot object and its thread live on
        status = _damped_after(bridge_status, t_hang)
        republished = robot.commands_republished
        time.sleep(0.2)
        assert robot.commands_republished == republished, "the re-publish thread kept the stale command alive"
    finally:
        supervisor.stop()
        watcher.join(timeout=2)
        robot.close()
        supervisor.close()
    assert status.damping_since_monotonic_s - t_hang < 2 * STALE_S
    assert supervisor.state.mode is SupervisorMode.DAMPING and supervisor.state.takeovers == 1
    np.testing.assert_equal(status.command_kp_max, 0.0)


@pytest.mark.parametrize("argv, message", [
    (["--robot", "panda"], "unitree_dds"),
    (["--robot", "a1", "--stale-s", "0"], "stale_s must be a positive number"),
    (["--robot", "a1", "--match-timeout-s", "0.3"], "no reader of rt/lowcmd"),  # no robot on the domain
])
def test_supervise_refuses_in_one_line(argv, message, domain, capsys) -> None:
    from robot_rl.cli import main

    assert main(["supervise", "--domain-id", str(domain), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1] and "Traceback" not in "".join(err), err


def test_bridge_link_outage_cuts_states_and_commands_until_restored(start_bridge, bridge_status, domain) -> None:
    """SIGUSR1: both ways (states stop, commands are discarded, the motors keep the last one); SIGUSR2:
    states only. The next signal restores the link."""
    bridge = start_bridge()
    robot = UnitreeDdsRobot(SPEC, domain_id=domain, connect_timeout_s=START_TIMEOUT_S)
    robot.connect()
    try:
        robot.write(JointCommand.hold(SPEC.default_positions, SPEC.kp, SPEC.kd))
        assert bridge_status.wait_for(lambda s: s.command_kp_max > 0, 5.0).command_kp_max > 0
        bridge.proc.send_signal(signal.SIGUSR1)
        cut = bridge_status.wait_for(lambda s: s.link_down == 3, 5.0)
        assert cut.link_down == 3
        robot.write(JointCommand.damping(SPEC.num_joints, SPEC.safety.damping_kd))
        robot.read()  # the last state that left before the cut
        assert robot.wait_for_state(0.3) is None  # no state gets through
        lost = bridge_status.wait_for(lambda s: s.commands_lost > 50, 5.0)
        assert lost.commands_lost > 50 and lost.command_damping == 0 and lost.command_kp_max > 0
        bridge.proc.send_signal(signal.SIGUSR1)
        back = bridge_status.wait_for(lambda s: s.link_down == 0 and s.command_damping == 1, 5.0)
        assert back.link_down == 0 and back.command_damping == 1 and robot.wait_for_state(1.0) is not None
        bridge.proc.send_signal(signal.SIGUSR2)
        states_only = bridge_status.wait_for(lambda s: s.link_down == 1, 5.0)
        received = states_only.commands_applied
        robot.read()
        assert robot.wait_for_state(0.3) is None
        applying = bridge_status.wait_for(lambda s: s.commands_applied > received + 50, 5.0)
        assert applying.commands_applied > received + 50 and applying.commands_lost == back.commands_lost
        bridge.proc.send_signal(signal.SIGUSR2)
        assert bridge_status.wait_for(lambda s: s.link_down == 0, 5.0).link_down == 0
    finally:
        robot.close()
