"""A person at a terminal: ``robot-rl teleop --robot panda --device keyboard --record DIR`` inside tmux,
driven by ``tmux send-keys`` (start recording, move, mark success, stop, quit); the dataset must validate
and hold an episode in which the arm moved."""

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from robot_rl.data.lerobot_dataset import LeRobotDataset
from robot_rl.data.lerobot_validate import validate_dataset

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")


def _command() -> list[str]:
    from robot_rl.cli import COMMANDS

    if "teleop" in COMMANDS:
        return [str(Path(sys.executable).parent / "robot-rl"), "teleop"]
    return [sys.executable, "-m", "robot_rl.teleop.session"]  # until the CLI lists the command


def _wait_for(path: Path, text: str, timeout_s: float) -> str:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        content = path.read_text(errors="replace") if path.exists() else ""
        if text in content:
            return content
        time.sleep(0.1)
    raise AssertionError(f"{text!r} did not appear within {timeout_s} s; output so far:\n{content}")


def test_keyboard_teleop_in_tmux_records_a_valid_dataset(tmp_path):
    dataset, out, rc = tmp_path / "demos", tmp_path / "out.txt", tmp_path / "rc"
    argv = [*_command(), "--robot", "panda", "--device", "keyboard", "--record", str(dataset)]
    shell = f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)} > {out} 2>&1; echo $? > {rc}"
    tmux = ["tmux", "-L", f"robot-rl-test-{os.getpid()}"]
    send = lambda *keys: subprocess.run([*tmux, "send-keys", "-t", "teleop", *keys], check=True)  # noqa: E731
    subprocess.run([*tmux, "new-session", "-d", "-s", "teleop", "-x", "200", "-y", "50", shell], check=True)
    try:
        _wait_for(out, "RUNNING: the robot follows the device", timeout_s=20)
        send("Enter")  # start an episode
        _wait_for(out, "episode started", timeout_s=3)
        for key, repeats in (("w", 30), ("r", 15)):  # hold w (forward), then r (up): terminal auto-repeat
            for _ in range(repeats):
                send(key)
                time.sleep(0.03)
        send("y")  # mark success
        _wait_for(out, "episode success", timeout_s=3)
        send("Space")  # stop and keep
        _wait_for(out, "episode 0 saved", timeout_s=5)
        send("C-c")  # quit
        end = time.monotonic() + 10
        while not rc.exists() and time.monotonic() < end:
            time.sleep(0.1)
        assert rc.exists(), out.read_text()
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
    assert rc.read_text().strip() == "0", out.read_text()
    assert validate_dataset(dataset) == []
    ds = LeRobotDataset(dataset)
    assert ds.num_episodes >= 1 and ds.episodes[0]["success"]
    ep = ds.episode(0)
    names = ds.features["observation.state"].names
    joints = [i for i, n in enumerate(names) if n.startswith("joint_pos_rel.")]
    assert np.ptp(ep["observation.state"][:, joints], axis=0).max() > 0.05, "the arm did not move"
    assert ep["teleop.command"][:, 3].max() == 1.0 and ep["teleop.command"][:, 5].max() == 1.0  # w, r recorded
    assert list((dataset / "raw").glob("teleop-*.mcap"))
