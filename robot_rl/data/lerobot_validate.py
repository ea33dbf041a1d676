"""Check a directory against the LeRobotDataset v3.0 layout described in :mod:`robot_rl.data.lerobot_format`.

``validate_dataset(root)`` returns a list of problems, each naming the file and what is wrong (empty: valid).
It checks what a reader relies on: info.json's fields and feature entries; the Parquet columns and their
Arrow types; episode metadata (contiguous episode indices, ``dataset_from_index``/``dataset_to_index``
spans that tile the frames, ``length``); per-frame ``index`` (global, contiguous), ``frame_index`` (0..length-1
in each episode), ``timestamp`` (= frame_index / fps, LeRobot's 1e-4 s tolerance), ``task_index``; tasks;
stats for every feature; video files for video features.

    python -m robot_rl.data.lerobot_validate DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robot_rl.data.lerobot_format import (
    CAMERA_DTYPES,
    CODEBASE_VERSION,
    DEFAULT_FEATURES,
    INFO_PATH,
    QUANTILE_NAMES,
    STAT_NAMES,
    STATS_PATH,
    TASKS_PATH,
    DatasetError,
    Feature,
    arrow_type,
    episode_files,
    read_episode_rows,
    read_parquet,
)

REQUIRED_INFO: dict[str, type | tuple[type, ...]] = {
    "codebase_version": str, "fps": (int, float), "features": dict, "total_episodes": int, "total_frames": int,
    "total_tasks": int, "chunks_size": int, "splits": dict, "data_path": str,
}
EPISODE_REQUIRED = ("episode_index", "tasks", "length", "data/chunk_index", "data/file_index", "dataset_from_index",
                    "dataset_to_index")
TIMESTAMP_TOLERANCE_S = 1e-4  # LeRobot's default tolerance_s


def _type_matches(found: pa.DataType, expected: pa.DataType) -> bool:
    """Vectors may be stored as variable-size lists too (older ``datasets``); the value type must match. List
    field names ("item", "element") differ between writers and do not matter."""
    if not pa.types.is_fixed_size_list(expected):
        return found == expected
    if pa.types.is_fixed_size_list(found):
        return found.value_type == expected.value_type and found.list_size == expected.list_size
    return (pa.types.is_list(found) or pa.types.is_large_list(found)) and found.value_type == expected.value_type


def _describe(t: pa.DataType) -> str:
    if pa.types.is_fixed_size_list(t):
        return f"{t.value_type}[{t.list_size}]"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list<{t.value_type}>"
    return str(t)


def _check_info(info: Any) -> tuple[list[str], dict[str, Feature]]:
    problems: list[str] = []
    if not isinstance(info, dict):
        return [f"{INFO_PATH}: not a JSON object"], {}
    for key, types in REQUIRED_INFO.items():
        if key not in info:
            problems.append(f"{INFO_PATH}: missing field {key!r}")
        elif not isinstance(info[key], types) or isinstance(info[key], bool):
            problems.append(f"{INFO_PATH}: field {key!r} has the wrong type ({type(info[key]).__name__})")
    if info.get("codebase_version") not in (None, CODEBASE_VERSION):
        problems.append(f"{INFO_PATH}: codebase_version is {info['codebase_version']!r}, expected {CODEBASE_VERSION!r}")
    if isinstance(info.get("fps"), int | float) and info["fps"] <= 0:
        problems.append(f"{INFO_PATH}: fps must be positive, got {info['fps']}")
    features: dict[str, Feature] = {}
    for key, value in (info.get("features") or {}).items():
        try:
            features[key] = Feature.from_json(key, value)
        except DatasetError as exc:
            problems.append(f"{INFO_PATH}: {exc}")
    for key, expected in DEFAULT_FEATURES.items():
        if key not in features:
            problems.append(f"{INFO_PATH}: feature {key!r} (present in every LeRobot dataset) is missing")
        elif (features[key].dtype, features[key].shape) != (expected.dtype, expected.shape):
            problems.append(f"{INFO_PATH}: feature {key!r} is {features[key].dtype}{list(features[key].shape)}, "
                            f"expected {expected.dtype}{list(expected.shape)}")
    if any(f.dtype == "video" for f in features.values()) and not isinstance(info.get("video_path"), str):
        problems.append(f"{INFO_PATH}: has video features but no 'video_path' template")
    return problems, features


def _check_tasks(root: Path, info: dict) -> tuple[list[str], int]:
    path = root / TASKS_PATH
    if not path.exists():
        return [f"{TASKS_PATH}: missing"], 0
    try:
        table = read_parquet(path)
    except DatasetError as exc:
        return [str(exc)], 0
    if {"task_index", "task"} - set(table.column_names):
        return [f"{TASKS_PATH}: needs columns 'task_index' and 'task', has {table.column_names}"], 0
    problems = []
    indices = np.sort(table.column("task_index").to_numpy())
    if not np.array_equal(indices, np.arange(len(indices))):
        problems.append(f"{TASKS_PATH}: task_index is not 0..{len(indices) - 1}")
    if len(set(table.column("task").to_pylist())) != len(indices):
        problems.append(f"{TASKS_PATH}: duplicate task descriptions")
    if info.get("total_tasks") != len(indices):
        problems.append(f"{INFO_PATH}: total_tasks is {info.get('total_tasks')}, {TASKS_PATH} has {len(indices)}")
    return problems, len(indices)


def _check_episodes(root: Path, info: dict) -> tuple[list[str], list[dict]]:
    try:
        rows = read_episode_rows(root)
    except DatasetError as exc:  # names the file
        return [str(exc)], []
    # LeRobot loads every episodes file as one table: they must agree on the columns (it fails with "column
    # names don't match" otherwise).
    schemas = {str(path.relative_to(root)): set(pq.read_schema(path).names) for path in episode_files(root)}
    first_name, first = next(iter(schemas.items()))
    for name, columns in schemas.items():
        if columns != first:
            problems_cols = sorted(columns ^ first)
            return [f"{name}: columns differ from {first_name}'s in {problems_cols[:6]} (LeRobot reads every "
                    "episodes file as one table)"], rows
    missing = [c for c in EPISODE_REQUIRED if c not in rows[0]] if rows else []
    if missing:
        return [f"meta/episodes: missing columns {missing}"], []
    problems = []
    indices = [r["episode_index"] for r in rows]
    if indices != list(range(len(rows))):
        problems.append(f"meta/episodes: episode_index is not contiguous 0..{len(rows) - 1}: {indices[:20]}")
    if info.get("total_episodes") != len(rows):
        problems.append(f"{INFO_PATH}: total_episodes is {info.get('total_episodes')}, meta/episodes has {len(rows)}")
    expected_from = 0
    for r in rows:
        span = f"episode {r['episode_index']}"
        if r["dataset_from_index"] != expected_from:
            problems.append(f"meta/episodes: {span} starts at index {r['dataset_from_index']}, "
                            f"expected {expected_from}")
        if r["dataset_to_index"] - r["dataset_from_index"] != r["length"]:
            problems.append(f"meta/episodes: {span} length {r['length']} != dataset_to_index - dataset_from_index")
        expected_from = r["dataset_to_index"]
    if rows and info.get("total_frames") != expected_from:
        problems.append(f"{INFO_PATH}: total_frames is {info.get('total_frames')}, the episodes cover {expected_from}")
    return problems, rows


def _check_frames(root: Path, info: dict, features: dict[str, Feature], episodes: list[dict],
                  n_tasks: int) -> list[str]:
    files = sorted(root.glob("data/chunk-*/file-*.parquet"))
    if not files:
        return ["data/: no Parquet files"]
    problems: list[str] = []
    expected = {k: arrow_type(f) for k, f in features.items() if f.dtype != "video"}
    columns: dict[str, list[np.ndarray]] = {k: [] for k in ("index", "episode_index", "frame_index", "timestamp",
                                                            "task_index")}
    file_of_row: list[np.ndarray] = []
    for number, path in enumerate(files):
        name = str(path.relative_to(root))
        try:
            table = read_parquet(path)
        except DatasetError as exc:
            problems.append(f"{name}: {str(exc).removeprefix(f'{path}: ')}")
            continue
        schema = table.schema
        for key in sorted(set(expected) - set(schema.names)):
            problems.append(f"{name}: column {key!r} (feature in {INFO_PATH}) is missing")
        for key in sorted(set(schema.names) - set(expected)):
            problems.append(f"{name}: column {key!r} is not a feature in {INFO_PATH}")
        for key in sorted(set(expected) & set(schema.names)):
            if not _type_matches(schema.field(key).type, expected[key]):
                problems.append(f"{name}: column {key!r} has type {_describe(schema.field(key).type)}, "
                                f"expected {_describe(expected[key])}")
        if any(k not in schema.names for k in columns):
            continue
        for key in columns:
            columns[key].append(table.column(key).to_numpy())
        file_of_row.append(np.full(table.num_rows, number))
    if not all(columns.values()) or problems:
        return problems
    col = {k: np.concatenate(v) for k, v in columns.items()}
    rows = len(col["index"])
    if rows != info.get("total_frames"):
        problems.append(f"data/: {rows} frames, {INFO_PATH} total_frames says {info.get('total_frames')}")
    bad = np.flatnonzero(col["index"] != np.arange(rows))
    if bad.size:
        problems.append(f"data/: 'index' is not contiguous 0..{rows - 1} "
                        f"(first bad row {bad[0]}: {col['index'][bad[0]]})")
    fps = info.get("fps") or 1
    file_names = [str(p.relative_to(root)) for p in files]
    for ep in episodes:
        e = ep["episode_index"]
        where = np.flatnonzero(col["episode_index"] == e)
        if where.size != ep["length"]:
            problems.append(f"data/: episode {e} has {where.size} frames, meta/episodes says {ep['length']}")
            continue
        if where.size and (where[0] != ep["dataset_from_index"] or np.any(np.diff(where) != 1)):
            problems.append(f"data/: episode {e}'s frames are not the rows {ep['dataset_from_index']}.."
                            f"{ep['dataset_to_index'] - 1}")
        frame_index = col["frame_index"][where]
        if not np.array_equal(frame_index, np.arange(where.size)):
            problems.append(f"data/: episode {e}'s frame_index is not 0..{where.size - 1}")
        elif np.any(np.abs(col["timestamp"][where] - frame_index / fps) > TIMESTAMP_TOLERANCE_S):
            problems.append(f"data/: episode {e}'s timestamps are not frame_index / fps (fps {fps})")
        expected_file = info.get("data_path", "").format(chunk_index=ep["data/chunk_index"],
                                                         file_index=ep["data/file_index"])
        in_files = {file_names[i] for i in np.unique(np.concatenate(file_of_row)[where])}
        if in_files and in_files != {expected_file}:
            problems.append(f"data/: episode {e} is in {sorted(in_files)}, meta/episodes says {expected_file}")
    extra = sorted(set(np.unique(col["episode_index"]).tolist()) - {ep["episode_index"] for ep in episodes})
    if extra:
        problems.append(f"data/: frames of episodes {extra[:10]} that meta/episodes does not list")
    if np.any((col["task_index"] < 0) | (col["task_index"] >= n_tasks)):
        problems.append(f"data/: task_index outside 0..{n_tasks - 1} ({TASKS_PATH})")
    return problems


def _check_stats(root: Path, features: dict[str, Feature]) -> list[str]:
    path = root / STATS_PATH
    if not path.exists():
        return [f"{STATS_PATH}: missing"]
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        return [f"{STATS_PATH}: not valid JSON ({exc})"]
    problems = []
    for key, feature in features.items():
        if feature.dtype == "string":
            continue
        entry = stats.get(key)
        if not isinstance(entry, dict):
            problems.append(f"{STATS_PATH}: no stats for feature {key!r}")
            continue
        absent = [s for s in STAT_NAMES if s not in entry]
        if absent:
            problems.append(f"{STATS_PATH}: feature {key!r} lacks {absent}")
            continue
        shape = (3, 1, 1) if feature.dtype in CAMERA_DTYPES else feature.shape
        for name in ("min", "max", "mean", "std", *QUANTILE_NAMES):
            if np.shape(entry[name]) != shape:
                problems.append(f"{STATS_PATH}: {key}/{name} has shape {np.shape(entry[name])}, expected {shape}")
    return problems


def _check_videos(root: Path, info: dict, features: dict[str, Feature], episodes: list[dict]) -> list[str]:
    problems = []
    for key in (k for k, f in features.items() if f.dtype == "video"):
        for ep in episodes:
            try:
                rel = info["video_path"].format(video_key=key, chunk_index=ep[f"videos/{key}/chunk_index"],
                                                file_index=ep[f"videos/{key}/file_index"])
            except KeyError as exc:
                problems.append(f"meta/episodes: episode {ep['episode_index']} lacks {exc} for video {key!r}")
                break
            if not (root / rel).is_file():
                problems.append(f"{rel}: missing (video {key!r}, episode {ep['episode_index']})")
    return problems


def validate_dataset(root: str | Path) -> list[str]:
    """Every way ``root`` departs from the LeRobotDataset v3.0 layout; an empty list when it is valid."""
    root = Path(root)
    try:
        info = json.loads((root / INFO_PATH).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [f"{INFO_PATH}: missing (not a LeRobot dataset)"]
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        return [f"{INFO_PATH}: not valid JSON ({exc})"]
    problems, features = _check_info(info)
    if problems:
        return problems  # the rest is checked against the features
    task_problems, n_tasks = _check_tasks(root, info)
    episode_problems, episodes = _check_episodes(root, info)
    problems += task_problems + episode_problems
    problems += _check_frames(root, info, features, episodes, n_tasks)
    problems += _check_stats(root, features)
    problems += _check_videos(root, info, features, episodes)
    return problems


def dataset_validate(path: str, /) -> int:
    """Check a directory against the LeRobotDataset v3.0 layout; prints each problem (exit 1 if any)."""
    problems = validate_dataset(path)
    for problem in problems:
        print(problem)
    print(f"{path}: {'valid LeRobotDataset v3.0' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m robot_rl.data.lerobot_validate DATASET_DIR", file=sys.stderr)
        return 2
    return dataset_validate(args[0])


if __name__ == "__main__":
    sys.exit(main())
