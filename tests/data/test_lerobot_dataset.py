"""LeRobotDataset v3.0: write with our writer, read back with our reader and with plain pyarrow, validate."""

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robot_rl.data.lerobot_dataset import DatasetError, Feature, LeRobotDataset, LeRobotDatasetWriter, video_available
from robot_rl.data.lerobot_validate import main as validate_main
from robot_rl.data.lerobot_validate import validate_dataset

JOINTS = tuple(f"joint{i}" for i in range(7))
FEATURES = {
    "observation.state": Feature("float32", (7,), names=JOINTS),
    "action": Feature("float32", (7,), names=JOINTS),
    "observation.gripper": Feature("float64", (1,)),
    "observation.images.front": Feature("image", (12, 16, 3)),
}
LENGTHS = (5, 9, 3)
TASKS = ("push the cube", "push the cube", "reach the target")
SUCCESS = (3, None, 0)


def _episode(rng, length):
    return {
        "observation.state": rng.standard_normal((length, 7)).astype(np.float32),
        "action": rng.standard_normal((length, 7)).astype(np.float32),
        "observation.gripper": rng.random(length),
        "observation.images.front": rng.integers(0, 256, (length, 12, 16, 3), dtype=np.uint8),
    }


@pytest.fixture
def recorded(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "ds"
    writer = LeRobotDatasetWriter(root, fps=50, features=FEATURES, robot_type="panda")
    episodes = [_episode(rng, n) for n in LENGTHS]
    for data, task, success in zip(episodes, TASKS, SUCCESS, strict=True):
        writer.add_episode(data, task, success_frame=success)
    return root, episodes


def test_episodes_reload_identically_with_our_reader(recorded):
    root, episodes = recorded
    ds = LeRobotDataset(root)
    assert (ds.num_episodes, ds.num_frames, ds.tasks) == (3, sum(LENGTHS), ["push the cube", "reach the target"])
    for e, data in enumerate(episodes):
        got = ds.episode(e)
        for key, expected in data.items():
            assert got[key].dtype == expected.dtype, key
            np.testing.assert_array_equal(got[key], expected, err_msg=key)
        assert got["frame_index"].tolist() == list(range(LENGTHS[e]))
        assert got["episode_index"].tolist() == [e] * LENGTHS[e]
        np.testing.assert_array_equal(got["timestamp"], (np.arange(LENGTHS[e]) / 50).astype(np.float32))
        assert got["next.done"].tolist() == [False] * (LENGTHS[e] - 1) + [True]
        success = np.zeros(LENGTHS[e], dtype=bool)
        if SUCCESS[e] is not None:
            success[SUCCESS[e]:] = True
        assert got["next.success"].tolist() == success.tolist()
        np.testing.assert_array_equal(got["next.reward"], success.astype(np.float32))
    assert [ep["success"] for ep in ds.episodes] == [True, False, True]
    assert ds.episode(2)["task_index"].tolist() == [1, 1, 1]


def test_episodes_reload_identically_with_plain_pyarrow(recorded):
    root, episodes = recorded
    table = pq.read_table(root / "data/chunk-000/file-000.parquet")
    state = table.column("observation.state").combine_chunks()
    assert state.type == pa.list_(pa.float32(), 7)
    np.testing.assert_array_equal(state.flatten().to_numpy().reshape(-1, 7),
                                  np.concatenate([e["observation.state"] for e in episodes]))
    np.testing.assert_array_equal(table.column("action").combine_chunks().flatten().to_numpy().reshape(-1, 7),
                                  np.concatenate([e["action"] for e in episodes]))
    np.testing.assert_array_equal(table.column("observation.gripper").to_numpy(),
                                  np.concatenate([e["observation.gripper"] for e in episodes]))
    assert table.column("index").to_pylist() == list(range(sum(LENGTHS)))
    types = {name: str(table.schema.field(name).type) for name in table.column_names}
    assert types["timestamp"] == "float" and types["next.done"] == "bool" and types["next.reward"] == "float"
    assert types["frame_index"] == types["episode_index"] == types["index"] == types["task_index"] == "int64"
    image = table.column("observation.images.front")[0].as_py()
    assert image["bytes"][:8] == b"\x89PNG\r\n\x1a\n"  # datasets.Image's struct: PNG bytes + path
    hf = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    assert hf["observation.state"] == {"feature": {"dtype": "float32", "_type": "Value"}, "length": 7,
                                       "_type": "Sequence"}
    assert hf["observation.images.front"] == {"_type": "Image"}


def test_metadata_files_follow_the_v3_layout(recorded):
    root, _ = recorded
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 50 and info["robot_type"] == "panda"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, sum(LENGTHS), 2)
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["splits"] == {"train": "0:3"} and info["video_path"] is None
    assert info["features"]["observation.state"] == {"dtype": "float32", "shape": [7], "names": list(JOINTS)}
    assert info["features"]["observation.images.front"]["names"] == ["height", "width", "channels"]
    assert info["features"]["next.success"] == {"dtype": "bool", "shape": [1], "names": None}
    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert tasks.column("task").to_pylist() == ["push the cube", "reach the target"]
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]  # pd.read_parquet → index
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [(e["dataset_from_index"], e["dataset_to_index"], e["length"]) for e in episodes] == [(0, 5, 5), (5, 14, 9),
                                                                                             (14, 17, 3)]
    assert episodes[1]["tasks"] == ["push the cube"] and episodes[0]["stats/action/count"] == [5]


def test_stats_cover_every_frame(recorded):
    root, episodes = recorded
    stats = LeRobotDataset(root).stats
    state = np.concatenate([e["observation.state"] for e in episodes]).astype(np.float64)
    # Moments in the data's dtype, as LeRobot computes them: float32 here.
    np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(stats["observation.state"]["std"], state.std(axis=0), rtol=1e-5)
    np.testing.assert_array_equal(stats["observation.state"]["min"], state.min(axis=0))
    assert stats["index"]["count"].tolist() == [sum(LENGTHS)]
    assert stats["observation.images.front"]["mean"].shape == (3, 1, 1)
    # Quantiles (LeRobot's quantile normalization needs them): ordered, inside [min, max] up to the histogram's pad.
    q = np.stack([stats["observation.state"][name] for name in ("q01", "q10", "q50", "q90", "q99")])
    assert np.all(np.diff(q, axis=0) >= 0)
    assert np.all(q >= state.min(axis=0) - 1e-6) and np.all(q <= state.max(axis=0) + 1e-6)
    assert stats["observation.images.front"]["q50"].shape == (3, 1, 1)


def test_a_recorded_dataset_validates(recorded, capsys):
    root, _ = recorded
    assert validate_dataset(root) == []
    assert validate_main([str(root)]) == 0
    assert "valid LeRobotDataset v3.0" in capsys.readouterr().out


def test_a_second_writer_appends_to_the_dataset(recorded):
    root, episodes = recorded
    writer = LeRobotDatasetWriter(root, fps=50, features=FEATURES, robot_type="panda")
    assert writer.add_episode(_episode(np.random.default_rng(1), 4), "push the cube") == 3
    ds = LeRobotDataset(root)
    assert ds.num_episodes == 4 and ds.episodes[3]["dataset_from_index"] == sum(LENGTHS)
    np.testing.assert_array_equal(ds.episode(1)["action"], episodes[1]["action"])
    assert validate_dataset(root) == []
    with pytest.raises(DatasetError, match="recorded at fps 50, cannot append at fps 30"):
        LeRobotDatasetWriter(root, fps=30, features=FEATURES)
    with pytest.raises(DatasetError, match=r"features differ .* in \['action'\]"):
        LeRobotDatasetWriter(root, fps=50, features={**FEATURES, "action": Feature("float32", (6,))})


def test_data_files_roll_over_at_the_size_limit(tmp_path):
    rng = np.random.default_rng(2)
    features = {"observation.state": Feature("float32", (64,)), "action": Feature("float32", (64,))}
    writer = LeRobotDatasetWriter(tmp_path / "ds", fps=10, features=features, data_files_size_in_mb=0.02)
    episodes = [{k: rng.standard_normal((40, 64)).astype(np.float32) for k in features} for _ in range(4)]
    for data in episodes:
        writer.add_episode(data, "t")
    ds = LeRobotDataset(tmp_path / "ds")
    assert len(ds.data_files()) > 1
    assert validate_dataset(tmp_path / "ds") == []
    np.testing.assert_array_equal(ds.episode(3)["action"], episodes[3]["action"])


@pytest.mark.parametrize(("data", "message"), [
    ({"action": np.zeros((3, 7), np.float32)}, r"missing \['observation.state'\]"),
    ({"observation.state": np.zeros((3, 6)), "action": np.zeros((3, 7))}, r"'observation.state' has shape \(3, 6\)"),
    ({"observation.state": np.full((3, 7), np.nan), "action": np.zeros((3, 7))}, "not finite at frame 0"),
    ({"observation.state": np.zeros((3, 7)), "action": np.zeros((2, 7))}, "same frame count"),
])
def test_bad_episode_data_is_refused_with_a_clear_message(tmp_path, data, message):
    features = {k: FEATURES[k] for k in ("observation.state", "action")}
    writer = LeRobotDatasetWriter(tmp_path / "ds", fps=50, features=features)
    with pytest.raises(DatasetError, match=message):
        writer.add_episode(data, "task")
    assert not (tmp_path / "ds").exists()  # nothing half-written


def test_bad_writer_arguments(tmp_path):
    with pytest.raises(DatasetError, match="filled in by the writer"):
        LeRobotDatasetWriter(tmp_path / "a", fps=50, features={"timestamp": Feature("float32", (1,))})
    with pytest.raises(DatasetError, match="positive integer"):
        LeRobotDatasetWriter(tmp_path / "a", fps=12.5, features={})
    (tmp_path / "b" / "meta").mkdir(parents=True)
    with pytest.raises(DatasetError, match=r"holds meta/ or data/ but no meta/info\.json"):
        LeRobotDatasetWriter(tmp_path / "b", fps=50, features={})
    (tmp_path / "c" / "raw").mkdir(parents=True)  # other files may share the directory
    LeRobotDatasetWriter(tmp_path / "c", fps=50, features={"action": Feature("float32", (2,))})
    writer = LeRobotDatasetWriter(tmp_path / "d", fps=50, features={"action": Feature("float32", (2,))})
    with pytest.raises(DatasetError, match="task description"):
        writer.add_episode({"action": np.zeros((2, 2))}, "")


# --- the validator, against corrupted copies -----------------------------------------------------------------

def _rewrite_data(root, change):
    path = root / "data/chunk-000/file-000.parquet"
    pq.write_table(change(pq.read_table(path)), path)


def _set_column(name, values):
    def change(table):
        i = table.schema.get_field_index(name)
        return table.set_column(i, table.schema.field(i).with_type(pa.array(values).type), pa.array(values))
    return change


def _edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _corrupt_episode_index(root):
    path = root / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    pq.write_table(table.set_column(0, "episode_index", pa.array([0, 2, 3])), path)


N = sum(LENGTHS)
CORRUPTIONS = {
    "wrong codebase_version": (lambda r: _edit_json(r / "meta/info.json", lambda d: d.update(codebase_version="v2.1")),
                               "codebase_version is 'v2.1'"),
    "fps missing": (lambda r: _edit_json(r / "meta/info.json", lambda d: d.pop("fps")), "missing field 'fps'"),
    "default feature missing": (lambda r: _edit_json(r / "meta/info.json", lambda d: d["features"].pop("index")),
                                "feature 'index' (present in every LeRobot dataset) is missing"),
    "total_frames wrong": (lambda r: _edit_json(r / "meta/info.json", lambda d: d.update(total_frames=N + 1)),
                           f"total_frames is {N + 1}"),
    "stats missing": (lambda r: (r / "meta/stats.json").unlink(), "meta/stats.json: missing"),
    "stats of a feature missing": (lambda r: _edit_json(r / "meta/stats.json", lambda d: d.pop("action")),
                                   "no stats for feature 'action'"),
    "tasks missing": (lambda r: (r / "meta/tasks.parquet").unlink(), "meta/tasks.parquet: missing"),
    "episode indices not contiguous": (_corrupt_episode_index, "episode_index is not contiguous"),
    "frame_index broken": (lambda r: _rewrite_data(r, _set_column("frame_index", np.r_[np.arange(N - 1), 7])),
                           "episode 2's frame_index is not 0..2"),
    "index not contiguous": (lambda r: _rewrite_data(r, _set_column("index", np.r_[np.arange(N - 1), N + 5])),
                             "'index' is not contiguous"),
    "timestamps off": (lambda r: _rewrite_data(r, _set_column("timestamp", np.full(N, 0.5, np.float32))),
                       "timestamps are not frame_index / fps"),
    "action stored as float64": (lambda r: _rewrite_data(r, _set_column(
        "action", pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(7 * N)), 7))),
                                 "column 'action' has type double[7], expected float[7]"),
    "column dropped": (lambda r: _rewrite_data(r, lambda t: t.drop_columns(["action"])),
                       "column 'action' (feature in meta/info.json) is missing"),
    "task_index out of range": (lambda r: _rewrite_data(r, _set_column("task_index", np.full(N, 9))),
                                "task_index outside 0..1"),
}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_the_validator_reports_each_corruption(recorded, tmp_path, corruption):
    root, _ = recorded
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    corrupt, expected = CORRUPTIONS[corruption]
    corrupt(copy)
    problems = validate_dataset(copy)
    assert any(expected in p for p in problems), problems


def test_the_validator_on_a_directory_without_a_dataset(tmp_path):
    assert validate_dataset(tmp_path) == ["meta/info.json: missing (not a LeRobot dataset)"]


@pytest.mark.skipif(not video_available(), reason="PyAV (the optional 'av' package) is not installed")
def test_video_features_are_encoded_to_mp4(tmp_path):
    features = {"action": Feature("float32", (2,)), "observation.images.front": Feature("video", (32, 48, 3))}
    writer = LeRobotDatasetWriter(tmp_path / "ds", fps=10, features=features)
    y, x = np.mgrid[0:32, 0:48]
    frames = np.stack([np.stack([4 * x + 8 * t, 6 * y, np.full_like(x, 40 * t)], axis=-1) for t in range(6)])
    frames = frames.clip(0, 255).astype(np.uint8)  # smooth images that move: what a camera sees, not noise
    writer.add_episode({"action": np.zeros((6, 2), np.float32), "observation.images.front": frames}, "t")
    assert validate_dataset(tmp_path / "ds") == []
    ds = LeRobotDataset(tmp_path / "ds")
    info = ds.info["features"]["observation.images.front"]["info"]
    assert (info["video.height"], info["video.width"], info["video.fps"]) == (32, 48, 10) and info["video.codec"]
    assert (tmp_path / "ds/videos/observation.images.front/chunk-000/file-000.mp4").is_file()
    decoded = ds.video_frames("observation.images.front", 0)
    assert decoded.shape == frames.shape
    assert np.abs(decoded.astype(int) - frames).mean() < 4  # a lossy codec: close, not equal


def test_video_features_without_pyav_are_refused_clearly(tmp_path, monkeypatch):
    import robot_rl.data.lerobot_dataset as module

    monkeypatch.setattr(module, "video_available", lambda: False)
    with pytest.raises(DatasetError, match="need PyAV"):
        LeRobotDatasetWriter(tmp_path / "ds", fps=10, features={"cam": Feature("video", (8, 8, 3))})


# --- a file that is not what its name says: one line naming it ------------------------------------------------

def _truncate(path):
    path.write_bytes(path.read_bytes()[:40])


def _garbage(path):
    path.write_bytes(b"\x00\xffnot parquet at all\x89PNG" * 4)


BROKEN_FILES = {
    "tasks truncated": ("meta/tasks.parquet", _truncate),
    "tasks garbage": ("meta/tasks.parquet", _garbage),
    "episodes truncated": ("meta/episodes/chunk-000/file-000.parquet", _truncate),
    "data truncated": ("data/chunk-000/file-000.parquet", _truncate),
    "stats not UTF-8": ("meta/stats.json", _garbage),
}


@pytest.mark.parametrize("case", BROKEN_FILES)
def test_a_broken_file_is_named_by_the_validator(recorded, tmp_path, case, capsys):
    root, _ = recorded
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    rel, breaks = BROKEN_FILES[case]
    breaks(copy / rel)
    assert validate_main([str(copy)]) == 1  # a problem of the dataset, listed: no traceback
    out = capsys.readouterr().out
    assert any(rel in line and ("Parquet" in line or "JSON" in line) for line in out.splitlines()), out


@pytest.mark.parametrize("case", [c for c in BROKEN_FILES if "stats" not in c])
def test_a_broken_file_is_named_by_the_reader(recorded, tmp_path, case):
    root, _ = recorded
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    rel, breaks = BROKEN_FILES[case]
    breaks(copy / rel)
    with pytest.raises(DatasetError, match=rf"{copy / rel}: not a readable Parquet file") as info:
        dataset = LeRobotDataset(copy)
        dataset.episode(0)
    assert "\n" not in str(info.value)


def test_appending_to_a_dataset_with_a_broken_tasks_file_names_it(recorded):
    root, _ = recorded
    _garbage(root / "meta/tasks.parquet")
    with pytest.raises(DatasetError, match=r"meta/tasks\.parquet: not a readable Parquet file"):
        LeRobotDatasetWriter(root, fps=50, features=FEATURES, robot_type="panda")


def test_a_binary_info_json_is_named(recorded):
    root, _ = recorded
    _garbage(root / "meta/info.json")
    with pytest.raises(DatasetError, match=r"meta/info\.json: not valid JSON"):
        LeRobotDataset(root)
    assert any("meta/info.json: not valid JSON" in p for p in validate_dataset(root))


# --- what LeRobot writes and reads: the episodes table, appends, and datasets of older robot_rl -----------------

def test_the_episodes_table_is_lerobots(recorded):
    """LeRobot's columns in LeRobot's order, with its types: its reader loads all episodes files as one table."""
    from robot_rl.data.lerobot_format import EPISODE_COLUMNS, STAT_NAMES

    root, _ = recorded
    table = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet")
    features = LeRobotDataset(root).features
    stats = [f"stats/{k}/{s}" for k in features for s in STAT_NAMES]
    assert table.column_names == [*EPISODE_COLUMNS, *stats, "meta/episodes/chunk_index", "meta/episodes/file_index"]
    types = table.schema
    assert types.field("stats/next.done/min").type == pa.list_(pa.bool_())  # bool stays bool
    assert types.field("stats/index/max").type == pa.list_(pa.int64())  # int stays int
    assert types.field("stats/observation.state/min").type == pa.list_(pa.float64())
    assert types.field("stats/observation.state/q99").type == pa.list_(pa.float64())
    assert types.field("stats/action/count").type == pa.list_(pa.int64())


def test_an_append_starts_new_files_and_leaves_the_first_writers_alone(recorded):
    root, _ = recorded
    first = {p: p.read_bytes() for p in (root / "data/chunk-000/file-000.parquet",
                                         root / "meta/episodes/chunk-000/file-000.parquet")}
    writer = LeRobotDatasetWriter(root, fps=50, features=FEATURES, robot_type="panda")
    writer.add_episode(_episode(np.random.default_rng(3), 4), "push the cube", success_frame=2)
    writer.add_episode(_episode(np.random.default_rng(4), 2), "push the cube")
    assert all(path.read_bytes() == data for path, data in first.items())  # as LeRobot does when it resumes
    second = pq.read_table(root / "meta/episodes/chunk-000/file-001.parquet")
    assert second.column("episode_index").to_pylist() == [3, 4]
    assert pq.read_table(root / "data/chunk-000/file-001.parquet").num_rows == 6
    ds = LeRobotDataset(root)
    assert [e["success"] for e in ds.episodes] == [True, False, True, True, False]
    assert validate_dataset(root) == []


def test_a_dataset_of_an_older_robot_rl_reads_and_takes_appends(recorded):
    """Older robot_rl: a ``success`` column of its own, bool/int stats stored as float64. Appending after it
    (as LeRobot or this writer does) gives episodes files that Arrow cannot concatenate; the reader reads them
    file by file, and the validator says why LeRobot would refuse the mix."""
    root, _ = recorded
    path = root / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    for i, field in enumerate(table.schema):
        if field.name.startswith("stats/") and field.type in (pa.list_(pa.bool_()), pa.list_(pa.int64())):
            table = table.set_column(i, field.name, table.column(i).cast(pa.list_(pa.float64())))
    pq.write_table(table.append_column("success", pa.array([False, True, False])), path)  # its own column wins
    writer = LeRobotDatasetWriter(root, fps=50, features=FEATURES, robot_type="panda")
    writer.add_episode(_episode(np.random.default_rng(5), 3), "push the cube", success_frame=1)
    with pytest.raises(pa.ArrowException):
        pa.concat_tables([pq.read_table(p) for p in sorted(root.glob("meta/episodes/*/*.parquet"))],
                         promote_options="default")
    ds = LeRobotDataset(root)
    assert [e["success"] for e in ds.episodes] == [False, True, False, True]
    assert ds.episode(3)["next.success"].tolist() == [False, True, True]
    problems = validate_dataset(root)
    assert len(problems) == 1 and "meta/episodes/chunk-000/file-001.parquet: columns differ" in problems[0]
    assert "['success']" in problems[0]


def test_appending_to_an_episodes_table_without_file_indices_is_one_line(recorded):
    root, _ = recorded
    path = root / "meta/episodes/chunk-000/file-000.parquet"
    pq.write_table(pq.read_table(path).drop_columns(["data/file_index"]), path)
    with pytest.raises(DatasetError, match=r"meta/episodes: the last episode has no valid file indices") as info:
        LeRobotDatasetWriter(root, fps=50, features=FEATURES, robot_type="panda")
    assert "\n" not in str(info.value)
