"""Real Cyclone DDS publish/subscribe on the loopback interface: Unitree's low-level topics carry our
messages with a valid CRC, in one process and between two processes (the second one stands in for the
robot: it answers every LowCmd_ whose CRC is good with a LowState_, and drops the rest as the firmware does).

Domain ids come from ROBOT_RL_TEST_DDS_DOMAIN or at random in 100..196 (this file uses four consecutive
ids), so parallel runs on one machine do not hear each other.
"""

import os
import random
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from robot_rl.dds import (
    TOPIC_LOWCMD,
    TOPIC_LOWSTATE,
    close_domain,
    cyclone_config_xml,
    make_participant,
)
from robot_rl.dds import unitree_go as go
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.crc import crc_ok, with_crc

BASE_DOMAIN = int(os.environ.get("ROBOT_RL_TEST_DDS_DOMAIN", "0")) or random.SystemRandom().randint(100, 196)
RELIABLE = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(64))


def take_within(reader: DataReader, timeout_s: float, count: int = 1) -> list:
    """Up to ``count`` samples, waiting at most ``timeout_s`` for the first."""
    waitset = WaitSet(reader.participant)
    condition = ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any)
    waitset.attach(condition)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            samples = reader.take(N=count)
            if samples or time.monotonic() >= deadline:
                return samples
            waitset.wait(duration(milliseconds=max(1, int(1000 * min(0.05, deadline - time.monotonic())))))
    finally:
        waitset.detach(condition)


def endpoints(participant, topic_name: str, msg_type: type) -> tuple[DataWriter, DataReader]:
    topic = Topic(participant, topic_name, msg_type)
    return DataWriter(participant, topic, qos=RELIABLE), DataReader(participant, topic, qos=RELIABLE)


@pytest.mark.parametrize(("family", "domain"), [(go, BASE_DOMAIN), (hg, BASE_DOMAIN + 1)], ids=["go", "hg"])
def test_lowcmd_and_lowstate_in_process(family, domain: int) -> None:
    try:
        controller, robot = make_participant(domain, "lo"), make_participant(domain, "lo")
        cmd_writer = DataWriter(controller, Topic(controller, TOPIC_LOWCMD, family.LowCmd_), qos=RELIABLE)
        cmd_reader = DataReader(robot, Topic(robot, TOPIC_LOWCMD, family.LowCmd_), qos=RELIABLE)
        state_writer = DataWriter(robot, Topic(robot, TOPIC_LOWSTATE, family.LowState_), qos=RELIABLE)
        state_reader = DataReader(controller, Topic(controller, TOPIC_LOWSTATE, family.LowState_), qos=RELIABLE)

        cmd = family.default_low_cmd()
        for i in range(12):
            cmd.motor_cmd[i].q, cmd.motor_cmd[i].kp, cmd.motor_cmd[i].kd = 0.25 * i, 20.0, 0.5
        cmd_writer.write(with_crc(cmd))
        received = take_within(cmd_reader, 2.0)
        assert len(received) == 1
        assert received[0] == cmd and crc_ok(received[0])

        state = family.default_low_state()
        state.motor_state[4].q = 1.5
        state.tick = 1234
        state_writer.write(with_crc(state))
        replies = take_within(state_reader, 2.0)
        assert len(replies) == 1 and replies[0] == state and crc_ok(replies[0])
    finally:
        close_domain(domain)


# The robot stand-in for the cross-process test. It echoes each good command's reserve field into the
# state's tick and its motor targets into motor_state[].q, counts bad-CRC commands, and stops on level_flag 0.
ROBOT_STAND_IN = r"""
import sys, time
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.core import WaitSet, ReadCondition, SampleState, ViewState, InstanceState
from cyclonedds.qos import Qos, Policy
from cyclonedds.util import duration
from robot_rl.dds import make_participant, TOPIC_LOWCMD, TOPIC_LOWSTATE
from robot_rl.dds import unitree_go as go
from robot_rl.dds.crc import crc_ok, with_crc

qos = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(64))
dp = make_participant(int(sys.argv[1]), "lo")
reader = DataReader(dp, Topic(dp, TOPIC_LOWCMD, go.LowCmd_), qos=qos)
writer = DataWriter(dp, Topic(dp, TOPIC_LOWSTATE, go.LowState_), qos=qos)
waitset = WaitSet(dp)
waitset.attach(ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any))
deadline = time.monotonic() + float(sys.argv[2])
good = bad = 0
while time.monotonic() < deadline:
    waitset.wait(duration(milliseconds=50))
    for cmd in reader.take(N=64):
        if not crc_ok(cmd):
            bad += 1
            continue
        good += 1
        if cmd.level_flag == 0:
            print(f"good={good} bad={bad}", flush=True)
            sys.exit(0)
        state = go.default_low_state()
        state.tick = cmd.reserve
        for slot, motor in zip(state.motor_state, cmd.motor_cmd):
            slot.q = motor.q
        writer.write(with_crc(state))
print(f"timeout good={good} bad={bad}", flush=True)
sys.exit(1)
"""
BAD_SEQ_OFFSET = 1_000_000


def test_lowcmd_with_crc_crosses_processes_and_bad_crc_is_dropped() -> None:
    domain = BASE_DOMAIN + 2
    robot = subprocess.Popen([sys.executable, "-c", ROBOT_STAND_IN, str(domain), "20"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        participant = make_participant(domain, "lo")
        cmd_writer = DataWriter(participant, Topic(participant, TOPIC_LOWCMD, go.LowCmd_), qos=RELIABLE)
        state_reader = DataReader(participant, Topic(participant, TOPIC_LOWSTATE, go.LowState_), qos=RELIABLE)
        replies: list = []
        seq = 0
        deadline = time.monotonic() + 15.0  # the stand-in needs an interpreter start and discovery
        while len(replies) < 5 and time.monotonic() < deadline:
            assert robot.poll() is None, robot.communicate()
            seq += 1
            cmd = go.default_low_cmd()
            cmd.reserve = seq
            cmd.motor_cmd[0].q = 0.001 * seq
            cmd_writer.write(with_crc(cmd))
            corrupt = go.default_low_cmd()
            corrupt.reserve = BAD_SEQ_OFFSET + seq
            corrupt.crc = with_crc(corrupt).crc ^ 0x1
            cmd_writer.write(corrupt)
            replies += take_within(state_reader, 0.05, count=64)
        assert len(replies) >= 5, f"no answer from the stand-in on domain {domain} after {seq} commands"
        for state in replies:
            assert crc_ok(state)
            assert 0 < state.tick <= seq, f"answered a command with a bad CRC (tick {state.tick})"
            assert state.motor_state[0].q == pytest.approx(0.001 * state.tick, rel=1e-6)

        stop = go.default_low_cmd()
        stop.level_flag = 0
        cmd_writer.write(with_crc(stop))
        out, err = robot.communicate(timeout=5)
        assert robot.returncode == 0, err
        counts = dict(item.split("=") for item in out.split())
        assert int(counts["bad"]) >= 1 and int(counts["good"]) >= 5
    finally:
        if robot.poll() is None:
            robot.kill()
            robot.communicate()
        close_domain(domain)


def test_loopback_config_is_cyclone_xml_bound_to_lo() -> None:
    root = ET.fromstring(cyclone_config_xml("lo"))
    assert root.find("./Domain/General/Interfaces/NetworkInterface").get("name") == "lo"
    assert root.find("./Domain/General/AllowMulticast").text == "spdp"  # discovery by multicast too
    assert root.find("./Domain/Discovery/Peers/Peer").get("address") == "127.0.0.1"
    robot_side = ET.fromstring(cyclone_config_xml("eth0"))
    assert robot_side.find("./Domain/General/AllowMulticast") is None


def test_make_participant_refuses_bad_arguments_by_name() -> None:
    with pytest.raises(ValueError, match="domain id 300"):
        make_participant(300)
    with pytest.raises(ValueError, match="domain id True"):
        make_participant(True)
    with pytest.raises(ValueError, match="'eth0\"/>' is not a valid interface name"):
        make_participant(BASE_DOMAIN + 3, 'eth0"/>')
    with pytest.raises(ValueError, match=r"'no-such-if9' does not exist on this machine; interfaces: .*lo"):
        make_participant(BASE_DOMAIN + 3, "no-such-if9")


def test_a_domain_stays_bound_to_its_interface() -> None:
    others = [name for _, name in socket.if_nameindex() if name != "lo"]
    if not others:
        pytest.skip("this machine has only the loopback interface")
    domain = BASE_DOMAIN + 3
    try:
        make_participant(domain, "lo")
        with pytest.raises(ValueError, match=f"domain {domain} is already bound to interface 'lo'"):
            make_participant(domain, others[0])
    finally:
        close_domain(domain)
