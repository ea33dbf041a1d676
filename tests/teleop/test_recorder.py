"""EpisodeRecorder: RecorderButtons drive episodes into a LeRobot dataset; the raw session goes to MCAP."""

import numpy as np
import pytest

from robot_rl.core.types import RobotState
from robot_rl.data.lerobot_dataset import Feature, LeRobotDataset, LeRobotDatasetWriter
from robot_rl.data.lerobot_validate import validate_dataset
from robot_rl.data.mcap_log import EVENTS, STATE
from robot_rl.data.mcap_log_reader import read_log, summarize_log
from robot_rl.teleop.command import RecorderButtons, TeleopCommand
from robot_rl.teleop.recorder import (
    COMMAND_NAMES,
    TELEOP_COMMAND,
    EpisodeRecorder,
    TeleopLogWriter,
    command_vector,
    teleop_features,
)

NAMES = ("j1", "j2", "j3")
START, STOP, SUCCESS, DISCARD = (RecorderButtons(start=True), RecorderButtons(stop=True),
                                 RecorderButtons(success=True), RecorderButtons(discard=True))


def _recorder(tmp_path, **kwargs):
    features = teleop_features(NAMES, NAMES, cameras={"front": (8, 10)})
    writer = LeRobotDatasetWriter(tmp_path / "ds", fps=20, features=features, robot_type="test")
    return EpisodeRecorder(writer, task="move the arm", **kwargs)


def _frame(k):
    return {"observation.state": np.full(3, k, np.float32), "action": np.full(3, -k, np.float32),
            "observation.images.front": np.full((8, 10, 3), k % 256, np.uint8)}


def _command(k):
    return TeleopCommand(twist=np.array([0.1 * k, 0.0, 0.0]), ee_delta=np.full(6, 0.01 * k), gripper=k % 2)


def test_buttons_drive_an_episode_into_the_dataset(tmp_path):
    rec = _recorder(tmp_path)
    assert not rec.add_frame(_frame(0), _command(0))  # no episode open: nothing recorded
    assert [str(e) for e in rec.handle(START)] == ["episode started (0 frames)"]
    for k in range(6):
        rec.add_frame(_frame(k), _command(k))
    assert [e.kind for e in rec.handle(SUCCESS)] == ["success"]  # reached at the last recorded frame (5)
    for k in range(6, 9):
        rec.add_frame(_frame(k), _command(k))
    events = rec.handle(STOP)
    assert [(e.kind, e.episode, e.frames) for e in events] == [("saved", 0, 9)]
    ds = LeRobotDataset(tmp_path / "ds")
    ep = ds.episode(0)
    np.testing.assert_array_equal(ep["observation.state"][:, 0], np.arange(9, dtype=np.float32))
    np.testing.assert_array_equal(ep["teleop.command"], np.stack([command_vector(_command(k)) for k in range(9)]))
    np.testing.assert_array_equal(ep["observation.images.front"][:, 0, 0, 0], np.arange(9, dtype=np.uint8))
    assert ep["next.success"].tolist() == [False] * 5 + [True] * 4
    assert ds.episodes[0]["success"] and ds.tasks == ["move the arm"]
    assert ds.info["features"]["teleop.command"]["names"] == list(COMMAND_NAMES)
    assert validate_dataset(tmp_path / "ds") == []


def test_discarded_and_too_short_episodes_are_not_written(tmp_path):
    rec = _recorder(tmp_path, min_frames=3)
    rec.handle(START)
    for k in range(5):
        rec.add_frame(_frame(k), _command(k))
    assert [e.kind for e in rec.handle(DISCARD)] == ["discarded"]
    rec.handle(START)
    rec.add_frame(_frame(0), _command(0))
    assert [e.kind for e in rec.handle(STOP)] == ["too_short"]
    assert rec.discarded == 2 and rec.saved == []
    assert not (tmp_path / "ds").exists()  # nothing touched the disk


def test_repeated_and_out_of_place_buttons_are_ignored(tmp_path):
    rec = _recorder(tmp_path)
    assert rec.handle(STOP) == [] and rec.handle(SUCCESS) == [] and rec.handle(DISCARD) == []
    rec.handle(START)
    rec.add_frame(_frame(0), _command(0))
    assert rec.handle(START) == []  # already recording (a held Enter key repeats)
    rec.add_frame(_frame(1), _command(1))
    # success and stop in one poll (what the scripted expert sends): success first, then saved
    assert [e.kind for e in rec.handle(RecorderButtons(stop=True, success=True))] == ["success", "saved"]
    ep = LeRobotDataset(tmp_path / "ds").episode(0)
    assert ep["next.success"].tolist() == [False, True]


def test_stop_and_start_in_one_poll_begin_the_next_episode(tmp_path):
    rec = _recorder(tmp_path)
    rec.handle(START)
    for k in range(3):
        rec.add_frame(_frame(k), _command(k))
    assert [e.kind for e in rec.handle(RecorderButtons(start=True, stop=True))] == ["saved", "started"]
    for k in range(4):
        rec.add_frame(_frame(k), _command(k))
    assert rec.close().kind == "saved"  # the episode open at the end of the session is kept
    ds = LeRobotDataset(tmp_path / "ds")
    assert [e["length"] for e in ds.episodes] == [3, 4] and not any(e["success"] for e in ds.episodes)


def test_a_frame_missing_a_feature_is_refused(tmp_path):
    rec = _recorder(tmp_path)
    rec.handle(START)
    with pytest.raises(ValueError, match=r"missing \['action'\]"):
        rec.add_frame({k: v for k, v in _frame(0).items() if k != "action"}, _command(0))


def test_extra_features_without_the_command(tmp_path):
    features = teleop_features(NAMES, NAMES, with_command=False, extra={"observation.cube": Feature("float32", (3,))})
    assert "teleop.command" not in features
    rec = EpisodeRecorder(LeRobotDatasetWriter(tmp_path / "ds", fps=10, features=features), task="t")
    rec.handle(START)
    for k in range(3):
        rec.add_frame({**{k2: v for k2, v in _frame(k).items() if "images" not in k2},
                       "observation.cube": np.ones(3, np.float32)})
    rec.handle(STOP)
    assert LeRobotDataset(tmp_path / "ds").episode(0)["observation.cube"].shape == (3, 3)


def test_the_raw_session_is_mirrored_to_mcap(tmp_path):
    log = TeleopLogWriter(tmp_path / "session.mcap")
    rec = _recorder(tmp_path, log=log)
    for k in range(4):
        command = _command(k)
        if k == 1:
            command = TeleopCommand(ee_delta=np.ones(6), buttons=START, intervention=True)
        log.log_teleop(command, t=float(k))
        log.log_state(RobotState(timestamp=float(k), tick=k, q=np.zeros(3), dq=np.zeros(3), tau=np.zeros(3)))
        rec.handle(command.buttons)
        rec.add_frame(_frame(k), command)
    rec.handle(STOP)
    log.close()
    records = list(read_log(tmp_path / "session.mcap"))
    teleop = [r.data for r in records if r.topic == TELEOP_COMMAND]
    assert len(teleop) == 4 and teleop[1]["buttons"] == ["start"] and teleop[1]["intervention"]
    assert teleop[1]["ee_delta"] == [1.0] * 6 and teleop[3]["gripper"] == 1.0
    notes = [r.data["detail"] for r in records if r.topic == EVENTS]
    assert notes == ["recorder: episode started (0 frames)", "recorder: episode 0 saved (3 frames)"]
    summary = summarize_log(tmp_path / "session.mcap")
    assert summary["messages"][TELEOP_COMMAND] == 4 and summary["messages"][STATE] == 4
    assert summary["closed_cleanly"]
