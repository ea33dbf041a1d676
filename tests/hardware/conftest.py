"""The sim bridge as a separate process, as it runs next to a real deploy (``python -m
robot_rl.hardware.sim_bridge``), plus a reader of its status side channel.

Domain ids: ROBOT_RL_TEST_DDS_DOMAIN (+ offsets) or random in a high range per test, so parallel runs on
one machine do not hear each other.
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from robot_rl.dds import close_domain, make_participant

_BASE = int(os.environ.get("ROBOT_RL_TEST_DDS_DOMAIN", "0"))


@pytest.fixture
def domain() -> Iterator[int]:
    """A DDS domain id for one test; the domain is deleted in this process afterwards."""
    domain_id = _BASE + 120 if _BASE else random.SystemRandom().randint(150, 230)
    yield domain_id
    close_domain(domain_id)


class BridgeProcess:
    def __init__(self, domain_id: int, args: list[str], duration_s: float) -> None:
        self.domain_id = domain_id
        cmd = [sys.executable, "-m", "robot_rl.hardware.sim_bridge", "--domain-id", str(domain_id),
               "--duration-s", str(duration_s), *args]
        if "--robot" not in args:
            cmd += ["--robot", "a1"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait(self, timeout: float) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def start_bridge(domain: int) -> Iterator[Callable[..., BridgeProcess]]:
    """start_bridge(*cli_args, duration_s=20) → the bridge on this test's domain; killed after the test."""
    started: list[BridgeProcess] = []

    def start(*args: str, duration_s: float = 20.0) -> BridgeProcess:
        bridge = BridgeProcess(domain, list(args), duration_s)
        started.append(bridge)
        return bridge

    yield start
    for bridge in started:
        bridge.stop()


class StatusReader:
    """Reads the bridge's ``rt/robot_rl/sim_bridge_status`` side channel."""

    def __init__(self, domain_id: int) -> None:
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        from robot_rl.hardware.sim_bridge import STATUS_QOS, TOPIC_BRIDGE_STATUS, SimBridgeStatus_

        participant = make_participant(domain_id, "lo")
        self.reader = DataReader(participant, Topic(participant, TOPIC_BRIDGE_STATUS, SimBridgeStatus_),
                                 qos=STATUS_QOS)
        self.latest = None

    def wait_for(self, predicate: Callable[[object], bool], timeout_s: float):
        """The first status satisfying ``predicate`` within ``timeout_s``, else the last one seen (or None)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for status in self.reader.take(N=16):
                if status.sample_info.valid_data:
                    self.latest = status
                    if predicate(status):
                        return status
            time.sleep(0.01)
        return self.latest


@pytest.fixture
def bridge_status(domain: int) -> StatusReader:
    return StatusReader(domain)


def _write_spec(directory, transform: Callable[[dict], None], robot: str = "a1"):
    import yaml

    from robot_rl.robots.spec import load_spec_file, specs_dir

    data = yaml.safe_load((specs_dir() / f"{robot}.yaml").read_text())
    transform(data)
    path = directory / f"{robot}.yaml"  # a spec's name must match its file name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec_file(path)


@pytest.fixture
def edited_spec(tmp_path):
    """edited_spec(transform, robot="a1") → hardware/robots/ROBOT.yaml edited by ``transform`` (a function
    of the parsed dict), written under tmp_path, loaded and validated (``spec.source_file`` is its path)."""
    counter = iter(range(1000))

    def make(transform: Callable[[dict], None], robot: str = "a1"):
        directory = tmp_path / f"spec{next(counter)}"
        directory.mkdir()
        return _write_spec(directory, transform, robot)

    return make


def _as_hg_family(data: dict) -> None:
    iface = data["interface"]
    iface["message_family"] = "unitree_hg"
    iface["motor_slots"] = list(iface["motor_slots"][:12]) + [""] * 23


@pytest.fixture
def hg_a1_spec(edited_spec):
    """The A1 spec speaking unitree_hg (35 motor slots): the humanoid message family without a G1 model."""
    return edited_spec(_as_hg_family)


def _load_dds_walk():
    """tests/hardware/dds_walk.py, by path (the tests run with --import-mode=importlib: this folder is not on
    sys.path)."""
    if "dds_walk" not in sys.modules:
        spec = importlib.util.spec_from_file_location("dds_walk", Path(__file__).with_name("dds_walk.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules["dds_walk"] = module
        spec.loader.exec_module(module)
    return sys.modules["dds_walk"]


@pytest.fixture
def walk_over_dds(start_bridge, bridge_status, domain, tmp_path):
    """walk_over_dds(spec, policy, vx=, walk_s=, bridge_args=()) → DdsWalk (tests/hardware/dds_walk.py): the
    bridge and the deploy as two processes on this test's domain, with the LowCmd tap and the bridge's status."""
    module = _load_dds_walk()

    def run(spec, policy, *, vx: float, walk_s: float, bridge_args: tuple[str, ...] = ()):
        return module.walk_over_dds(spec, policy, domain, start_bridge, bridge_status, tmp_path, vx=vx, walk_s=walk_s,
                                    bridge_args=bridge_args)

    return run
