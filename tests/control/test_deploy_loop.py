"""The real-time deploy loop when a tick stalls: a controller stopped between its read and its write
(SIGSTOP then SIGCONT, a swapping machine, a blocking call) must not send, once it runs again, the policy
command it computed before the stall. The overrun fault latches on that tick and damping goes out instead.

Real time on the simulated A1 (MuJoCo, its physics on its own thread) with the shipped policy; the stall is
a 0.5 s sleep inside one tick, 25 policy periods, far past the overrun limit of 3.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from robot_rl.control.deploy_loop import run_loop
from robot_rl.control.runtime import DeployRuntime
from robot_rl.control.state_machine import ControllerMode
from robot_rl.core.types import JointCommand, RobotState
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.safety.filters import OVERRUN

POLICY = Path(__file__).resolve().parents[2] / "policies" / "a1_flat" / "policy.onnx"
STALL_S = 0.5
RUNNING_TICKS_BEFORE_STALL = 5
TICKS_AFTER_STALL = 10

pytestmark = pytest.mark.skipif(not POLICY.exists(), reason=f"no shipped A1 policy at {POLICY}")


class StallingRobot:
    """A real robot interface (a real-time SimRobot) that records every command it receives and, once asked
    (``stall_in_read``), stalls for STALL_S inside ``read`` right after taking the state: the loop then holds
    a fresh state and computes its command from it half a second after the tick's deadline."""

    def __init__(self, robot: SimRobot) -> None:
        self.robot = robot
        self.stall_in_read = False
        self.received: list[JointCommand] = []

    def read(self) -> RobotState:
        state = self.robot.read()
        if self.stall_in_read:
            self.stall_in_read = False
            time.sleep(STALL_S)
        return state

    def write(self, command: JointCommand) -> JointCommand:
        self.received.append(command)
        return self.robot.write(command)

    def __getattr__(self, name: str):
        return getattr(self.robot, name)


def is_damping(command: JointCommand, kd: float) -> bool:
    return not command.kp.any() and bool((command.kd == kd).all())


@pytest.mark.parametrize("where", ["read", "on_tick"])
def test_a_tick_stalled_past_the_overrun_limit_sends_damping_not_its_policy_command(where) -> None:
    runtime = DeployRuntime.load("a1", POLICY)
    spec = runtime.spec
    period = spec.timing.policy_period_s
    ramp_ticks = round(spec.safety.ramp_duration_s / period)
    stalled: list[int] = []
    running = [0]

    def on_tick(k: int, t: float) -> None:
        if runtime.mode is ControllerMode.RUNNING:
            running[0] += 1
        if running[0] == RUNNING_TICKS_BEFORE_STALL and not stalled:
            stalled.append(k)
            if where == "read":
                robot.stall_in_read = True  # between this tick's read and its write
            else:
                time.sleep(STALL_S)  # before its read: a fresh state, but the tick's deadline long gone

    with SimRobot(spec, "mujoco", realtime=True) as sim:
        robot = StallingRobot(sim)
        duration = (ramp_ticks + RUNNING_TICKS_BEFORE_STALL + 2 + TICKS_AFTER_STALL) * period
        rec = run_loop(runtime, robot, duration, realtime=True, on_tick=on_tick)
    assert stalled, f"the policy never ran: modes {set(rec.mode)}"
    k = stalled[0]
    kd = spec.safety.damping_kd
    # Until the stall: the policy's commands went out (a normal run is unaffected).
    assert rec.mode[k - 1] == "running" and robot.received[k - 1].kp.min() > 0
    assert not any("FAULT" in text for t, text in rec.events if t < rec.t[k]), rec.events
    # The stalled tick: the policy computed its command from the state it read, and the robot never got it.
    assert rec.mode[k] == "damping"
    assert not np.allclose(rec.q_target_proposed[k], 0.0)  # the policy's targets (damping's are all 0)
    assert is_damping(robot.received[k], kd), robot.received[k]
    assert all(is_damping(c, kd) for c in robot.received[k:]), "a policy command went out after the stall"
    assert len(robot.received) > k + 1 and set(rec.mode[k:]) == {"damping"}
    # The run ends in the overrun fault, counted and reported like any other.
    faults = [(t, text) for t, text in rec.events if "FAULT" in text]
    assert len(faults) == 1 and OVERRUN in faults[0][1] and "was not sent" in faults[0][1], faults
    assert faults[0][0] == rec.t[k]
    diag = runtime.diagnostics()
    assert diag["fault_latched"] and OVERRUN in diag["fault"][0]
    assert diag["safety"]["faults"] == {OVERRUN: 1}
    # The stall's deadlines are counted once, by the next tick's wait (about 25 of them).
    assert 20 <= diag["safety"]["missed_deadlines"] <= 40 and rec.timing["missed_deadlines"] >= 20
    # The tick trace pins the stall on the phase it happened in (on_tick runs in the read phase) and on why:
    # the loop's thread was blocked (asleep), not computing.
    slowest = rec.timing["slowest_ticks"][0]
    assert slowest.phases_s[0] >= 0.9 * STALL_S and slowest.past_deadline_s >= 0.9 * STALL_S
    assert slowest.cause() == "read: blocked", slowest.describe()
