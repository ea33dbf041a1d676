"""A MuJoCo robot behind Unitree's low-level DDS protocol: the runtime cannot tell it from the firmware.

The bridge publishes ``rt/lowstate`` (tick, IMU from the sim, motor q/dq/tau_est, CRC set as the
firmware sets it) and consumes ``rt/lowcmd`` as the motor firmware does: a frame with a bad CRC is
dropped (counted), the latest good frame is executed by every motor as
``tau = tau_ff + kp·(q* − q) + kd·(dq* − dq)``, clipped to the spec's effort limit, at every physics
substep (the PD runs inside ``mj_step``, see ``robot_rl.robots.mujoco_model``), until the next frame
replaces it (a motor holds its last command when the stream stops, as real drivers do). Until the first
good command the motors are passive (zero torque), as firmware in zero-torque mode; the robot starts at
the spec's default pose with its base at ``base_height``, so it sags and falls: standing it up is the
runtime's ramp.

There is no command timeout, on purpose: Unitree's low-level mode has none either. A controller that dies
or hangs leaves its last command in force for as long as the bridge runs (a kp-20 pose target stays a
kp-20 pose target), so a test against the bridge shows what would happen to the robot, and that it is
the deploy's supervisor (``robot_rl.control.supervisor``), not the bridge, that damps it.

Timing: one bridge tick per ``hardware_period_s`` (500 Hz) on fixed deadlines. Physics runs at
``hardware_period_s / ceil(hardware_period_s / physics_period_s)``: a whole number of physics steps per
tick, never coarser than the spec's physics period (A1: 2 ms hardware period, 5 ms spec physics → one
2 ms step per tick). A tick that misses its deadline still advances physics by every missed period (sim
time keeps pace with wall time, as the robot's clock does) but publishes one state. ``tick`` in
``LowState`` is milliseconds of sim time, like the firmware's millisecond counter.

Side channel: ``rt/robot_rl/sim_bridge_status`` (``SimBridgeStatus_``, 10 Hz) carries the bridge's
counters (commands received / applied / rejected for a bad CRC, states dropped, ...) and the base height
(sim ground truth). Real firmware has no such topic and the runtime never reads it; tests and people do.
Frames with a wrong ``mode_machine`` (unitree_hg) are dropped too: we assume the firmware ignores them,
which is why the SDK examples echo the robot's value. The status also says what the command in force is
(its largest kp, its smallest and largest kd, whether it is damping: kp 0 and kd > 0 on every joint; for
unitree_hg its mode_pr and how many unused motor slots it enables) and since when
(``damping_since_monotonic_s``, the ``time.monotonic()`` of the bridge tick that first applied it, so a
test or benchmark can time a takeover to the bridge tick, 2 ms, though the status comes at 10 Hz).

Link outage (run_bridge only): SIGUSR1 takes the network link down both ways - no LowState leaves, every
LowCmd that arrives is discarded - and the next SIGUSR1 brings it back; SIGUSR2 does the same for the
LowState direction only. While commands are cut off the motors keep the last one that got through, as a
robot whose cable was pulled does.

Gantry: a humanoid (``robot_rl.hardware.gantry``) starts hanging from one, as the real robot does from its
gantry, and the bridge lowers it ``gantry_release_s`` after the first position command (kp > 0) took effect: by
default the spec's ramp duration, which is when the deploy's runtime, armed by that command, hands over to the
policy. The status says whether it is still engaged (``gantry_engaged``).

Faults (``robot_rl.hardware.faults``) are decided from sim time and message indices only.

    python -m robot_rl.hardware.sim_bridge --robot a1 --domain-id 0      # or: robot-rl bridge ...
"""

import gc
import json
import math
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from functools import partial

import mujoco

from robot_rl.core.loop_timing import RateLoop
from robot_rl.core.types import JointCommand
from robot_rl.core.validate import in_range, non_negative, positive
from robot_rl.dds import CYCLONEDDS_MISSING, TOPIC_LOWCMD, TOPIC_LOWSTATE, make_participant
from robot_rl.dds.cyclone_private import delete_entities, take_serialized, write_serialized
from robot_rl.hardware.faults import FaultConfig
from robot_rl.hardware.gantry import GantryHandle, add_gantry, needs_gantry
from robot_rl.hardware.unitree_dds import MotorSlotMap, quat_to_rpy
from robot_rl.hardware.unitree_wire import CommandDecoder, StateEncoder
from robot_rl.robots.mujoco_model import build_mujoco_model
from robot_rl.robots.spec import RobotSpec, load_robot

try:
    import cyclonedds.idl as idl
    import cyclonedds.idl.annotations as annotate
    import cyclonedds.idl.types as types
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration
except ImportError as exc:  # only without the deploy extra
    raise ImportError(CYCLONEDDS_MISSING) from exc

TOPIC_BRIDGE_STATUS = "rt/robot_rl/sim_bridge_status"
COMMAND_READER_QOS = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(16))
STATE_WRITER_QOS = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(1))
STATUS_QOS = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(1))
MAX_CATCH_UP_PERIODS = 50  # physics never runs more than this many periods in one tick (a stalled process)


@dataclass
@annotate.final
@annotate.autoid("sequential")
class SimBridgeStatus_(idl.IdlStruct, typename="robot_rl.msg.dds_.SimBridgeStatus_"):
    sim_time_s: types.float64 = 0.0
    tick: types.uint32 = 0  # tick of the newest state built (published or not)
    tick_origin_monotonic_s: types.float64 = 0.0  # time.monotonic() of tick 0 (one clock for all processes)
    states_published: types.uint64 = 0
    states_dropped: types.uint64 = 0  # by the drop fault
    states_pending: types.uint32 = 0  # held back by the delay fault
    frozen: types.uint8 = 0  # freeze fault active
    commands_received: types.uint64 = 0
    commands_applied: types.uint64 = 0
    commands_bad_crc: types.uint64 = 0
    commands_rejected: types.uint64 = 0  # good CRC but not executable (non-finite, wrong mode_machine)
    command_active: types.uint8 = 0  # 0 while the motors are still passive from the start
    last_command_reserve: types.uint32 = 0  # reserve field of the command in force (a tag, see unitree_dds)
    missed_deadlines: types.uint64 = 0
    base_height_m: types.float64 = 0.0  # sim ground truth, not something the robot reports
    base_x_m: types.float64 = 0.0  # sim ground truth too: the base's world position in the ground plane
    base_y_m: types.float64 = 0.0
    command_kp_max: types.float64 = 0.0  # largest kp of the command in force (0: no position stiffness)
    command_damping: types.uint8 = 0  # the command in force is damping: kp 0 and kd > 0 on every joint
    damping_since_monotonic_s: types.float64 = 0.0  # time.monotonic() when it became damping (0: it is not)
    last_command_monotonic_s: types.float64 = 0.0  # time.monotonic() of the newest good command taken
    link_down: types.uint8 = 0  # link outage: bit 0 no states out (SIGUSR1, SIGUSR2), bit 1 commands lost (SIGUSR1)
    commands_lost: types.uint64 = 0  # commands discarded while the link was down
    command_kd_min: types.float64 = 0.0  # smallest and largest kd of the command in force (damping: damping_kd)
    command_kd_max: types.float64 = 0.0
    command_mode_pr: types.uint8 = 0  # unitree_hg: mode_pr of the command in force (0 = PR, as Unitree's examples)
    command_unused_enabled: types.uint8 = 0  # unitree_hg: motor slots driving no joint that it enables
    gantry_engaged: types.uint8 = 0  # a humanoid still hangs from the gantry (see the module docstring)


class SimBridge:
    """The bridge; ``run()`` serves until ``duration_s``, ``stop()``, or the kill fault."""

    def __init__(self, spec: RobotSpec, faults: FaultConfig | None = None, domain_id: int = 0, *,
                 network_interface: str = "lo", realtime: bool = True, mode_machine: int = 0,
                 status_period_s: float = 0.1, spin_s: float = 0.0, gantry_release_s: float | None = None) -> None:
        self.spec = spec
        self.faults = faults or FaultConfig()
        self.domain_id, self.network_interface = domain_id, network_interface
        self.realtime, self.spin_s = realtime, spin_s
        self.slot_map = MotorSlotMap.from_spec(spec)
        if isinstance(mode_machine, bool) or not isinstance(mode_machine, int) or not 0 <= mode_machine <= 0xFF:
            raise ValueError(f"sim bridge mode_machine must be an integer in 0..255 (uint8), got {mode_machine!r}")
        self.mode_machine = mode_machine
        self.period_s = spec.timing.hardware_period_s
        self.substeps = max(1, math.ceil(self.period_s / spec.timing.physics_period_s - 1e-9))
        hang = needs_gantry(spec)
        self.robot = build_mujoco_model(spec, terrain=partial(add_gantry, spec=spec) if hang else None)
        self.robot.model.opt.timestep = self.period_s / self.substeps
        self.data = self.robot.make_data()
        self.data.ctrl[:] = 0.0  # passive: zero torque until the first good LowCmd
        self.status = SimBridgeStatus_()
        self._gantry = GantryHandle(self.robot.model) if hang else None
        self.gantry_release_s = spec.safety.ramp_duration_s if gantry_release_s is None else gantry_release_s
        self._gantry_release_at: float | None = None  # sim time, set by the first position command
        self.status.gantry_engaged = int(hang)
        self.status_every = max(1, round(status_period_s / self.period_s))
        self._state_encoder = StateEncoder(self.slot_map, mode_machine)
        self._command_decoder = CommandDecoder(self.slot_map)
        self._pending: deque[tuple[float, bytes]] = deque()  # (release sim time, serialized LowState)
        self._frozen_bytes: bytes | None = None
        self._stop = threading.Event()
        self._entities: list = []
        self.states_cut = False  # link outage, toggled from signal handlers: no LowState leaves
        self.commands_cut = False  # ... every LowCmd that arrives is discarded
        self.periods = 0  # hardware periods simulated

    def describe(self) -> str:
        dt_ms = 1e3 * self.robot.model.opt.timestep
        return (f"sim bridge: robot {self.spec.name} ({self.slot_map.family.__name__.rsplit('.', 1)[-1]}), DDS "
                f"domain {self.domain_id} on {self.network_interface}, {1 / self.period_s:g} Hz, physics "
                f"{self.substeps} × {dt_ms:g} ms per tick, {'real time' if self.realtime else 'as fast as possible'}"
                f", faults: {self.faults.describe()}")

    def open(self) -> None:
        family = self.slot_map.family
        dp = make_participant(self.domain_id, self.network_interface)
        self._cmd_reader = DataReader(dp, Topic(dp, TOPIC_LOWCMD, family.LowCmd_), qos=COMMAND_READER_QOS)
        self._state_writer = DataWriter(dp, Topic(dp, TOPIC_LOWSTATE, family.LowState_), qos=STATE_WRITER_QOS)
        self._status_writer = DataWriter(dp, Topic(dp, TOPIC_BRIDGE_STATUS, SimBridgeStatus_), qos=STATUS_QOS)
        self._entities = [self._cmd_reader, self._state_writer, self._status_writer, dp]

    def close(self) -> None:
        delete_entities(self._entities)
        self._entities = []

    def stop(self) -> None:
        self._stop.set()

    # --- one tick ---------------------------------------------------------------------------------

    def _take_commands(self) -> None:
        """Execute the newest executable LowCmd, as the firmware would (frames in arrival order)."""
        s, faults = self.status, self.faults
        newest: JointCommand | None = None
        decoder = self._command_decoder
        for data in take_serialized(self._cmd_reader, 16):  # samples with data (not a controller's goodbye)
            if self.commands_cut:
                s.commands_lost += 1
                continue
            index = s.commands_received
            s.commands_received += 1
            decoder.load(data)
            if faults.corrupt_command(index):
                decoder.corrupt_crc()  # one flipped bit on the "wire"
            if not decoder.crc_ok():
                s.commands_bad_crc += 1
                continue
            command = decoder.command()
            if command is None or (self.slot_map.is_hg and decoder.mode_machine != self.mode_machine):
                s.commands_rejected += 1
                continue
            newest = command
            s.last_command_reserve = decoder.tag
            mode_pr, unused_enabled = decoder.mode_pr, decoder.unused_enabled()
        if newest is not None:
            if self._gantry is not None and self._gantry_release_at is None and newest.kp.any():
                self._gantry_release_at = self.periods * self.period_s + self.gantry_release_s
            self.robot.apply_command(self.data, newest)
            s.commands_applied += 1
            s.command_active = 1
            s.last_command_monotonic_s = now = time.monotonic()
            s.command_kp_max = float(newest.kp.max())
            s.command_kd_min, s.command_kd_max = float(newest.kd.min()), float(newest.kd.max())
            s.command_mode_pr, s.command_unused_enabled = mode_pr, unused_enabled
            damping = not newest.kp.any() and bool((newest.kd > 0).all())
            if damping and not s.command_damping:
                s.damping_since_monotonic_s = now
            elif not damping:
                s.damping_since_monotonic_s = 0.0
            s.command_damping = int(damping)

    def _publish_state(self, t: float) -> None:
        s, faults = self.status, self.faults
        tick = round(1e3 * t)
        s.tick = tick & 0xFFFFFFFF
        if faults.frozen(t) and self._frozen_bytes is not None:
            s.frozen = 1
            data = self._frozen_bytes
        else:
            state = self.robot.read_state(self.data)
            data = self._state_encoder.encode(state, tick, quat_to_rpy(state.base_quat.tolist()),
                                              corrupt_crc=faults.corrupt_state_crc)
            if faults.frozen(t):
                self._frozen_bytes = data
                s.frozen = 1
        s.link_down = int(self.states_cut) | 2 * int(self.commands_cut)
        index = s.states_published + s.states_dropped + len(self._pending)
        if self.states_cut:
            pass  # lost on the wire: not a drop-fault decision, so no index is used up
        elif faults.drop_state(index, t):
            s.states_dropped += 1
        else:
            self._pending.append((faults.release_time(t), data))
        while self._pending and self._pending[0][0] <= t + 1e-9:
            write_serialized(self._state_writer, self._pending.popleft()[1])
            s.states_published += 1
        s.states_pending = len(self._pending)

    def tick(self, periods: int = 1) -> bool:
        """Commands in, ``periods`` hardware periods of physics, one state out. False once killed."""
        self._take_commands()
        release_at = self._gantry_release_at
        if self.status.gantry_engaged and release_at is not None and self.periods * self.period_s + 1e-9 >= release_at:
            self._gantry.release(self.data)
            self.status.gantry_engaged = 0
        mujoco.mj_step(self.robot.model, self.data, nstep=min(periods, MAX_CATCH_UP_PERIODS) * self.substeps)
        self.periods += periods
        t = self.periods * self.period_s
        self.status.sim_time_s = t
        if self.faults.killed(t):
            return False
        self._publish_state(t)
        if self.periods % self.status_every < periods:
            x, y, z = self.data.xpos[self.robot.base_body_id].tolist()
            self.status.base_x_m, self.status.base_y_m, self.status.base_height_m = x, y, z
            self._status_writer.write(self.status)
        return True

    def run(self, duration_s: float | None = None) -> str:
        """Serve until ``duration_s`` of sim time, ``stop()`` or the kill fault; returns which
        ("duration", "stopped", "killed")."""
        gc.collect()
        gc.freeze()  # later collections skip the model and the DDS machinery
        # The state of sim time t leaves at wall time origin + t: each tick waits for the end of the period
        # it simulates. (perf_counter and monotonic are both CLOCK_MONOTONIC on Linux.)
        loop = RateLoop(self.period_s, spin_s=self.spin_s)
        self.status.tick_origin_monotonic_s = time.monotonic() - self.periods * self.period_s
        loop.start()
        end_periods = None if duration_s is None else self.periods + round(duration_s / self.period_s)
        periods = 1
        while not self._stop.is_set():
            if end_periods is not None and self.periods >= end_periods:
                return "duration"
            if self.realtime:
                periods = 1 + loop.wait_next().missed
                self.status.missed_deadlines = loop.stats.missed_deadlines
            if not self.tick(periods):
                return "killed"
        return "stopped"

    def summary(self) -> dict:
        return {name: getattr(self.status, name) for name in SimBridgeStatus_.__annotations__}


def run_bridge(robot: str = "a1", domain_id: int = 0, duration_s: float | None = None, drop: float = 0.0,
               delay_ms: float = 0.0, freeze_at_s: float | None = None, corrupt_crc: bool = False,
               kill_at_s: float | None = None, realtime: bool = True, corrupt_command: float = 0.0,
               network_interface: str = "lo", mode_machine: int = 0, seed: int = 0,
               gantry_release_s: float | None = None) -> int:
    """Run a MuJoCo robot behind Unitree's low-level DDS protocol (rt/lowstate, rt/lowcmd), with faults.

    Args:
        robot: robot name (hardware/robots/NAME.yaml) or path to a spec file; its interface must be unitree_dds.
        domain_id: DDS domain to serve on.
        duration_s: stop after this much sim time (default: until Ctrl-C / SIGTERM).
        drop: probability that each LowState is dropped.
        delay_ms: every LowState leaves this long after it was measured.
        freeze_at_s: from this sim time on, LowState repeats (same tick and values) at the full rate.
        corrupt_crc: every published LowState carries a bad CRC.
        kill_at_s: exit abruptly at this sim time (no goodbye on the network), as a crash would.
        realtime: pace ticks on fixed wall-clock deadlines; off: as fast as possible.
        corrupt_command: probability that an incoming LowCmd is corrupted before its CRC check.
        network_interface: interface the DDS traffic stays on (loopback for a sim).
        mode_machine: unitree_hg only: the robot variant the bridge reports (commands must echo it).
        seed: seed of the random drop / corruption decisions.
        gantry_release_s: a humanoid hangs from a gantry until this long after the first position command
            (default: the spec's ramp duration, when the deploy's policy takes over); other robots have none.

    While it runs, SIGUSR1 cuts the link both ways (no LowState out, LowCmd discarded) and SIGUSR2 cuts the
    LowState direction only; the same signal again restores it. Like the firmware it has no command timeout.
    """
    positive(duration_s=duration_s)
    non_negative(delay_ms=delay_ms, freeze_at_s=freeze_at_s, kill_at_s=kill_at_s, seed=seed,
                 gantry_release_s=gantry_release_s)
    in_range(0.0, 1.0, drop=drop, corrupt_command=corrupt_command)
    in_range(0, 232, domain_id=domain_id)  # the DDS specification's domain ids
    in_range(0, 255, mode_machine=mode_machine)  # a uint8 in LowState
    spec = load_robot(robot)
    faults = FaultConfig(drop_probability=drop, delay_s=1e-3 * delay_ms, freeze_at_s=freeze_at_s,
                         corrupt_state_crc=corrupt_crc, corrupt_command_probability=corrupt_command,
                         kill_at_s=kill_at_s, seed=seed)
    bridge = SimBridge(spec, faults, domain_id, network_interface=network_interface, realtime=realtime,
                       mode_machine=mode_machine, gantry_release_s=gantry_release_s)
    print(bridge.describe(), flush=True)
    bridge.open()
    in_main_thread = threading.current_thread() is threading.main_thread()  # only it may set signal handlers
    previous = {sig: signal.signal(sig, lambda *_: bridge.stop())
                for sig in (signal.SIGINT, signal.SIGTERM) if in_main_thread}

    def toggle_link(*_: object) -> None:  # both ways
        bridge.states_cut = bridge.commands_cut = not (bridge.states_cut or bridge.commands_cut)

    def toggle_states(*_: object) -> None:
        bridge.states_cut = not bridge.states_cut

    if in_main_thread:
        previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, toggle_link)
        previous[signal.SIGUSR2] = signal.signal(signal.SIGUSR2, toggle_states)
    try:
        reason = bridge.run(duration_s)
        print(f"sim bridge {reason} at t={bridge.status.sim_time_s:.3f} s: {json.dumps(bridge.summary())}",
              flush=True)
        if reason == "killed":
            sys.stderr.flush()
            os._exit(0)  # a crash: no DDS goodbye, no cleanup
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        bridge.close()
    return 0


def main() -> int:
    import tyro

    return tyro.cli(run_bridge)


if __name__ == "__main__":
    sys.exit(main())

