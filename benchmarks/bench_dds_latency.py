"""State-in → command-out latency across processes: UnitreeDdsRobot against a bare Cyclone DDS ping-pong.

Process A (this one) plays the robot: it publishes a full-size ``unitree_go`` ``LowState_`` with tick k
(CRC set), then waits for the ``LowCmd_`` that answers it. Process B is the controller, in one of two
variants that run in alternating blocks (a fresh B process per block, order rotated every round), so
slow drifts of this shared machine hit both alike:

- ``bare``   the baseline: a DataReader and a DataWriter of the same message types; on each state it
             builds the hold command from the message (12 motors: q = measured q, spec kp/kd), sets the
             CRC and writes it. No threads, no conversion, no CRC check of the state.
- ``robot``  ``UnitreeDdsRobot`` as deployed: its receive thread takes the state, checks its CRC and
             converts it; the caller's ``wait_for_state()`` wakes, computes the same hold command and calls
             ``write()`` (float32 encoding, CRC, serialize, publish), while the 500 Hz re-publish thread runs.

The answer is matched to its state by a tag: ``LowCmd_.reserve`` carries the tick of the state it was
computed from (``tag_state_tick=True`` in the robot; set by hand in the bare variant). Latency = time from
just before A's DDS write of state k to A's raw ``take()`` returning the command tagged k. A is the
measuring instrument, so it reads the tag straight from the serialized bytes (a fixed offset in the XCDR1
image of the fixed-size ``LowCmd_``) instead of deserializing every command in Python (≈ 160 µs each): the
robot variant's 500 Hz re-publish stream would otherwise cost A time the real firmware (C) does not
spend. The matched command is deserialized and its CRC checked after the clock stops. One state is in
flight at a time, every ``period_ms``.

    .venv/bin/python benchmarks/bench_dds_latency.py --block-s 6 --rounds 3 \
        --markdown-out benchmarks/results/RESULTS_dds_latency.md
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import platform
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import tyro

Variant = Literal["bare", "robot", "robot-public"]
ROBOT = "a1"


@dataclass(frozen=True)
class Args:
    block_s: float = 6.0  # measured seconds per block (after warm-up)
    warmup_s: float = 0.5
    rounds: int = 3  # each round runs every variant once
    period_ms: float = 4.0  # one state every period (one in flight at a time)
    reply_timeout_ms: float = 20.0
    domain_id: int = 0  # 0: random in 150..230
    markdown_out: Path | None = None
    public_api: bool = False  # also measure "robot-public": UnitreeDdsRobot on Cyclone's public API only


# --- process B ------------------------------------------------------------------------------------------


def _controller(variant: Variant, domain_id: int, stop: mp.Event) -> None:
    from robot_rl.core.types import JointCommand
    from robot_rl.robots.spec import load_robot

    spec = load_robot(ROBOT)
    gc.collect()
    gc.freeze()
    if variant == "robot-public":  # robot_rl.dds.cyclone_private's fallback (read at its import, just below)
        os.environ["ROBOT_RL_DDS_PUBLIC_API"] = "1"
    if variant in ("robot", "robot-public"):
        from robot_rl.hardware.unitree_dds import UnitreeDdsRobot

        with UnitreeDdsRobot(spec, domain_id=domain_id, connect_timeout_s=30.0, tag_state_tick=True) as robot:
            while not stop.is_set():
                state = robot.wait_for_state(0.1)
                if state is not None:
                    robot.write(JointCommand.hold(state.q, spec.kp, spec.kd))
        return

    from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration

    from robot_rl.dds import TOPIC_LOWCMD, TOPIC_LOWSTATE, make_participant
    from robot_rl.dds import unitree_go as go
    from robot_rl.dds.crc import with_crc
    from robot_rl.hardware.unitree_dds import COMMAND_QOS, STATE_QOS

    dp = make_participant(domain_id, "lo")
    reader = DataReader(dp, Topic(dp, TOPIC_LOWSTATE, go.LowState_), qos=STATE_QOS)
    writer = DataWriter(dp, Topic(dp, TOPIC_LOWCMD, go.LowCmd_), qos=COMMAND_QOS)
    waitset = WaitSet(dp)
    waitset.attach(ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any))
    cmd = go.default_low_cmd()
    kp, kd = spec.kp.tolist(), spec.kd.tolist()
    while not stop.is_set():
        waitset.wait(duration(milliseconds=100))
        for state in reader.take(N=1):
            if not state.sample_info.valid_data:
                continue
            for i in range(12):
                m = cmd.motor_cmd[i]
                m.q, m.dq, m.kp, m.kd, m.tau = state.motor_state[i].q, 0.0, kp[i], kd[i], 0.0
            cmd.reserve = state.tick
            writer.write(with_crc(cmd))


# --- process A ------------------------------------------------------------------------------------------


class Robot:
    """Process A's DDS endpoints on one domain."""

    def __init__(self, domain_id: int) -> None:
        from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet
        from cyclonedds.pub import DataWriter
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        from robot_rl.dds import TOPIC_LOWCMD, TOPIC_LOWSTATE, make_participant
        from robot_rl.dds import unitree_go as go

        dp = make_participant(domain_id, "lo")
        from robot_rl.hardware.sim_bridge import COMMAND_READER_QOS, STATE_WRITER_QOS  # the bridge's QoS

        self.writer = DataWriter(dp, Topic(dp, TOPIC_LOWSTATE, go.LowState_), qos=STATE_WRITER_QOS)
        self.reader = DataReader(dp, Topic(dp, TOPIC_LOWCMD, go.LowCmd_), qos=COMMAND_READER_QOS)
        self.waitset = WaitSet(dp)
        self.waitset.attach(ReadCondition(self.reader, SampleState.Any | ViewState.Any | InstanceState.Any))
        self.state = go.default_low_state()
        for i, m in enumerate(self.state.motor_state[:12]):
            m.q, m.dq, m.tau_est = 0.1 * i, 0.01 * i, 0.5
        self.tick = 0
        self.bad_replies = 0
        probe = go.default_low_cmd()
        probe.reserve = 0xA5A5A5A5
        self.tag_offset = probe.serialize().index(b"\xa5\xa5\xa5\xa5")
        self._any = SampleState.Any | ViewState.Any | InstanceState.Any
        self._entities = [self.waitset, self.reader, self.writer, dp]

    def close(self) -> None:
        from robot_rl.hardware.unitree_dds import delete_entities

        delete_entities(self._entities)

    def ping(self, timeout_s: float) -> float | None:
        """Publish the next state; seconds until its command came back, None on timeout."""
        from cyclonedds.util import duration

        from robot_rl.dds import unitree_go as go
        from robot_rl.dds.crc import crc_ok, with_crc
        from robot_rl.dds.cyclone_private import serialize_for, take_serialized, write_serialized

        self.tick += 1
        self.state.tick = self.tick
        data = serialize_for(self.writer, with_crc(self.state))
        start = time.perf_counter()
        write_serialized(self.writer, data, self.state)
        deadline = start + timeout_s
        offset = self.tag_offset
        while True:
            for data in take_serialized(self.reader, 16):
                if data[offset:offset + 4] == self.tick.to_bytes(4, "little"):
                    elapsed = time.perf_counter() - start
                    if not crc_ok(go.LowCmd_.deserialize(data)):
                        self.bad_replies += 1
                    return elapsed
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            self.waitset.wait(duration(microseconds=max(1, int(1e6 * min(left, 0.005)))))


def run_block(variant: Variant, domain_id: int, args: Args) -> dict:
    from robot_rl.core.loop_timing import RateLoop

    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    proc = ctx.Process(target=_controller, args=(variant, domain_id, stop), daemon=True)
    proc.start()
    robot = Robot(domain_id)
    try:
        up_deadline = time.monotonic() + 60
        while robot.ping(0.05) is None:  # B's interpreter start, imports and discovery
            if time.monotonic() > up_deadline or not proc.is_alive():
                raise RuntimeError(f"{variant} controller did not answer on domain {domain_id}")
        loop = RateLoop(1e-3 * args.period_ms, spin_s=0.0)
        latencies, lost = [], 0
        end = time.monotonic() + args.warmup_s + args.block_s
        measure_from = time.monotonic() + args.warmup_s
        for _ in loop:
            now = time.monotonic()
            if now >= end:
                break
            latency = robot.ping(1e-3 * args.reply_timeout_ms)
            if now < measure_from:
                continue
            if latency is None:
                lost += 1
            else:
                latencies.append(latency)
    finally:
        robot.close()
        stop.set()
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
    a = np.array(latencies)
    if robot.bad_replies:
        raise RuntimeError(f"{variant}: {robot.bad_replies} commands arrived with a bad CRC")
    return {"variant": variant, "n": len(a), "lost": lost, "p50_us": 1e6 * float(np.percentile(a, 50)),
            "p99_us": 1e6 * float(np.percentile(a, 99)), "max_us": 1e6 * float(a.max())}


def _median_us(job, n: int = 400) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        job()
        times.append(time.perf_counter() - t)
    return 1e6 * statistics.median(times[50:])


def codec_costs_us() -> dict[str, float]:
    """Median cost of one Python (de)serialization of each message with Cyclone's IDL classes, in µs."""
    from robot_rl.dds import unitree_go as go

    state, cmd = go.default_low_state(), go.default_low_cmd()
    state_bytes, cmd_bytes = state.serialize(), cmd.serialize()
    jobs = {"LowState serialize": state.serialize,
            "LowState deserialize": lambda: go.LowState_.deserialize(state_bytes),
            "LowCmd serialize": cmd.serialize, "LowCmd deserialize": lambda: go.LowCmd_.deserialize(cmd_bytes)}
    return {name: _median_us(job) for name, job in jobs.items()}


def interface_codec_us(robot: str) -> dict[str, dict[str, float]]:
    """What the robot interface does per message, the IDL way (before issue 26: IDL objects, crc.py over the
    object, Cyclone's serializer) and the struct way (robot_rl.hardware.unitree_wire), median µs:
    decode = LowState bytes → CRC check → RobotState; encode = JointCommand → LowCmd with CRC → bytes."""
    from robot_rl.core.types import JointCommand
    from robot_rl.dds.crc import crc_ok, with_crc
    from robot_rl.hardware.unitree_dds import MotorSlotMap
    from robot_rl.hardware.unitree_wire import CommandEncoder, StateDecoder
    from robot_rl.robots.spec import load_robot

    spec = load_robot(robot)
    slots = MotorSlotMap.from_spec(spec)
    state_bytes = with_crc(slots.family.default_low_state()).serialize()
    command = JointCommand.hold(spec.default_positions, spec.kp, spec.kd)
    msg = slots.blank_command()

    def idl_decode() -> None:
        m = slots.family.LowState_.deserialize(state_bytes)
        assert crc_ok(m)
        slots.decode_state(m, 0.0)

    def idl_encode() -> None:
        slots.encode_command(command, msg)
        with_crc(msg).serialize()

    decoder, encoder = StateDecoder(slots), CommandEncoder(slots)

    def struct_decode() -> None:
        assert decoder.load(state_bytes)
        decoder.state(0.0)

    def struct_encode() -> None:
        encoder.encode(command)

    return {"idl": {"decode": _median_us(idl_decode), "encode": _median_us(idl_encode)},
            "struct": {"decode": _median_us(struct_decode), "encode": _median_us(struct_encode)}}


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.release()}"
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {system}"


def main(args: Args) -> None:
    domain = args.domain_id or random.SystemRandom().randint(150, 230)
    load_before = os.getloadavg()
    codec = codec_costs_us()
    interface = {robot: interface_codec_us(robot) for robot in ("a1", "g1")}
    for robot, costs in interface.items():
        print(f"{robot}: " + ", ".join(f"{way} decode {c['decode']:.1f} µs encode {c['encode']:.1f} µs"
                                      for way, c in costs.items()))
    variants: list[Variant] = ["bare", "robot", *(["robot-public"] if args.public_api else [])]
    blocks = []
    for round_index in range(args.rounds):
        order = variants if round_index % 2 == 0 else variants[::-1]
        for variant in order:
            result = run_block(variant, domain, args)
            blocks.append(result)
            print(f"round {round_index} {variant:>5}: n={result['n']} lost={result['lost']} "
                  f"p50={result['p50_us']:.0f} µs p99={result['p99_us']:.0f} µs max={result['max_us']:.0f} µs",
                  flush=True)
    load_after = os.getloadavg()
    med = {v: {k: statistics.median(b[k] for b in blocks if b["variant"] == v) for k in ("p50_us", "p99_us", "max_us")}
           for v in variants}
    ratio_p50 = med["robot"]["p50_us"] / med["bare"]["p50_us"]
    ratio_p99 = med["robot"]["p99_us"] / med["bare"]["p99_us"]
    print(f"\nmedian over {args.rounds} blocks of {args.block_s:g} s:")
    for v in variants:
        print(f"  {v:>5}: p50 {med[v]['p50_us']:.0f} µs  p99 {med[v]['p99_us']:.0f} µs  max {med[v]['max_us']:.0f} µs")
    print(f"  ratio robot/bare: p50 {ratio_p50:.2f}  p99 {ratio_p99:.2f}")
    if "robot-public" in med:
        print("  ratio robot-public/robot: p50 {:.2f}  p99 {:.2f}".format(
            *(med["robot-public"][k] / med["robot"][k] for k in ("p50_us", "p99_us"))))
    print("  Python (de)serialization, µs: " + ", ".join(f"{k} {v:.0f}" for k, v in codec.items()))
    if args.markdown_out:
        write_markdown(args, blocks, med, ratio_p50, ratio_p99, codec, interface, load_before, load_after)


def write_markdown(args, blocks, med, ratio_p50, ratio_p99, codec, interface, load_before, load_after) -> None:
    on_path = codec["LowState deserialize"] + codec["LowCmd serialize"]
    codec_rows = []
    for robot, c in interface.items():
        before = c["idl"]["decode"] + c["idl"]["encode"]
        after = c["struct"]["decode"] + c["struct"]["encode"]
        codec_rows.append(f"| {robot} | {c['idl']['decode']:.1f} | {c['idl']['encode']:.1f} | {before:.1f} | "
                          f"{c['struct']['decode']:.1f} | {c['struct']['encode']:.1f} | {after:.1f} | "
                          f"{before / after:.0f}× |")
    lines = [
        "# DDS state-in → command-out latency (UnitreeDdsRobot vs bare Cyclone DDS ping-pong)", "",
        "```", f".venv/bin/python benchmarks/bench_dds_latency.py --block-s {args.block_s:g} --rounds {args.rounds} "
        f"--period-ms {args.period_ms:g} --markdown-out {args.markdown_out}", "```", "",
        f"Machine: {machine()}. Load average {load_before[0]:.2f} before, {load_after[0]:.2f} after: the machine "
        "was shared with other jobs during the run, so absolute figures are noisy; the ratio is taken between "
        "variants measured in alternating blocks of the same run.", "",
        "What is measured: see the module docstring of `benchmarks/bench_dds_latency.py` (one `unitree_go` "
        "LowState in flight, the answer matched by the tick carried in `LowCmd_.reserve`).", "",
        "| variant | p50 (µs) | p99 (µs) | max (µs) |", "|---|---:|---:|---:|",
        *(f"| {v} | {m['p50_us']:.0f} | {m['p99_us']:.0f} | {m['max_us']:.0f} |" for v, m in med.items()),
        "", f"Ratio robot / bare: **p50 {ratio_p50:.2f}, p99 {ratio_p99:.2f}** (medians over {args.rounds} blocks "
        f"of {args.block_s:g} s per variant). Goal of the issue: p99 ≤ 1.5 ms, ratio ≤ 1.3.", "",
        "Per block:", "", "| # | variant | n | lost | p50 (µs) | p99 (µs) | max (µs) |",
        "|---|---|---:|---:|---:|---:|---:|",
        *(f"| {i} | {b['variant']} | {b['n']} | {b['lost']} | {b['p50_us']:.0f} | {b['p99_us']:.0f} | "
          f"{b['max_us']:.0f} |" for i, b in enumerate(blocks)),
        "", "Python (de)serialization of one message with cyclonedds, median µs (same run): "
        + ", ".join(f"{k} {v:.0f}" for k, v in codec.items()) + ".", "",
        "Per message in the robot interface, median µs (same run): decode = LowState bytes → CRC check → "
        "`RobotState`; encode = `JointCommand` → LowCmd with CRC → bytes. *IDL*: Cyclone's IDL objects and "
        "serializer with `robot_rl.dds.crc` over the object (the path before issue 26); *struct*: "
        "`robot_rl.hardware.unitree_wire` on `robot_rl.dds.codec` (the path now):", "",
        "| robot (family) | IDL decode | IDL encode | IDL both | struct decode | struct encode | struct both | "
        "speed-up |", "|---|---:|---:|---:|---:|---:|---:|---:|", *codec_rows, "",
        "## Reading", "",
        "- Variants: *bare* is the baseline as before (Cyclone's IDL classes in Python, no CRC check, no "
        "conversion); *robot* is `UnitreeDdsRobot`, which since issue 26 decodes and encodes with the struct "
        "codec. Inside the bare variant's timed path: LowState deserialize + LowCmd serialize = "
        f"{on_path:.0f} µs, {100 * on_path / med['bare']['p50_us']:.0f} % of its p50; the robot variant spends "
        "the struct figures above instead, so it can answer faster than the bare baseline.",
        "- p99 and max follow the machine's load (other jobs on 2 shared cores), not the code: the bare "
        "ping-pong itself ranges over blocks as shown above. The issue's p99 ≤ 1.5 ms needs a quiet machine; "
        "compare the ratio, which is measured side by side.", "",
    ]
    args.markdown_out.write_text("\n".join(lines))


if __name__ == "__main__":
    main(tyro.cli(Args))
