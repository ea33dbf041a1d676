"""Demonstration datasets in the LeRobotDataset v3.0 layout: the writer and the reader (pyarrow; no ``lerobot``).

The format itself (files, columns, dtypes, statistics) is described in :mod:`robot_rl.data.lerobot_format`,
after Hugging Face LeRobot's "LeRobotDataset v3.0" documentation (``docs/source/lerobot-dataset-v3.mdx``) and
its reference implementation (``lerobot/datasets/dataset_writer.py``, ``dataset_metadata.py``); the
validator is :func:`robot_rl.data.lerobot_validate.validate_dataset`.

Writing is episode at a time::

    writer = LeRobotDatasetWriter("demos/push", fps=50, robot_type="panda", features={
        "observation.state": Feature("float32", (7,), names=joint_names),
        "action": Feature("float32", (7,), names=joint_names)})
    writer.add_episode({"observation.state": q, "action": targets}, task="push the cube", success_frame=180)

Crash safety (a teleop session can be killed at any moment): after every ``add_episode`` the directory is
a complete dataset. The current data file is rewritten whole under a temporary name and renamed over the
old one, rather than kept open by a ``ParquetWriter`` (whose footer exists only after ``close()``); files
roll over at ``data_files_size_in_mb``. ``info.json`` is written last. Opening a directory that already
holds a dataset appends to it, if fps and features match.

Video features need PyAV (``pip install av``: not a dependency of this project). Without it, store camera
frames as ``"image"`` features: PNG in the Parquet file, lossless, readable by LeRobot and ``datasets``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robot_rl.data.lerobot_format import (
    CODEBASE_VERSION,
    DATA_PATH,
    DEFAULT_CHUNKS_SIZE,
    DEFAULT_DATA_FILE_MB,
    DEFAULT_FEATURES,
    DEFAULT_VIDEO_FILE_MB,
    EPISODES_PATH,
    INFO_PATH,
    STATS_PATH,
    STEP_FEATURES,
    TASKS_PATH,
    VIDEO_PATH,
    DatasetError,
    Feature,
    aggregate_stats,
    feature_stats,
    frame_schema,
    from_column,
    read_episode_rows,
    read_features,
    read_info,
    read_json,
    read_parquet,
    read_tasks,
    tasks_table,
    to_column,
    write_json_atomic,
    write_parquet_atomic,
)

__all__ = ["DatasetError", "Feature", "LeRobotDataset", "LeRobotDatasetWriter", "video_available"]


def video_available() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def _stats_json(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, list]]:
    return {key: {name: np.asarray(v).tolist() for name, v in s.items()} for key, s in stats.items()}


def _stats_from_json(data: Mapping[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    return {key: {name: np.asarray(v) for name, v in s.items()} for key, s in data.items()}


class LeRobotDatasetWriter:
    """Appends episodes to a LeRobotDataset v3.0 directory (created on the first episode)."""

    def __init__(self, root: str | Path, *, fps: int, features: Mapping[str, Feature], robot_type: str | None = None,
                 data_files_size_in_mb: float = DEFAULT_DATA_FILE_MB, chunks_size: int = DEFAULT_CHUNKS_SIZE) -> None:
        self.root = Path(root)
        if isinstance(fps, bool) or not isinstance(fps, int | np.integer) or fps <= 0:
            raise DatasetError(f"{self.root}: fps must be a positive integer (LeRobot stores it as int), got {fps!r}")
        reserved = sorted(set(features) & (set(DEFAULT_FEATURES) | set(STEP_FEATURES)))
        if reserved:
            raise DatasetError(f"{self.root}: features {reserved} are filled in by the writer; do not declare them")
        bad = [k for k in features if "/" in k]
        if bad:
            raise DatasetError(f"{self.root}: feature names must not contain '/': {bad}")
        self.fps = int(fps)
        self.user_features = dict(features)
        self.features: dict[str, Feature] = {**self.user_features, **STEP_FEATURES, **DEFAULT_FEATURES}
        self.video_keys = [k for k, f in self.features.items() if f.dtype == "video"]
        if self.video_keys and not video_available():
            raise DatasetError(f"{self.root}: video features {self.video_keys} need PyAV (pip install av); "
                               "or declare them with dtype 'image' to store PNG frames in the Parquet files")
        self.robot_type = robot_type
        self.data_files_size_in_mb, self.chunks_size = float(data_files_size_in_mb), int(chunks_size)
        self._schema = frame_schema(self.features)
        self.tasks: list[str] = []
        self._episodes: list[dict[str, Any]] = []  # every episode's row (totals come from it)
        # This writer's episodes file and the rows it holds: a file is only ever rewritten by the writer that
        # started it. Appending to an existing dataset (ours or LeRobot's) starts the next data and episodes
        # files, as LeRobot does when it resumes.
        self._meta_file = (0, 0)
        self._session_rows: list[dict[str, Any]] = []
        self._stats: dict[str, dict[str, np.ndarray]] | None = None
        self._data_file = (0, 0)
        self._codecs: dict[str, str] = {}
        if (self.root / INFO_PATH).exists():
            self._resume()
        elif (self.root / "meta").exists() or (self.root / "data").exists():
            # Other files (a README, raw session logs) may share the directory; a half-made dataset may not.
            raise DatasetError(f"{self.root}: holds meta/ or data/ but no {INFO_PATH} (a damaged or foreign "
                               "dataset); choose a new directory")

    @property
    def total_episodes(self) -> int:
        return len(self._episodes)

    @property
    def total_frames(self) -> int:
        return int(self._episodes[-1]["dataset_to_index"]) if self._episodes else 0

    def _info(self) -> dict[str, Any]:
        return {
            "codebase_version": CODEBASE_VERSION, "robot_type": self.robot_type,
            "total_episodes": self.total_episodes, "total_frames": self.total_frames, "total_tasks": len(self.tasks),
            "chunks_size": self.chunks_size,
            "data_files_size_in_mb": int(m) if (m := self.data_files_size_in_mb).is_integer() else m,
            "video_files_size_in_mb": DEFAULT_VIDEO_FILE_MB, "fps": self.fps,
            "splits": {"train": f"0:{self.total_episodes}"} if self._episodes else {},
            "data_path": DATA_PATH, "video_path": VIDEO_PATH if self.video_keys else None,
            "features": {k: f.to_json() | self._video_info(k, f) for k, f in self.features.items()},
        }

    def _video_info(self, key: str, feature: Feature) -> dict[str, Any]:
        """The stream description LeRobot keeps per video feature (``info``)."""
        if feature.dtype != "video":
            return {}
        height, width, channels = feature.shape
        return {"info": {"video.height": height, "video.width": width, "video.codec": self._codecs.get(key),
                         "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": self.fps,
                         "video.channels": channels, "has_audio": False}}

    def _resume(self) -> None:
        info = read_info(self.root)
        where = self.root / INFO_PATH
        if info.get("codebase_version") != CODEBASE_VERSION:
            raise DatasetError(f"{where}: codebase_version {info.get('codebase_version')!r}; can only append to "
                               f"{CODEBASE_VERSION} datasets")
        if info.get("fps") != self.fps:
            raise DatasetError(f"{where}: recorded at fps {info.get('fps')}, cannot append at fps {self.fps}")
        found = read_features(self.root, info)
        if found != self.features:
            differ = sorted(k for k in set(found) | set(self.features) if found.get(k) != self.features.get(k))
            raise DatasetError(f"{where}: features differ from this recording's in {differ}; record to a new directory")
        if info.get("total_episodes", 0) == 0:
            return
        self._episodes = read_episode_rows(self.root)
        self.tasks = read_tasks(self.root)
        self._stats = _stats_from_json(read_json(self.root / STATS_PATH))
        last = self._episodes[-1]
        try:
            self._data_file = self._next_file(int(last["data/chunk_index"]), int(last["data/file_index"]))
            self._meta_file = self._next_file(int(last.get("meta/episodes/chunk_index", 0)),
                                              int(last.get("meta/episodes/file_index", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise DatasetError(f"{self.root}/meta/episodes: the last episode has no valid file indices "
                               f"({exc})") from None

    def _next_file(self, chunk: int, file: int) -> tuple[int, int]:
        return (chunk + 1, 0) if file + 1 >= self.chunks_size else (chunk, file + 1)

    def _columns(self, data: Mapping[str, np.ndarray], task: str, success_frame: int | None) -> tuple[int, dict]:
        missing = sorted(set(self.user_features) - set(data))
        unknown = sorted(set(data) - set(self.user_features))
        if missing or unknown:
            raise DatasetError(f"{self.root}: episode data is missing {missing} / has undeclared {unknown}")
        lengths = {k: len(v) for k, v in data.items()}
        length = next(iter(lengths.values()), 0)
        if length == 0 or any(n != length for n in lengths.values()):
            raise DatasetError(f"{self.root}: an episode needs ≥ 1 frame and the same frame count in every feature, "
                               f"got {lengths}")
        values: dict[str, np.ndarray] = {}
        for key, feature in self.user_features.items():
            array = np.asarray(data[key])
            if feature.shape == (1,) and array.ndim == 1:
                array = array.reshape(length, 1)
            if array.shape != (length, *feature.shape):
                raise DatasetError(f"{self.root}: feature {key!r} has shape {array.shape}, expected "
                                   f"({length}, {', '.join(map(str, feature.shape))})")
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                bad = np.argwhere(~np.isfinite(array.reshape(length, -1)))[0]
                raise DatasetError(f"{self.root}: feature {key!r} is not finite at frame {bad[0]}, element {bad[1]}")
            values[key] = array
        if success_frame is not None and not 0 <= success_frame < length:
            raise DatasetError(f"{self.root}: success_frame {success_frame} is outside the episode (0..{length - 1})")
        success = np.zeros(length, dtype=bool)
        if success_frame is not None:
            success[success_frame:] = True
        done = np.zeros(length, dtype=bool)
        done[-1] = True
        frame_index = np.arange(length, dtype=np.int64)
        values |= {
            "next.reward": success.astype(np.float32), "next.done": done, "next.success": success,
            "timestamp": (frame_index / self.fps).astype(np.float32), "frame_index": frame_index,
            "episode_index": np.full(length, self.total_episodes, dtype=np.int64),
            "index": self.total_frames + frame_index,
            "task_index": np.full(length, self._task_index(task), dtype=np.int64),
        }
        return length, values

    def _task_index(self, task: str) -> int:
        if not isinstance(task, str) or not task.strip():
            raise DatasetError(f"{self.root}: every episode needs a task description (a non-empty string)")
        return self.tasks.index(task) if task in self.tasks else len(self.tasks)

    def add_episode(self, data: Mapping[str, np.ndarray], task: str, *, success_frame: int | None = None) -> int:
        """Write one episode; returns its episode_index.

        ``data``: every declared feature as an array of shape (T, *shape) (camera frames: uint8 (T, H, W, 3)).
        ``success_frame``: first frame at which the task counts as achieved (``next.success`` is True from
        there on, ``next.reward`` 1.0); None: not achieved. ``next.done`` is True on the last frame.
        """
        length, values = self._columns(data, task, success_frame)
        episode_index = self.total_episodes
        if task not in self.tasks:
            self.tasks.append(task)
        table = pa.Table.from_arrays([to_column(values[k], f) for k, f in self.features.items() if f.dtype != "video"],
                                     schema=self._schema)
        chunk, file = self._data_file
        path = self.root / DATA_PATH.format(chunk_index=chunk, file_index=file)
        if path.exists() and path.stat().st_size / 2**20 + table.nbytes / 2**20 >= self.data_files_size_in_mb:
            chunk, file = self._data_file = self._next_file(chunk, file)
            path = self.root / DATA_PATH.format(chunk_index=chunk, file_index=file)
        if path.exists():
            table = pa.concat_tables([read_parquet(path, schema=self._schema), table])
        write_parquet_atomic(path, table)

        # LeRobot's columns in LeRobot's order (EPISODE_COLUMNS, videos, stats, meta file): its reader loads
        # every episodes file as one table, so a file of ours must have exactly the schema of one of its own.
        row: dict[str, Any] = {
            "episode_index": episode_index, "tasks": [task], "length": length,
            "data/chunk_index": chunk, "data/file_index": file,
            "dataset_from_index": self.total_frames, "dataset_to_index": self.total_frames + length,
        }
        for key in self.video_keys:
            v_chunk, v_file = divmod(episode_index, self.chunks_size)  # one video file per episode
            from robot_rl.data.lerobot_video import encode_video

            self._codecs[key] = encode_video(values[key], self.root / VIDEO_PATH.format(
                video_key=key, chunk_index=v_chunk, file_index=v_file), self.fps)
            row |= {f"videos/{key}/chunk_index": v_chunk, f"videos/{key}/file_index": v_file,
                    f"videos/{key}/from_timestamp": 0.0, f"videos/{key}/to_timestamp": length / self.fps}
        # LeRobot takes timestamp stats from frame_index / fps in float64 (the column itself is float32).
        stats_of = values | {"timestamp": values["frame_index"] / self.fps}
        episode_stats = {k: feature_stats(stats_of[k], f) for k, f in self.features.items() if f.dtype != "string"}
        for key, stats in episode_stats.items():
            # tolist: min/max of bool and int features stay bool and int64 in the table, the rest float64
            row |= {f"stats/{key}/{name}": np.asarray(v).tolist() for name, v in stats.items()}
        meta_chunk, meta_file = self._meta_file
        row |= {"meta/episodes/chunk_index": meta_chunk, "meta/episodes/file_index": meta_file}
        self._session_rows.append(row)
        self._episodes.append(row | {"success": success_frame is not None})
        write_parquet_atomic(self.root / EPISODES_PATH.format(chunk_index=meta_chunk, file_index=meta_file),
                             pa.Table.from_pylist(self._session_rows))
        write_parquet_atomic(self.root / TASKS_PATH, tasks_table(self.tasks))
        if self._stats is None:
            self._stats = episode_stats
        else:
            self._stats = {k: aggregate_stats([self._stats[k], episode_stats[k]]) for k in episode_stats}
        write_json_atomic(self.root / STATS_PATH, _stats_json(self._stats))
        write_json_atomic(self.root / INFO_PATH, self._info())
        return episode_index


class LeRobotDataset:
    """Reads a LeRobotDataset v3.0 directory: metadata, whole columns, or one episode at a time."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.info = read_info(self.root)
        self.features = read_features(self.root, self.info)
        self.fps = self.info.get("fps")
        try:
            self.tasks = read_tasks(self.root) if (self.root / TASKS_PATH).exists() else []
            # Each row also has "success": whether the episode reached its task (episode_success).
            self.episodes: list[dict[str, Any]] = (read_episode_rows(self.root)
                                                   if self.info.get("total_episodes", 0) else [])
        except (pa.ArrowException, KeyError, OSError) as exc:  # a DatasetError names the file itself
            raise DatasetError(f"{self.root}: unreadable metadata ({type(exc).__name__}: {exc})") from None
        self._tables: dict[Path, pa.Table] = {}

    @property
    def num_episodes(self) -> int:
        return len(self.episodes)

    @property
    def num_frames(self) -> int:
        return int(self.info.get("total_frames", 0))

    @property
    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        return _stats_from_json(read_json(self.root / STATS_PATH))

    def data_files(self) -> list[Path]:
        return sorted(self.root.glob("data/chunk-*/file-*.parquet"))

    def _table(self, path: Path) -> pa.Table:
        if path not in self._tables:
            self._tables[path] = read_parquet(path)
        return self._tables[path]

    def table(self) -> pa.Table:
        """Every frame of every episode, in file order."""
        return pa.concat_tables([self._table(p) for p in self.data_files()])

    def column(self, key: str) -> np.ndarray:
        return from_column(self.table().column(key), self.features[key])

    def episode(self, index: int) -> dict[str, np.ndarray]:
        """One episode's frames: every non-video feature as an array (images decoded to uint8 (T, H, W, 3))."""
        if not 0 <= index < self.num_episodes:
            raise DatasetError(f"{self.root}: no episode {index} (the dataset has {self.num_episodes})")
        meta = self.episodes[index]
        path = self.root / self.info["data_path"].format(chunk_index=meta["data/chunk_index"],
                                                         file_index=meta["data/file_index"])
        table = self._table(path)
        rows = table.filter(pc.equal(table.column("episode_index"), index))
        return {k: from_column(rows.column(k), f) for k, f in self.features.items() if f.dtype != "video"}

    def video_frames(self, key: str, index: int) -> np.ndarray:
        """Decoded frames of a video feature for one episode (needs PyAV)."""
        from robot_rl.data.lerobot_video import decode_video

        meta = self.episodes[index]
        path = self.root / self.info["video_path"].format(video_key=key, chunk_index=meta[f"videos/{key}/chunk_index"],
                                                          file_index=meta[f"videos/{key}/file_index"])
        first = round(meta[f"videos/{key}/from_timestamp"] * self.fps)
        return decode_video(path)[first: first + meta["length"]]
