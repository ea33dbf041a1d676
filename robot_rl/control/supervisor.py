"""``robot-rl supervise``: a watchdog process that damps a Unitree robot when its controller stops commanding.

On Unitree low-level mode the motors execute the last ``LowCmd`` forever. ``robot-rl deploy`` ends every
run it *can* end in damping (signals included), but a controller that is killed (SIGKILL, the OOM killer),
crashes (a segfault) or hangs (SIGSTOP, a deadlock) sends nothing more, and its last command may be a kp-20
position target. The supervisor is a second, small process that subscribes to ``rt/lowcmd`` - the stream
the robot executes - and when that stream has been silent for the robot's stale limit, and its last
command is not damping already, it publishes the damping command (kp 0, kd = the spec's ``damping_kd``) on
``rt/lowcmd`` itself, every hardware period, until a controller commands again (see
``robot_rl.safety.supervisor`` for the decision logic and why it watches the stream, not a heartbeat).

``robot-rl deploy --interface unitree-dds`` starts one for every run, in its own session (so the
terminal's Ctrl-C and hang-up do not reach it), and talks to it over its stdin: the supervisor says
``supervisor ready`` once its command writer has matched a reader (the robot), deploy writes ``release``
after its own damping ticks, and deploy's death shows up as end-of-file. Run it on its own next to any
controller that speaks ``rt/lowcmd`` (it then watches until Ctrl-C / SIGTERM):

    robot-rl supervise --robot a1 --domain-id 0

Cost: it never deserializes the 500 Hz stream it watches (it takes the raw samples and notes that one
arrived). A ``unitree_hg`` command (G1, H1-2) echoes the ``mode_machine`` the robot reports, as Unitree's
examples do (the sim bridge drops any other value, as we assume the firmware does), so the damping command
carries the robot's own: the supervisor also subscribes to ``rt/lowstate`` (keep last 1, decoded only at a
takeover) and falls back to the controller's last command's value while no state has come.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from robot_rl.core.errors import RobotRLError
from robot_rl.core.types import JointCommand
from robot_rl.dds import CYCLONEDDS_MISSING, TOPIC_LOWCMD, TOPIC_LOWSTATE, make_participant
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.crc import crc_ok, with_crc
from robot_rl.dds.cyclone_private import delete_entities, serialize_for, take_serialized, write_serialized
from robot_rl.hardware.unitree_dds import COMMAND_QOS, MotorSlotMap, connection_hints
from robot_rl.hardware.unitree_wire import StateDecoder
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.safety.supervisor import (
    SupervisorInput,
    SupervisorLimits,
    SupervisorMode,
    SupervisorState,
    supervise_step,
)

try:
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
except ImportError as exc:  # only without the deploy extra
    raise ImportError(CYCLONEDDS_MISSING) from exc

READY = "supervisor ready"
WATCH_PERIOD_S = 0.01  # poll of rt/lowcmd while the controller commands
RELEASE = "release"
# Best-effort keep-last 1 matches reliable and best-effort writers; IgnoreLocal: our own damping frames must
# not look like a controller that is alive.
WATCH_QOS = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(1), Policy.IgnoreLocal.Participant)
STATE_QOS = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(1))  # the robot's newest LowState only


class SupervisorError(RobotRLError, RuntimeError):
    """The supervisor could not start or watch (no robot reader matched, a bad argument)."""


def say(text: str) -> None:
    """Print to stderr; a terminal that hung up (EIO) or a closed pipe must never stop the watchdog."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


class ControlChannel:
    """The controller's side of the pipe on stdin: ``release`` once it ended cleanly; end-of-file when its
    process is gone (the kernel closes the pipe when deploy dies, however it dies)."""

    def __init__(self, stream) -> None:
        self.released = threading.Event()
        self.gone = threading.Event()
        self._stream = stream
        threading.Thread(target=self._read, daemon=True, name="supervisor-control").start()

    def _read(self) -> None:
        try:
            for line in self._stream:
                if line.strip() == RELEASE:
                    self.released.set()
        except (OSError, ValueError):
            pass
        self.gone.set()


class Supervisor:
    """Watch ``rt/lowcmd``; damp when it goes stale. ``run()`` until DONE or ``stop()``."""

    def __init__(self, spec: RobotSpec, domain_id: int | None = None, network_interface: str | None = None,
                 limits: SupervisorLimits | None = None) -> None:
        self.spec = spec
        self.slot_map = MotorSlotMap.from_spec(spec)
        iface = spec.interface
        self.domain_id = iface.domain_id if domain_id is None else domain_id
        self.network_interface = iface.network_interface if network_interface is None else network_interface
        self.limits = limits or SupervisorLimits.from_spec(spec)
        self.period_s = spec.timing.hardware_period_s
        # Watching needs no 500 Hz loop (a 500 Hz Python loop costs ~15 % of a core here): a 10 ms poll adds at
        # most 10 ms to a takeover that waits 100 ms for the stale limit anyway.
        self.watch_period_s = max(self.period_s, WATCH_PERIOD_S)
        self.state = SupervisorState()
        self.damping_sent = 0
        self._stop = threading.Event()
        self._entities: list = []
        self._newest: bytes | None = None  # raw bytes of the newest controller command
        self._damping: bytes | None = None
        self._damping_msg: object | None = None
        self._newest_damping: tuple[bytes, bool] | None = None  # (the sample it was decoded from, result)
        self._state_reader: DataReader | None = None  # unitree_hg: rt/lowstate, for the robot's mode_machine
        self.robot_mode_machine: int | None = None  # as the robot's newest good LowState reported it

    def describe(self) -> str:
        return (f"supervisor: robot {self.spec.name}, DDS domain {self.domain_id} on {self.network_interface}, "
                f"damping (kd {self.spec.safety.damping_kd:g}) after {1e3 * self.limits.stale_s:.0f} ms without "
                f"{TOPIC_LOWCMD}, pid {os.getpid()}")

    def open(self) -> None:
        family = self.slot_map.family
        dp = make_participant(self.domain_id, self.network_interface)
        topic = Topic(dp, TOPIC_LOWCMD, family.LowCmd_)
        self._reader = DataReader(dp, topic, qos=WATCH_QOS)
        self._writer = DataWriter(dp, topic, qos=COMMAND_QOS)
        self._entities = [self._reader, self._writer, dp]
        if self.slot_map.is_hg:
            self._state_reader = DataReader(dp, Topic(dp, TOPIC_LOWSTATE, family.LowState_), qos=STATE_QOS)
            self._state_decoder = StateDecoder(self.slot_map)
            self._entities.insert(0, self._state_reader)

    def close(self) -> None:
        entities, self._entities = self._entities, []
        self._reader = self._writer = self._state_reader = None
        delete_entities(entities)

    def stop(self) -> None:
        self._stop.set()

    def wait_matched(self, timeout_s: float) -> bool:
        """Wait until our command writer has matched a reader (the robot's), so a takeover reaches it."""
        deadline = time.monotonic() + timeout_s
        while not self._writer.get_matched_subscriptions():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _poll(self) -> bool:
        """Take every controller command that arrived (raw, not deserialized); True when any did."""
        got = False
        for data in take_serialized(self._reader, 64):  # samples with data only, not a writer's goodbye
            self._newest, got = data, True
        return got

    def mode_machine(self) -> int:
        """unitree_hg: the ``mode_machine`` to echo, as the robot's newest LowState with a good CRC reports
        it; before any such state, the newest controller command's (it echoed the robot's), else 0."""
        for data in take_serialized(self._state_reader, 1):
            if self._state_decoder.load(data):
                self.robot_mode_machine = self._state_decoder.mode_machine
        if self.robot_mode_machine is not None:
            return self.robot_mode_machine
        if self._newest is not None:
            return int(self.slot_map.family.LowCmd_.deserialize(self._newest).mode_machine)
        return 0

    def damping_bytes(self) -> bytes:
        """The damping LowCmd as the controller itself would send it (CRC set): kp 0 and the spec's
        ``damping_kd`` on every spec joint's slot, the other slots passive; unitree_hg: ``mode_pr`` as
        Unitree's examples (PR) and the robot's ``mode_machine`` (:meth:`mode_machine`)."""
        msg = self.slot_map.blank_command()
        self.slot_map.encode_command(JointCommand.damping(self.spec.num_joints, self.spec.safety.damping_kd), msg)
        if self.slot_map.is_hg:
            msg.mode_machine, msg.mode_pr = self.mode_machine(), hg.MODE_PR
        self._damping_msg = msg  # what the bytes encode (the public-API write path sends the message)
        return serialize_for(self._writer, with_crc(msg))

    def newest_is_damping(self) -> bool:
        """Whether the newest controller command is a damping command, as the firmware reads it (CRC
        good, every spec joint kp 0 and kd > 0). Decoded only when the stream has gone stale."""
        if self._newest is None:
            return False
        if self._newest_damping is None or self._newest_damping[0] is not self._newest:
            msg = self.slot_map.family.LowCmd_.deserialize(self._newest)
            command = self.slot_map.decode_command(msg) if crc_ok(msg) else None
            damping = command is not None and not command.kp.any() and bool((command.kd > 0).all())
            self._newest_damping = (self._newest, damping)
        return self._newest_damping[1]

    def step(self, now: float, control: ControlChannel | None = None) -> str | None:
        """Observe, decide, act once; returns the decision's event (for a person) or None."""
        arrival = now if self._poll() else None
        s = self.state
        stale = (arrival is None and s.mode is SupervisorMode.WATCHING and s.last_command_s is not None
                 and now - s.last_command_s > self.limits.stale_s)
        inp = SupervisorInput(now, arrival, controller_gone=control is not None and control.gone.is_set(),
                              released=control is not None and control.released.is_set(),
                              last_command_damping=stale and self.newest_is_damping())
        decision = supervise_step(self.limits, self.state, inp)
        if decision.send_damping:
            if self._damping is None or self.state.mode is not SupervisorMode.DAMPING:
                self._damping = self.damping_bytes()  # at each takeover: the robot (hg's mode_machine) may have changed
            write_serialized(self._writer, self._damping, self._damping_msg)
            self.damping_sent += 1
        self.state = decision.state
        return decision.event

    def run(self, control: ControlChannel | None = None, on_event: Callable[[str], None] = say) -> SupervisorState:
        """Step every ``watch_period_s`` while watching, every hardware period while damping (the stream rate
        the firmware expects), on fixed deadlines, until DONE or ``stop()``."""
        deadline = time.monotonic()
        while True:
            deadline += self.period_s if self.state.mode is SupervisorMode.DAMPING else self.watch_period_s
            delay = deadline - time.monotonic()
            if delay < 0:  # late (a loaded machine): step now and take the grid from here
                deadline -= delay
            if self._stop.wait(max(0.0, delay)):
                break
            now = time.monotonic()
            event = self.step(now, control)
            if event is not None:
                on_event(f"supervisor: {event} (t={now:.3f})")
            if self.state.mode is SupervisorMode.DONE:
                break
        return self.state

    def summary(self) -> dict:
        s = self.state
        return {"mode": s.mode.value, "takeovers": s.takeovers, "handbacks": s.handbacks,
                "damping_sent": self.damping_sent}


def supervise(robot: str = "a1", domain_id: int | None = None, network_interface: str | None = None,
              stale_s: float | None = None, match_timeout_s: float = 10.0, control_stdin: bool = False,
              fifo_priority: int | None = None) -> int:
    """Watch rt/lowcmd and send damping when the controller stops commanding (a crash, a kill, a hang).

    Sends nothing while a controller commands; takes over after the robot's stale limit without a command
    (stale_state_periods policy periods) and keeps sending damping until a controller has commanded again,
    without a gap, for as long. Runs until Ctrl-C / SIGTERM / SIGHUP (then exits; the robot keeps the last
    command, damping if it took over).

    Args:
        robot: robot name (hardware/robots/NAME.yaml) or spec file; its interface must be unitree_dds.
        domain_id: DDS domain (default: the spec's interface.domain_id).
        network_interface: network interface for DDS (default: the spec's interface.network_interface).
        stale_s: take over after this long without a command (default: the spec's stale-state limit).
        match_timeout_s: how long to wait for a reader of rt/lowcmd (the robot) before giving up.
        control_stdin: started by `robot-rl deploy`: stdin is its pipe (a `release` line ends the watch
            cleanly; end-of-file means the controller died).
        fifo_priority: run under SCHED_FIFO at this priority; above the controller's, so that a busy
            controller (or anything else at its priority) cannot starve the watchdog (refused: a warning).
    """
    try:
        spec = load_robot(robot)
        limits = SupervisorLimits.from_spec(spec)
        if stale_s is not None:
            limits = SupervisorLimits(stale_s=stale_s, handback_s=stale_s)
        supervisor = Supervisor(spec, domain_id, network_interface, limits)
    except ValueError as exc:
        raise SupervisorError(str(exc)) from None
    if fifo_priority is not None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo_priority))
        except (OSError, ValueError) as exc:
            say(f"warning: supervisor SCHED_FIFO {fifo_priority} refused ({exc}); normal priority")
    supervisor.open()
    stop_signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, lambda *_: supervisor.stop()) for sig in stop_signals}
    try:
        say(supervisor.describe())
        if not supervisor.wait_matched(match_timeout_s):
            raise SupervisorError(f"no reader of {TOPIC_LOWCMD} (the robot) on DDS domain {supervisor.domain_id} "
                                  f"({supervisor.network_interface}) within {match_timeout_s:g} s. Possible causes: "
                                  + connection_hints(supervisor.network_interface))
        control = ControlChannel(sys.stdin) if control_stdin else None
        try:
            print(READY, flush=True)
            os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # nobody reads stdout after this line
        except OSError:
            pass
        state = supervisor.run(control)
        say(f"supervisor exits in {state.mode.value}: {json.dumps(supervisor.summary())}")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        supervisor.close()
    return 0


class SupervisorProcess:
    """A supervisor started by ``robot-rl deploy``: its own session, stdin = our pipe, stderr = ours."""

    def __init__(self, robot: str, domain_id: int | None, network_interface: str | None,
                 fifo_priority: int | None = None) -> None:
        cmd = [sys.executable, "-m", "robot_rl.control.supervisor", "--robot", robot, "--control-stdin"]
        if fifo_priority is not None:
            cmd += ["--fifo-priority", str(fifo_priority)]
        if domain_id is not None:
            cmd += ["--domain-id", str(domain_id)]
        if network_interface is not None:
            cmd += ["--network-interface", network_interface]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.released = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the supervisor watches; SupervisorError when it exits or stays silent instead."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != READY:
            self.kill()
            raise SupervisorError(f"the supervisor (pid {self.pid}) did not start within {timeout_s:g} s"
                                  + (f" (exit status {self.proc.returncode})" if self.proc.returncode else "")
                                  + "; pass --no-supervisor to run without one")
        self.proc.stdout.close()

    def release(self, timeout_s: float = 2.0) -> None:
        """Our damping went out: tell the supervisor it may go, and reap it."""
        self.released = True
        try:
            self.proc.stdin.write(RELEASE + "\n")
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def main() -> int:
    import tyro

    try:
        return tyro.cli(supervise)
    except RobotRLError as exc:
        say(f"error: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
