"""The teleop session: scripted devices through the real runtime and simulator, and argument errors."""

import io

import numpy as np
import pytest

from robot_rl.core.validate import ArgumentError
from robot_rl.data.lerobot_dataset import LeRobotDataset
from robot_rl.data.lerobot_validate import validate_dataset
from robot_rl.data.mcap_log_reader import summarize_log
from robot_rl.robots.spec import load_robot
from robot_rl.teleop.command import RecorderButtons, TeleopCommand
from robot_rl.teleop.recorder import TELEOP_COMMAND
from robot_rl.teleop.session import TeleopError, TeleopSession, scale_twist, teleop


class ScriptedDevice:
    """Stands in for a person at a device: ``script[k]`` is the command of poll k (default: no input)."""

    def __init__(self, script):
        self.script, self.polls, self.closed = script, 0, False

    def poll(self):
        command = self.script.get(self.polls, TeleopCommand())
        self.polls += 1
        return command

    def close(self):
        self.closed = True


def test_scale_twist_maps_unit_inputs_onto_command_ranges():
    ranges = ((-1.0, 2.0), (-0.5, 0.5), (0.2, 1.0))
    np.testing.assert_allclose(scale_twist(np.array([1.0, -1.0, 0.0]), ranges), [2.0, -0.5, 0.6])
    np.testing.assert_allclose(scale_twist(np.array([-0.5, 0.5, -1.0]), ranges), [-0.5, 0.25, 0.2])
    np.testing.assert_allclose(scale_twist(np.array([3.0]), ranges), [2.0, 0.0, 0.6])  # clipped; missing = 0


def test_arm_session_records_a_push_demo(tmp_path):
    spec = load_robot("panda")
    ramp = round(spec.safety.ramp_duration_s / spec.timing.policy_period_s)
    start = ramp + 5
    forward = TeleopCommand(ee_delta=np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0]), intervention=True)
    script = {start: TeleopCommand(buttons=RecorderButtons(start=True)),
              **{k: forward for k in range(start + 1, start + 60)},
              start + 60: TeleopCommand(buttons=RecorderButtons(success=True)),
              start + 70: TeleopCommand(buttons=RecorderButtons(stop=True)),
              start + 75: TeleopCommand(quit=True)}
    out = io.StringIO()
    session = TeleopSession(spec, ScriptedDevice(script), sim="mujoco", fps=25, record=tmp_path / "ds", log=None,
                            task=None, camera=False, policy=None, seed=1, out=out)
    try:
        assert session.run(duration_s=10.0, realtime=False) == 0
    finally:
        session.close()
    assert validate_dataset(tmp_path / "ds") == []
    ds = LeRobotDataset(tmp_path / "ds")
    assert ds.num_episodes == 1 and ds.fps == 25
    ep = ds.episode(0)
    assert len(ep["action"]) == 35  # 70 running ticks at 50 Hz, every second one recorded
    names = ds.features["observation.state"].names
    j1 = names.index("joint_pos_rel.panda_joint2")
    assert np.ptp(ep["observation.state"][:, j1]) > 0.05  # the arm moved
    assert ep["teleop.command"][1:29, 3].min() == 1.0  # ee x command recorded
    assert ep["next.success"].tolist() == [False] * 29 + [True] * 6 and ds.episodes[0]["success"]
    env = ep["observation.environment_state"]
    np.testing.assert_allclose(env[:, 3:], np.repeat(env[:1, 3:], len(env), axis=0))  # the goal, constant
    text = out.getvalue()
    assert "RUNNING: the robot follows the device" in text and "episode 0 saved (35 frames)" in text
    assert "scene reset" in text and "quit" in text
    log = summarize_log(next((tmp_path / "ds" / "raw").glob("teleop-*.mcap")))
    assert log["messages"][TELEOP_COMMAND] == start + 75 and log["closed_cleanly"]


def test_the_default_walking_policy_is_the_shipped_one_from_any_directory(tmp_path, monkeypatch):
    from robot_rl.robots.spec import shipped_path
    from robot_rl.teleop.session import _legged_policy

    monkeypatch.chdir(tmp_path)  # not the checkout: policies/a1_flat/policy.onnx is not relative to here
    shipped = shipped_path("policies/a1_flat/policy.onnx")
    assert _legged_policy(load_robot("a1"), None) == shipped
    assert _legged_policy(load_robot("a1"), "policies/a1_flat/policy.onnx") == shipped
    with pytest.raises(TeleopError, match=r"--policy nowhere\.onnx: no such file"):
        _legged_policy(load_robot("a1"), "nowhere.onnx")


def test_legged_session_without_a_policy_holds_the_default_pose(tmp_path, monkeypatch):
    import robot_rl.policy.onnx_policy

    monkeypatch.setattr(robot_rl.policy.onnx_policy, "shipped_path", lambda relative: None)  # no shipped policies
    monkeypatch.chdir(tmp_path)
    spec = load_robot("a1")
    ramp = round(spec.safety.ramp_duration_s / spec.timing.policy_period_s)
    turn = TeleopCommand(twist=np.array([0.0, 0.0, 1.0]), intervention=True)
    script = {ramp + 2: TeleopCommand(buttons=RecorderButtons(start=True)),
              **{k: turn for k in range(ramp + 3, ramp + 30)}}
    session = TeleopSession(spec, ScriptedDevice(script), sim="mujoco", fps=50, record=tmp_path / "ds",
                            log=tmp_path / "a1.mcap", task=None, camera=False, policy=None, seed=0, out=io.StringIO())
    try:
        session.run(duration_s=(ramp + 30) * spec.timing.policy_period_s, realtime=False)
    finally:
        session.close()  # the open episode is kept
    assert validate_dataset(tmp_path / "ds") == []
    ep = LeRobotDataset(tmp_path / "ds").episode(0)
    home = spec.default_positions.astype(np.float32)
    np.testing.assert_allclose(ep["action"], np.broadcast_to(home, ep["action"].shape), atol=1e-6)
    assert ep["teleop.command"][1:, 2].min() == 1.0 and ep["observation.base_quat"].shape[1] == 4


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(TeleopError, match="--fps 30: must be a whole number dividing panda's policy rate of 50 Hz"):
        teleop(robot="panda", fps=30)
    with pytest.raises(TeleopError, match="--sim 'gazebo'"):
        teleop(sim="gazebo")
    with pytest.raises(ArgumentError, match="--duration-s must be a finite number > 0, got 0"):
        teleop(duration_s=0)
    spec = load_robot("panda")
    with pytest.raises(TeleopError, match="--task a1-flat is for robot 'a1'"):
        TeleopSession(spec, ScriptedDevice({}), sim="mujoco", fps=50, record=None, log=None, task="a1-flat",
                      camera=False, policy=None, seed=0, out=io.StringIO())


def test_sigterm_ends_a_terminal_session_keeping_the_open_episode(tmp_path):
    """A closed terminal (SIGTERM/SIGHUP) ends the session like Ctrl-C: episode kept, log finished."""
    import os
    import signal
    import subprocess
    import sys
    import time

    master, slave = os.openpty()
    out = tmp_path / "out.txt"
    with out.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "robot_rl.teleop.session", "--robot", "a1", "--record",
                                 str(tmp_path / "ds")], stdin=slave, stdout=sink, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 20
        while "RUNNING:" not in out.read_text() and time.monotonic() < end:
            time.sleep(0.1)
        os.write(master, b"\r")  # Enter: start recording
        while "episode started" not in out.read_text() and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0, out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        os.close(slave)
    text = out.read_text()
    assert "episode 0 saved" in text, text
    assert validate_dataset(tmp_path / "ds") == []
    assert summarize_log(next((tmp_path / "ds" / "raw").glob("*.mcap")))["closed_cleanly"]


def test_an_existing_log_is_refused_before_the_session_starts(tmp_path, capsys):
    from robot_rl.cli import main

    log = tmp_path / "session.mcap"
    log.write_bytes(b"an earlier session")
    assert main(["teleop", "--robot", "panda", "--log", str(log), "--duration-s", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (f"error: --log {log}: a file is already there; choose another path, or pass --overwrite "
                            "to replace it\n")
    assert log.read_bytes() == b"an earlier session" and "teleop panda" not in captured.out
