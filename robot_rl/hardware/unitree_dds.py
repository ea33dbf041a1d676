"""Unitree low-level control over Cyclone DDS: ``rt/lowstate`` in, ``rt/lowcmd`` out.

``UnitreeDdsRobot`` implements the RobotInterface for the ``unitree_go`` (Go2, B2, and our A1 sim bridge)
and ``unitree_hg`` (G1, H1-2) message families. Motor slots are mapped to the spec's joints by NAME
(``spec.interface.motor_slots``), never by position; unused slots get the family's passive values.

Reading and writing (the control loop never waits on DDS):

- ``read()`` takes the newest ``LowState`` from the DDS reader's cache (keep-last 1, a non-blocking
  ``take`` of the serialized sample), drops it if its CRC is wrong (counted), decodes it and returns it; when
  nothing new has arrived it returns the last state again, however old: staleness is the safety chain's job
  (``tick`` / ``timestamp``). Decoding is the struct codec (``robot_rl.hardware.unitree_wire``: ≈ 8 µs with
  the CRC check, against ≈ 250 µs for Cyclone's Python IDL classes), and only the sample read is decoded,
  not all 500 per second. ``timestamp`` is ``time.monotonic()`` when the sample was taken: the arrival time
  for ``wait_for_state()``, at most one hardware period (2 ms) after arrival for a loop that calls
  ``read()`` while states flow. ``read()`` / ``wait_for_state()`` belong to one control thread.
- ``write()`` builds the serialized ``LowCmd`` (CRC set, floats rounded to float32 as on the wire) once,
  publishes it immediately and stores the bytes; a re-publish thread sends the latest bytes every
  ``spec.timing.hardware_period_s`` (500 Hz) on fixed deadlines, as the firmware expects a steady
  stream. It skips a deadline when ``write()`` published less than half a period before. Encoding goes
  through the struct codec (≈ 18 µs with the CRC, against ≈ 180 µs for the IDL classes: figures in
  benchmarks/results/RESULTS_dds_latency.md); re-sending the stored bytes costs only the DDS write. With
  ``max_command_age_s`` it stops re-sending a command that ``write()`` has not renewed for that long: a hung
  control loop then goes silent on ``rt/lowcmd`` instead of being hidden by this thread, and the supervisor
  (``robot_rl.control.supervisor``), which watches that stream, damps the robot.

QoS: ``LowState`` is read best-effort, keep-last 1 (only the newest state matters; best-effort matches
both reliable and best-effort writers); ``LowCmd`` is written reliable, keep-last 1 (matches readers of
either kind, and keep-last never blocks the writer).

Before low-level control (see hardware/README.md):

- Go2 (``release_step: sport_mode``): Unitree's sport mode (its own locomotion controller) ignores and
  overrides ``rt/lowcmd`` until released, in the Unitree app or with the SDK's motion-switcher client
  (query the active mode, release it, repeat until none is active). Release it with the robot lying down
  or hoisted: it goes limp. This class does not switch modes; it connects to a robot already released.
- G1 (``release_step: debug_mode``): boot hoisted, wait for zero-torque mode, then L2+R2 on the remote
  enters debug mode (Unitree's balance controller off, joints damped). Every ``unitree_hg`` command echoes
  ``mode_machine`` from the latest ``LowState`` (it names the robot variant, and the SDK examples copy it
  for that reason) and sends ``mode_pr`` = 0 (PR: ankle/waist as pitch/roll joints, the spec's joints).

Nothing here stops the robot when the process ends: the runtime must send damping before ``close()``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.core.loop_timing import RateLoop
from robot_rl.core.types import JointCommand, RobotState
from robot_rl.dds import CYCLONEDDS_MISSING, LOOPBACK_INTERFACES, TOPIC_LOWCMD, TOPIC_LOWSTATE, make_participant
from robot_rl.dds import unitree_go as go
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.cyclone_private import (
    delete_entities,
    take_serialized,
    write_serialized,
)
from robot_rl.hardware.unitree_wire import CommandEncoder, StateDecoder, wire_values
from robot_rl.robots.spec import RobotSpec, UnitreeDdsInterfaceSpec
from robot_rl.typed_yaml import ConfigError

try:
    from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration
except ImportError as exc:  # only without the deploy extra
    raise ImportError(CYCLONEDDS_MISSING) from exc

log = logging.getLogger(__name__)

FAMILIES: dict[str, ModuleType] = {"unitree_go": go, "unitree_hg": hg}
STATE_QOS = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(1))
COMMAND_QOS = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(1))
# unitree_go's "ignore this target" sentinels; anything this large is treated as one.
_POS_STOP_MIN, _VEL_STOP_MIN = 0.5 * go.POS_STOP_F, 0.5 * go.VEL_STOP_F


class RobotConnectionError(RobotRLError, ConnectionError):
    """No robot answered; the message names topic, family, domain and interface."""


def connection_hints(network_interface: str, release_step: str = "none") -> str:
    """Why no state may have arrived, for a person: every cause we know of, not just domain and interface."""
    loopback = network_interface in LOOPBACK_INTERFACES
    hints = ["no robot runs on that DDS domain (is the robot on, or `robot-rl bridge` running with the same "
             "--domain-id?)",
             "the publisher uses another message family (unitree_go vs unitree_hg: check the robot spec)"]
    if loopback:
        hints.append("the publisher discovers peers differently (Cyclone DDS config): our 'lo' config "
                     "discovers by multicast on 239.255.0.1 and by unicast to 127.0.0.1, so a peer is found "
                     "when one of those reaches it; a peer with multicast off and no 127.0.0.1 peer, or one "
                     "whose CYCLONEDDS_URI names another interface, is not (run it with CYCLONEDDS_URI="
                     "file://.../hardware/dds/cyclonedds_lo.xml); a firewall dropping UDP on lo does the same")
    else:
        hints.append(f"the PC's address on {network_interface!r} is not on the robot's subnet "
                     "(e.g. 192.168.123.x for Unitree robots), or multicast is blocked on that interface, or "
                     "another Cyclone DDS config (CYCLONEDDS_URI) turns multicast discovery off")
    if release_step != "none":
        hints.append(f"the {release_step} release step is not done (hardware/README.md)")
    return "; ".join(f"({i}) {h}" for i, h in enumerate(hints, 1))


@dataclass(frozen=True, eq=False)
class MotorSlotMap:
    """Spec joints ↔ motor slots of one message family, by joint name. Its message methods work on Cyclone's
    IDL objects: the readable definition of the mapping, which the struct-codec hot path of the robot
    interface and the sim bridge (``robot_rl.hardware.unitree_wire``) is tested against."""

    spec: RobotSpec
    family: ModuleType
    slots: tuple[int, ...]  # slots[i]: the motor slot of spec joint i
    unused: tuple[int, ...]  # slots that drive no spec joint

    @classmethod
    def from_spec(cls, spec: RobotSpec) -> MotorSlotMap:
        iface = spec.interface
        if not isinstance(iface, UnitreeDdsInterfaceSpec):
            raise ConfigError(spec.source_file, "interface.type", f"robot {spec.name!r}: interface.type is "
                              f"{iface.type!r}, a Unitree DDS robot needs 'unitree_dds'")
        family = FAMILIES[iface.message_family]
        if len(iface.motor_slots) != family.NUM_MOTORS:
            raise ConfigError(spec.source_file, "interface.motor_slots", f"robot {spec.name!r}: lists "
                              f"{len(iface.motor_slots)} slots, {iface.message_family} messages carry "
                              f"{family.NUM_MOTORS}")
        slot_of = {name: slot for slot, name in enumerate(iface.motor_slots) if name}
        slots = tuple(slot_of[name] for name in spec.joint_names)
        unused = tuple(s for s in range(family.NUM_MOTORS) if s not in slots)
        return cls(spec, family, slots, unused)

    @property
    def is_hg(self) -> bool:
        return self.family is hg

    # --- controller side: commands out, states in ---------------------------------------------------

    def blank_command(self) -> object:
        """A LowCmd with every slot passive: the SDK default (servo mode, stop sentinels, zero gains) for
        unitree_go; disabled motors for unitree_hg (spec slots are enabled by ``encode_command``)."""
        msg = self.family.default_low_cmd()
        if self.is_hg:
            for slot in self.unused:
                msg.motor_cmd[slot].mode = hg.MOTOR_DISABLE
        return msg

    def encode_command(self, command: JointCommand, msg: object) -> JointCommand:
        """Write ``command`` into the spec slots of ``msg``; returns it as the wire carries it (float32)."""
        q, dq, tau, kp, kd = wire_values(self.spec, command)
        mode = hg.MOTOR_ENABLE if self.is_hg else go.MOTOR_MODE_SERVO
        motors = msg.motor_cmd
        for i, values in enumerate(zip(q.tolist(), dq.tolist(), tau.tolist(), kp.tolist(), kd.tolist(), strict=True)):
            motor = motors[self.slots[i]]
            motor.mode = mode
            motor.q, motor.dq, motor.tau, motor.kp, motor.kd = values
        return JointCommand(*(w.astype(np.float64) for w in (q, dq, kp, kd, tau)))

    def decode_state(self, msg: object, timestamp: float) -> RobotState:
        motors = msg.motor_state
        picked = [motors[s] for s in self.slots]
        imu = msg.imu_state
        return RobotState(
            timestamp=timestamp, tick=int(msg.tick),
            q=np.array([m.q for m in picked]), dq=np.array([m.dq for m in picked]),
            tau=np.array([m.tau_est for m in picked]),
            base_quat=np.array(imu.quaternion, dtype=np.float64),
            base_ang_vel=np.array(imu.gyroscope, dtype=np.float64),
            base_lin_acc=np.array(imu.accelerometer, dtype=np.float64),
            base_lin_vel=None, base_pos=None,
        )

    # --- firmware side (sim bridge): commands in, states out -----------------------------------------

    def decode_command(self, msg: object) -> JointCommand | None:
        """What the motors execute for ``msg``, in spec joint order, or None when a value is not finite.

        A disabled / stopped motor is passive. unitree_go's sentinels switch a term off: q ≥ PosStopF
        drops the kp term, dq ≥ VelStopF drops the kd term (the SDK's "stop position / velocity control").
        """
        n = self.spec.num_joints
        q, dq, kp, kd, tau = (np.zeros(n) for _ in range(5))
        active_mode = hg.MOTOR_ENABLE if self.is_hg else go.MOTOR_MODE_SERVO
        for i, slot in enumerate(self.slots):
            m = msg.motor_cmd[slot]
            if m.mode != active_mode:
                continue
            q[i], dq[i], kp[i], kd[i], tau[i] = m.q, m.dq, m.kp, m.kd, m.tau
        if not all(np.isfinite(a).all() for a in (q, dq, kp, kd, tau)):
            return None
        if not self.is_hg:
            pos_stop, vel_stop = np.abs(q) >= _POS_STOP_MIN, np.abs(dq) >= _VEL_STOP_MIN
            q[pos_stop], kp[pos_stop] = 0.0, 0.0
            dq[vel_stop], kd[vel_stop] = 0.0, 0.0
        return JointCommand(q, dq, kp, kd, tau)

    def encode_state(self, state: RobotState, msg: object, tick: int) -> None:
        """Fill ``msg`` (a LowState) from ``state`` the way the firmware reports (CRC not set here)."""
        motors = msg.motor_state
        mode = hg.MOTOR_ENABLE if self.is_hg else go.MOTOR_MODE_SERVO
        for slot, q, dq, tau in zip(self.slots, state.q.tolist(), state.dq.tolist(), state.tau.tolist(),
                                    strict=True):
            m = motors[slot]
            m.mode, m.q, m.dq, m.tau_est = mode, q, dq, tau
        imu = msg.imu_state
        quat = state.base_quat.tolist()
        imu.quaternion = quat
        imu.gyroscope = state.base_ang_vel.tolist()
        imu.accelerometer = state.base_lin_acc.tolist()
        imu.rpy = quat_to_rpy(quat)
        msg.tick = tick & 0xFFFFFFFF


def quat_to_rpy(quat: list[float]) -> list[float]:
    """Roll, pitch, yaw (rad, ZYX) of a w-x-y-z quaternion, as the IMU's ``rpy`` field reports them."""
    w, x, y, z = quat
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0))
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return [float(roll), float(pitch), float(yaw)]


class UnitreeDdsRobot:
    """A Unitree robot (or the sim bridge) over DDS; see the module docstring.

    ``domain_id`` / ``network_interface`` override the spec's ``interface`` values. ``tag_state_tick``
    writes the tick of the state last returned by ``read()`` into the command's ``reserve`` field
    (``reserve[0]`` for unitree_hg), so the other side can match a command to the state it answered
    (benchmarks); it is off by default because the firmware's use of ``reserve`` is undocumented.
    """

    def __init__(self, spec: RobotSpec, domain_id: int | None = None, network_interface: str | None = None, *,
                 connect_timeout_s: float = 5.0, tag_state_tick: bool = False, spin_s: float = 0.0,
                 max_command_age_s: float | None = None) -> None:
        self.spec = spec
        self.slot_map = MotorSlotMap.from_spec(spec)
        iface = spec.interface
        self.domain_id = iface.domain_id if domain_id is None else domain_id
        self.network_interface = iface.network_interface if network_interface is None else network_interface
        self.connect_timeout_s = connect_timeout_s
        self.tag_state_tick = tag_state_tick
        self.period_s = spec.timing.hardware_period_s
        self._spin_s = spin_s
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        self._republisher: threading.Thread | None = None
        self._entities: list = []
        self._reader: DataReader | None = None
        self._writer: DataWriter | None = None
        self._latest: RobotState | None = None
        self._mode_machine = 0
        self._last_read_tick = 0
        self._command_bytes: bytes | None = None
        self._last_publish = -np.inf
        self._last_write = -np.inf
        self.max_command_age_s = np.inf if max_command_age_s is None else max_command_age_s
        self.states_received = 0  # good states taken since connect
        self.state_crc_errors = 0  # states taken with a bad CRC (dropped)
        self.commands_written = 0
        self.commands_republished = 0
        self.republish_loop: RateLoop | None = None

    # --- RobotInterface ---------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the DDS endpoints and wait (at most ``connect_timeout_s``) for the first good LowState."""
        if self._entities:
            raise RuntimeError("UnitreeDdsRobot.connect() called twice")
        family = self.slot_map.family
        participant = make_participant(self.domain_id, self.network_interface)
        self._reader = DataReader(participant, Topic(participant, TOPIC_LOWSTATE, family.LowState_), qos=STATE_QOS)
        self._writer = DataWriter(participant, Topic(participant, TOPIC_LOWCMD, family.LowCmd_), qos=COMMAND_QOS)
        self._waitset = WaitSet(participant)
        self._waitset.attach(ReadCondition(self._reader, SampleState.Any | ViewState.Any | InstanceState.Any))
        self._entities = [self._waitset, self._reader, self._writer, participant]
        self._encoder = CommandEncoder(self.slot_map)
        self._decoder = StateDecoder(self.slot_map)
        self._stop.clear()
        self._republisher = threading.Thread(target=self._republish, daemon=True, name="unitree-dds-republish")
        self._republisher.start()
        if self.wait_for_state(self.connect_timeout_s) is None:
            crc_note = f"; {self.state_crc_errors} arrived with a bad CRC and were dropped" \
                if self.state_crc_errors else ""
            self.close()
            raise RobotConnectionError(
                f"no {family.__name__.rsplit('.', 1)[-1]} LowState on {TOPIC_LOWSTATE!r} within "
                f"{self.connect_timeout_s:g} s (DDS domain {self.domain_id}, network interface "
                f"{self.network_interface!r}, robot {self.spec.name!r}){crc_note}. Possible causes: "
                + connection_hints(self.network_interface, self.spec.interface.release_step))
        if self.spec.interface.release_step != "none":
            log.info("connected to %s; low-level commands need the %s release step done (hardware/README.md)",
                     self.spec.name, self.spec.interface.release_step)

    def read(self) -> RobotState:
        """The newest state (never blocks): a new one if one arrived since the last call, else the last."""
        self._take_newest()
        state = self._latest
        if state is None:
            raise RuntimeError("UnitreeDdsRobot.read() before connect()")
        self._last_read_tick = state.tick
        return state

    def wait_for_state(self, timeout_s: float) -> RobotState | None:
        """Block until a state arrives that has not been returned yet (for event-driven callers, connect and
        tests, not the fixed-rate control loop); None on timeout."""
        if self._reader is None:
            raise RuntimeError("UnitreeDdsRobot.wait_for_state() before connect()")
        deadline = time.monotonic() + timeout_s
        while not self._take_newest():
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._waitset.wait(duration(microseconds=max(1, int(1e6 * min(left, 0.1)))))
        self._last_read_tick = self._latest.tick
        return self._latest

    def write(self, command: JointCommand) -> JointCommand:
        """Publish ``command`` now and keep re-publishing it; returns it as sent (float32-rounded)."""
        if self._writer is None:
            raise RuntimeError("UnitreeDdsRobot.write() before connect() (or after close())")
        with self._write_lock:
            tag = self._last_read_tick & 0xFFFFFFFF if self.tag_state_tick else 0
            data, sent = self._encoder.encode(command, tag=tag, mode_machine=self._mode_machine)
            self._command_bytes = data
            write_serialized(self._writer, data)
            self._last_publish = self._last_write = time.perf_counter()
            self.commands_written += 1
        return sent

    def close(self) -> None:
        """Stop the re-publish thread and delete the DDS entities (idempotent)."""
        if not self._entities:
            return
        self._stop.set()
        if self._republisher is not None:
            self._republisher.join(timeout=2.0)
            self._republisher = None
        with self._write_lock:
            entities, self._entities = self._entities, []
            self._reader = self._writer = self._waitset = None
            delete_entities(entities)

    def __enter__(self) -> UnitreeDdsRobot:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def mode_machine(self) -> int:
        """unitree_hg: the robot variant reported in the latest LowState (echoed in every command)."""
        return self._mode_machine

    # --- internals ----------------------------------------------------------------------------------

    def _take_newest(self) -> bool:
        """Take the newest sample from the reader's cache; True when it was a new good state."""
        got = False
        for data in take_serialized(self._reader, 1):  # keep-last 1: the newest state only (with data)
            taken = time.monotonic()
            decoder = self._decoder
            if not decoder.load(data):
                self.state_crc_errors += 1
                continue
            if self.slot_map.is_hg:
                self._mode_machine = decoder.mode_machine
            self._latest = decoder.state(taken)
            self.states_received += 1
            got = True
        return got

    def _republish(self) -> None:
        loop = self.republish_loop = RateLoop(self.period_s, spin_s=self._spin_s)
        half = 0.5 * self.period_s
        for tick in loop:
            if self._stop.is_set():
                return
            if self._command_bytes is None or tick.wake - self._last_publish < half:
                continue
            with self._write_lock:
                if self._writer is None:
                    return
                # The control loop stopped writing: let the stream stop with it. On a fresh clock, under the
                # lock: a process stopped (SIGSTOP) after this thread woke must not, once resumed, re-send a
                # command its loop could not renew meanwhile.
                if time.perf_counter() - self._last_write > self.max_command_age_s:
                    continue
                # Read under the lock: bytes taken before it could be older than a write() that got the lock
                # first, and re-sending them after it would put the previous command back in force (a policy
                # target after the first damping frame).
                write_serialized(self._writer, self._command_bytes)
            self._last_publish = tick.wake
            self.commands_republished += 1
