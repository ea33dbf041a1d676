"""The G1 walks over loopback DDS in two processes, as on the robot: ``robot-rl bridge --robot g1`` (Unitree's
29-DoF model behind unitree_hg, hanging from its gantry until the policy takes over) and ``robot-rl deploy --robot
g1 --interface unitree-dds`` with Unitree's pretrained legs-only G1 policy, imported into this test's tmp dir.

Checked on the bridge's side of the wire: this process reads every rt/lowcmd the bridge gets and decodes it with
the bridge's own decoder (CRC, mode_machine, the 29 motors); while the policy drives, every one holds the 17 waist
and arm motors at their default pose with their spec gains. The bridge's status (sim ground truth the deploy never
sees) says the gantry let go and how far the pelvis went: at least 1 m forward in 10 s, without a fall.
Needs ../shared/external (Unitree's model and policy); skipped where absent."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from robot_rl.core.loop_timing import fifo_scheduling
from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.spec import load_robot

EXTERNAL = Path(__file__).resolve().parents[2].parent / "shared" / "external"
UNITREE_CONFIG = EXTERNAL / "unitree_rl_gym" / "deploy" / "deploy_mujoco" / "configs" / "g1.yaml"
G1 = load_robot("g1")
WALK_S = 10.0
FIFO_PRIORITY = 10  # as test_deploy_e2e: the bridge, the deploy and this reader under SCHED_FIFO where allowed


class LowCmdTap:
    """Every rt/lowcmd on the domain, decoded as the bridge decodes it, with its arrival time.monotonic()."""

    def __init__(self, domain: int) -> None:
        from cyclonedds.qos import Policy, Qos
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        from robot_rl.dds import TOPIC_LOWCMD, make_participant
        from robot_rl.hardware.unitree_dds import MotorSlotMap
        from robot_rl.hardware.unitree_wire import CommandDecoder

        slot_map = MotorSlotMap.from_spec(G1)
        participant = make_participant(domain, "lo")
        self._reader = DataReader(participant, Topic(participant, TOPIC_LOWCMD, slot_map.family.LowCmd_),
                                  qos=Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(256)))
        self._decoder = CommandDecoder(slot_map)
        self.received: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []  # (t, q, kp, kd)
        self.bad = 0  # bad CRC or not executable
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
                else:
                    self.received.append((now, command.q_target.copy(), command.kp.copy(), command.kd.copy()))

    def __enter__(self) -> LowCmdTap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


def _end(proc: subprocess.Popen, out: str) -> None:
    """Kill the deploy if it still runs, and the supervisor it started (not our child) if that does."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
    found = re.search(r"supervisor: pid (\d+)", out)
    if found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(found.group(1)), signal.SIGKILL)


def test_deploy_walks_the_g1_over_dds_with_every_non_policy_motor_held(start_bridge, bridge_status, domain,
                                                                        tmp_path) -> None:
    if not UNITREE_CONFIG.is_file():
        pytest.skip(f"Unitree's G1 policy not present under {EXTERNAL} (../shared/external)")
    missing = model_source_missing(G1)
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")
    pytest.importorskip("torch")  # the importer reads the TorchScript archive
    from robot_rl.policy.importers.convert import convert

    policy = tmp_path / "unitree_g1.onnx"
    convert(UNITREE_CONFIG, None, "g1", "g1-flat", policy, ())
    ramp_s = G1.safety.ramp_duration_s
    deploy_cmd = [sys.executable, "-m", "robot_rl.cli", "deploy", "--robot", "g1", "--interface", "unitree-dds",
                  "--domain-id", str(domain), "--policy", str(policy), "--duration-s", f"{ramp_s + WALK_S:g}",
                  "--command", "0.5", "0", "0", "--fifo-priority", str(FIFO_PRIORITY)]
    with fifo_scheduling(FIFO_PRIORITY), LowCmdTap(domain) as tap:
        start_bridge("--robot", "g1", duration_s=90)
        hanging = bridge_status.wait_for(lambda s: s.sim_time_s > 0.5, timeout_s=30.0)
        assert hanging is not None and hanging.gantry_engaged == 1 and not hanging.command_active, hanging
        statuses = [hanging]
        out_path, err_path = tmp_path / "deploy.out", tmp_path / "deploy.err"
        with out_path.open("w") as out_file, err_path.open("w") as err_file:
            proc = subprocess.Popen(deploy_cmd, stdout=out_file, stderr=err_file, text=True)
            try:
                deadline = time.monotonic() + 60.0 + ramp_s + WALK_S
                while proc.poll() is None and time.monotonic() < deadline:
                    statuses += [s for s in bridge_status.reader.take(N=16) if s.sample_info.valid_data]
                    time.sleep(0.02)
            finally:
                _end(proc, out_path.read_text())
        statuses += [s for s in bridge_status.reader.take(N=16) if s.sample_info.valid_data]
    out, err = out_path.read_text(), err_path.read_text()
    assert proc.returncode == 0, f"deploy exited {proc.returncode}\n{out}\n{err}"
    assert tap.bad == 0

    # The policy's window, on the wire: the ramp starts with the first position command; the policy drives from
    # ramp_s later until the damping at the end (kp 0). A margin of 0.1 s either side of the handover.
    t, q, kp, kd = (np.array([r[i] for r in tap.received]) for i in range(4))
    positioned = np.flatnonzero(kp.any(axis=1))
    assert positioned.size, "no position command reached the bridge"
    armed, last = t[positioned[0]], t[positioned[-1]]
    assert (~kp[positioned[-1] + 1:].any(axis=1)).all()  # after the walk: damping only
    walking = (t > armed + ramp_s + 0.1) & (np.arange(len(t)) <= positioned[-1])  # arrival order, not batch time
    assert walking.sum() > 50 * WALK_S, f"{walking.sum()} LowCmds while the policy drove"
    held = np.arange(12, G1.num_joints)
    np.testing.assert_array_equal(q[walking][:, held], np.tile(G1.default_positions[held].astype(np.float32),
                                                               (walking.sum(), 1)))
    np.testing.assert_array_equal(kp[walking], np.tile(G1.kp.astype(np.float32), (walking.sum(), 1)))
    np.testing.assert_array_equal(kd[walking], np.tile(G1.kd.astype(np.float32), (walking.sum(), 1)))
    legs_moved = np.abs(q[walking][:, :12] - G1.default_positions[:12]).max()
    assert legs_moved > 0.1, f"the legs never left their default pose ({legs_moved:.3f} rad): no policy drove"

    # Sim ground truth: the gantry let go at the handover, then the pelvis walked off without falling.
    def at(s) -> float:
        return s.tick_origin_monotonic_s + s.sim_time_s

    released = [s for s in statuses if s.command_active and not s.gantry_engaged]
    assert released, "the gantry was never released"
    assert abs(at(released[0]) - (armed + ramp_s)) < 0.3, (at(released[0]) - armed, ramp_s)
    free = [s for s in released if at(s) <= last]
    assert min(s.base_height_m for s in free) > 0.6 * G1.sim_model.base_height, "the G1 fell"
    forward = free[-1].base_x_m - free[0].base_x_m  # the gantry held it facing +x until the handover
    assert forward >= 1.0, f"walked {forward:.2f} m forward in {WALK_S:g} s"
