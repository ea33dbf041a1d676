"""robot_rl.dds.cyclone_private: its fast path (Cyclone internals) and its public-API fallback put the same
bytes on the wire and take the same samples, over real DDS on loopback (two participants, one process)."""

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cyclonedds.core import WaitSet
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from robot_rl.dds import close_domain, cyclone_private, make_participant
from robot_rl.dds import unitree_go as go
from robot_rl.dds import unitree_hg as hg
from robot_rl.dds.crc import with_crc

_BASE = int(os.environ.get("ROBOT_RL_TEST_DDS_DOMAIN", "0"))
RELIABLE = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(64))
needs_fast = pytest.mark.skipif(not cyclone_private.FAST_PATH, reason="fast path not available for cyclonedds "
                                f"{cyclone_private.CYCLONEDDS_VERSION}")


@pytest.fixture
def domain():
    domain_id = _BASE + 140 if _BASE else random.SystemRandom().randint(100, 230)
    yield domain_id
    close_domain(domain_id)


def _take_raw_within(reader: DataReader, count: int, fast: bool, timeout_s: float = 3.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += cyclone_private.take_serialized(reader, count - len(got), fast=fast)
        time.sleep(0.005)
    return got


def _command(family, i: int):
    msg = family.default_low_cmd()
    for k in range(12):
        msg.motor_cmd[k].q, msg.motor_cmd[k].kp, msg.motor_cmd[k].kd = 0.1 * k + i, 20.0, 0.5
    return with_crc(msg)


def test_the_pinned_version_uses_the_fast_path() -> None:
    lo, hi = cyclone_private.FAST_PATH_VERSIONS
    in_range = lo <= cyclone_private._version_tuple(cyclone_private.CYCLONEDDS_VERSION) < hi
    assert (in_range and os.environ.get("ROBOT_RL_DDS_PUBLIC_API", "") in ("", "0")) == cyclone_private.FAST_PATH
    assert cyclone_private._version_tuple("11.0.1") == (11, 0, 1)
    assert cyclone_private._version_tuple("0.10.5rc1") == (0, 10, 5)


@needs_fast
@pytest.mark.parametrize("family", [go, hg], ids=["go", "hg"])
def test_fast_and_public_paths_send_and_take_the_same_bytes(domain: int, family) -> None:
    a, b = make_participant(domain, "lo"), make_participant(domain, "lo")
    writer = DataWriter(a, Topic(a, "rt/lowcmd", family.LowCmd_), qos=RELIABLE)
    reader = DataReader(b, Topic(b, "rt/lowcmd", family.LowCmd_), qos=RELIABLE)
    deadline = time.monotonic() + 5.0
    while not writer.get_matched_subscriptions() and time.monotonic() < deadline:
        time.sleep(0.01)
    # What the writer's own write() would serialize, per the binding's internal flag and by public QoS.
    assert cyclone_private.use_version_2(writer) == writer._use_version_2
    msgs = [_command(family, i) for i in range(4)]
    data = [cyclone_private.serialize_for(writer, m) for m in msgs]
    # Sent: fast path (raw bytes), public path with the message, public path decoding the bytes, and
    # DataWriter.write itself; taken alternately by both take paths.
    cyclone_private.write_serialized(writer, data[0], fast=True)
    cyclone_private.write_serialized(writer, data[1], msgs[1], fast=False)
    cyclone_private.write_serialized(writer, data[2], fast=False)
    writer.write(msgs[3])
    fast_taken = _take_raw_within(reader, 2, fast=True)
    public_taken = _take_raw_within(reader, 2, fast=False)
    assert len(fast_taken) == 2 and len(public_taken) == 2
    taken = fast_taken + public_taken
    for sent, got in zip(data, taken, strict=True):
        assert got.ljust(len(sent), b"\0") == sent  # the same bytes (up to the padding the sender adds)
        assert family.LowCmd_.deserialize(got) == family.LowCmd_.deserialize(sent)  # float32 on the wire


def test_public_path_in_a_process_without_the_internals(tmp_path: Path) -> None:
    """ROBOT_RL_DDS_PUBLIC_API=1: the whole robot stack runs on public API only (bridge ↔ robot round trip)."""
    script = tmp_path / "public.py"
    script.write_text(
        "import sys\n"
        "from robot_rl.dds import cyclone_private, make_participant, close_domain\n"
        "assert not cyclone_private.FAST_PATH\n"
        "import robot_rl.dds.cyclone_private as cp\n"
        "cp._FAST = None\n"  # belt and braces: nothing may reach the internals
        "from robot_rl.core.types import JointCommand\n"
        "from robot_rl.hardware.sim_bridge import SimBridge\n"
        "from robot_rl.hardware.faults import FaultConfig\n"
        "from robot_rl.hardware.unitree_dds import UnitreeDdsRobot\n"
        "from robot_rl.robots.spec import load_robot\n"
        "import threading\n"
        "d = int(sys.argv[1]); spec = load_robot('a1')\n"
        "bridge = SimBridge(spec, FaultConfig(), d, network_interface='lo')\n"
        "bridge.open(); t = threading.Thread(target=bridge.run, args=(3.0,), daemon=True); t.start()\n"
        "robot = UnitreeDdsRobot(spec, domain_id=d, connect_timeout_s=10.0); robot.connect()\n"
        "for _ in range(100):\n"
        "    assert robot.wait_for_state(1.0) is not None\n"
        "    robot.write(JointCommand.damping(12, spec.safety.damping_kd))\n"
        "robot.close(); bridge.stop(); t.join(5)\n"
        "print('applied', bridge.status.commands_applied, 'republished', robot.commands_republished)\n"
        "bridge.close()\n")
    env = dict(os.environ, ROBOT_RL_DDS_PUBLIC_API="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[2]), *sys.path]))
    domain_id = _BASE + 141 if _BASE else random.SystemRandom().randint(100, 230)
    out = subprocess.run([sys.executable, str(script), str(domain_id)], capture_output=True, text=True, env=env,
                         timeout=90)
    assert out.returncode == 0, out.stderr[-3000:]
    words = out.stdout.split()
    assert int(words[words.index("applied") + 1]) >= 50, out.stdout


def test_public_delete_releases_the_entities(domain: int) -> None:
    """The public deletion path (drop the references, collect) really deletes: the peer's match goes away."""
    a, b = make_participant(domain, "lo"), make_participant(domain, "lo")
    reader = DataReader(b, Topic(b, "t", go.LowCmd_), qos=RELIABLE)
    writer = DataWriter(a, Topic(a, "t", go.LowCmd_), qos=RELIABLE)
    deadline = time.monotonic() + 5.0
    while not reader.get_matched_publications() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reader.get_matched_publications()
    saved, cyclone_private._FAST = cyclone_private._FAST, None
    try:
        entities = [WaitSet(a), writer]
        del writer
        cyclone_private.delete_entities(entities)
    finally:
        cyclone_private._FAST = saved
    assert entities == []
    deadline = time.monotonic() + 5.0
    while reader.get_matched_publications() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not reader.get_matched_publications()


def test_no_other_module_touches_cyclone_internals() -> None:
    root = Path(__file__).parents[2]
    offenders = []
    for path in [*(root / "robot_rl").rglob("*.py"), *(root / "benchmarks").rglob("*.py")]:
        if path.name == "cyclone_private.py":
            continue
        text = path.read_text()
        offenders += [f"{path.relative_to(root)}: {needle}" for needle in
                      ("cyclonedds._clayer", "._ref,", "._ref)", "_use_version_2", ".__del__()") if needle in text]
    assert not offenders, offenders
