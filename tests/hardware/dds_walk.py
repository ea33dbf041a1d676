"""A walk in two processes over loopback DDS, as on the robot, for the G1 and Go2 walk tests: ``robot-rl bridge``
(MuJoCo behind Unitree's topics) and ``robot-rl deploy --interface unitree-dds`` with a policy, while this process
taps the firmware's view: every ``rt/lowcmd`` on the domain, decoded with the bridge's own decoder (CRC,
mode_machine, the spec's motor slots), plus the raw fields of the motor slots that drive no joint of the spec, so
a test can check what the deploy sent to every motor of the robot; and the bridge's status (sim ground truth)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_rl.core.loop_timing import fifo_scheduling
from robot_rl.robots.spec import RobotSpec


@dataclass(frozen=True)
class ReceivedCommand:
    t: float  # time.monotonic() when this process took it off the wire
    q: np.ndarray  # what the spec's motors execute (CommandDecoder.command), in spec joint order
    kp: np.ndarray
    kd: np.ndarray
    unused_modes: np.ndarray  # the raw mode of each slot that drives no spec joint (slot_map.unused)
    unused: np.ndarray  # their raw q, dq, kp, kd, tau: shape (5, len(slot_map.unused))
    mode: tuple[int, int]  # unitree_hg's mode_machine and mode_pr ((0, 0) for unitree_go)


class LowCmdTap:
    """Every rt/lowcmd on ``domain`` while entered, in arrival order; ``bad`` counts frames with a bad CRC or
    that the firmware would not execute (a non-finite value)."""

    def __init__(self, spec: RobotSpec, domain: int) -> None:
        from cyclonedds.qos import Policy, Qos
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        from robot_rl.dds import TOPIC_LOWCMD, make_participant
        from robot_rl.hardware.unitree_dds import MotorSlotMap
        from robot_rl.hardware.unitree_wire import CommandDecoder

        self.slot_map = MotorSlotMap.from_spec(spec)
        participant = make_participant(domain, "lo")
        self._reader = DataReader(participant, Topic(participant, TOPIC_LOWCMD, self.slot_map.family.LowCmd_),
                                  qos=Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(256)))
        self._decoder = CommandDecoder(self.slot_map)
        view = self._decoder.codec.view
        self._unused = np.array(self.slot_map.unused, dtype=np.intp)
        self._columns = tuple(view(f"motor_cmd.{c}") for c in ("q", "dq", "kp", "kd", "tau"))
        self._unused_modes = tuple(view(f"motor_cmd[{s}].mode") for s in self.slot_map.unused)
        self.received: list[ReceivedCommand] = []
        self.bad = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from robot_rl.dds.cyclone_private import take_serialized

        while not self._stop.wait(0.005):
            now = time.monotonic()
            for data in take_serialized(self._reader, 256):
                self._decoder.load(data)
                command = self._decoder.command() if self._decoder.crc_ok() else None
                if command is None:
                    self.bad += 1
                    continue
                self.received.append(ReceivedCommand(
                    now, command.q_target.copy(), command.kp.copy(), command.kd.copy(),
                    np.array([int(m) for m in self._unused_modes]),
                    np.array([column[self._unused].astype(np.float64) for column in self._columns]),
                    (self._decoder.mode_machine, self._decoder.mode_pr)))

    def columns(self) -> tuple[np.ndarray, ...]:
        """t, q, kp, kd (one row per command), the unused slots' modes and raw fields (rows × 5 × slots) and
        mode_machine, mode_pr (rows × 2)."""
        r = self.received
        return (np.array([c.t for c in r]), np.array([c.q for c in r]), np.array([c.kp for c in r]),
                np.array([c.kd for c in r]), np.array([c.unused_modes for c in r]), np.array([c.unused for c in r]),
                np.array([c.mode for c in r]))

    def __enter__(self) -> LowCmdTap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


def end_deploy(proc: subprocess.Popen, out: str) -> None:
    """Kill the deploy if it still runs, and the supervisor it started (not our child) if that does."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
    found = re.search(r"supervisor: pid (\d+)", out)
    if found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(found.group(1)), signal.SIGKILL)


FIFO_PRIORITY = 10  # as test_deploy_e2e: the bridge, the deploy and this tap under SCHED_FIFO where allowed


@dataclass(frozen=True)
class DdsWalk:
    returncode: int  # the deploy's
    out: str
    err: str
    tap: LowCmdTap
    first_status: object  # the bridge's, before the deploy started
    statuses: list  # every SimBridgeStatus_ from first_status until the deploy ended

    def policy_window(self, ramp_s: float) -> tuple[np.ndarray, float, int]:
        """Which received commands the policy sent (arrival order), the arrival time of the first position
        command (kp > 0: the deploy armed and its ramp began), and the index of the last one (after it: damping).

        The policy drives from ramp_s after the first position command until the damping at the end; 0.1 s margin
        after the handover. By arrival order, not time: a damping frame can share the last batch's arrival time."""
        t, _, kp, *_ = self.tap.columns()
        positioned = np.flatnonzero(kp.any(axis=1))
        assert positioned.size, "no position command reached the bridge"
        armed = t[positioned[0]]
        assert (~kp[positioned[-1] + 1:].any(axis=1)).all(), "a position command after the damping"
        return (t > armed + ramp_s + 0.1) & (np.arange(len(t)) <= positioned[-1]), armed, int(positioned[-1])

    @staticmethod
    def status_time(status) -> float:
        """A bridge status's time on this machine's time.monotonic() clock (the tap's)."""
        return status.tick_origin_monotonic_s + status.sim_time_s


def walk_over_dds(spec: RobotSpec, policy: Path, domain: int, start_bridge, bridge_status, tmp_path: Path, *,
                  vx: float, walk_s: float, bridge_args: tuple[str, ...] = ()) -> DdsWalk:
    """Start the bridge for ``spec`` (by name: both processes load the shipped spec) with ``bridge_args``, wait
    for its first status, then run the deploy with ``policy`` at forward command ``vx`` for the ramp +
    ``walk_s`` and collect what the tap and the status saw."""
    ramp_s = spec.safety.ramp_duration_s
    deploy_cmd = [sys.executable, "-m", "robot_rl.cli", "deploy", "--robot", spec.name, "--interface", "unitree-dds",
                  "--domain-id", str(domain), "--policy", str(policy), "--duration-s", f"{ramp_s + walk_s:g}",
                  "--command", f"{vx:g}", "0", "0", "--fifo-priority", str(FIFO_PRIORITY)]
    with fifo_scheduling(FIFO_PRIORITY), LowCmdTap(spec, domain) as tap:
        start_bridge("--robot", spec.name, *bridge_args, duration_s=90)
        first = bridge_status.wait_for(lambda s: s.sim_time_s > 0.5, timeout_s=30.0)
        assert first is not None, "no status from the bridge"
        statuses = [first]
        out_path, err_path = tmp_path / "deploy.out", tmp_path / "deploy.err"
        with out_path.open("w") as out_file, err_path.open("w") as err_file:
            proc = subprocess.Popen(deploy_cmd, stdout=out_file, stderr=err_file, text=True)
            try:
                deadline = time.monotonic() + 60.0 + ramp_s + walk_s
                while proc.poll() is None and time.monotonic() < deadline:
                    statuses += [s for s in bridge_status.reader.take(N=16) if s.sample_info.valid_data]
                    time.sleep(0.02)
            finally:
                end_deploy(proc, out_path.read_text())
        statuses += [s for s in bridge_status.reader.take(N=16) if s.sample_info.valid_data]
    return DdsWalk(proc.returncode, out_path.read_text(), err_path.read_text(), tap, first, statuses)
