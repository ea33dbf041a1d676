"""The LeRobotDataset v3.0 format: features, Arrow column types, statistics, metadata files (pyarrow only).

Layout and field names follow Hugging Face LeRobot's "LeRobotDataset v3.0" documentation
(``docs/source/lerobot-dataset-v3.mdx``) and its reference implementation (``lerobot/datasets/utils.py``,
``dataset_metadata.py``, ``dataset_writer.py``, ``compute_stats.py``); the code here is our own::

    meta/info.json                                   codebase_version "v3.0", fps, features, totals, path templates
    meta/stats.json                                  per feature: min, max, mean, std, count (all frames)
    meta/tasks.parquet                               task_index (int64) + task (string, the pandas index)
    meta/episodes/chunk-000/file-000.parquet         one row per episode (see EPISODE_COLUMNS)
    data/chunk-{c:03d}/file-{f:03d}.parquet          one row per frame, many episodes per file
    videos/{key}/chunk-{c:03d}/file-{f:03d}.mp4      only for "video" features (one file per episode here)

Frame columns: the caller's features (``observation.state``, ``action``, ...; float vectors are Arrow
``fixed_size_list<float32>[n]``, shape-(1,) features plain scalars, as ``datasets`` stores ``Sequence(length=n)``
and ``Value``), plus what every LeRobot dataset has — ``timestamp`` float32 (= frame_index / fps),
``frame_index``, ``episode_index``, ``index`` (global, contiguous), ``task_index`` (all int64) — and the
step flags LeRobot's sim datasets record: ``next.reward`` float32, ``next.done`` bool, ``next.success`` bool.
Camera frames are either ``"image"`` features (PNG bytes in the Parquet file, as ``datasets.Image`` stores
them: ``struct<bytes: binary, path: string>``) or ``"video"`` features (MP4 through PyAV, when installed).

Our extension: the episodes table has a ``success`` column (bool) — LeRobot ignores columns it does not use.
The writer and reader are in :mod:`robot_rl.data.lerobot_dataset`, the validator in
:mod:`robot_rl.data.lerobot_validate`.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.errors import RobotRLError

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as exc:  # pragma: no cover - part of the teleop extra
    raise ImportError("robot_rl.data.lerobot_format needs pyarrow: pip install 'robot-rl[teleop]'") from exc

CODEBASE_VERSION = "v3.0"
INFO_PATH, STATS_PATH, TASKS_PATH = "meta/info.json", "meta/stats.json", "meta/tasks.parquet"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DEFAULT_CHUNKS_SIZE, DEFAULT_DATA_FILE_MB, DEFAULT_VIDEO_FILE_MB = 1000, 100, 500
NUMERIC_DTYPES = ("float32", "float64", "int64", "int32", "int16", "uint8", "bool")
CAMERA_DTYPES = ("image", "video")
STAT_NAMES = ("min", "max", "mean", "std", "count")
EPISODE_COLUMNS = ("episode_index", "tasks", "length", "data/chunk_index", "data/file_index", "dataset_from_index",
                   "dataset_to_index", "meta/episodes/chunk_index", "meta/episodes/file_index", "success")


class DatasetError(RobotRLError, ValueError):
    """A dataset that cannot be written or read as asked; the message names the dataset and the problem."""


@dataclass(frozen=True)
class Feature:
    """One entry of info.json's ``features``: dtype, shape, and optional per-element names."""

    dtype: str
    shape: tuple[int, ...]
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.dtype not in NUMERIC_DTYPES + CAMERA_DTYPES + ("string",):
            raise DatasetError(f"feature dtype {self.dtype!r} is not one of {NUMERIC_DTYPES + CAMERA_DTYPES}")
        if not self.shape or any(int(s) <= 0 for s in self.shape):
            raise DatasetError(f"feature shape {self.shape!r} must be non-empty positive sizes")
        if self.dtype in CAMERA_DTYPES and (len(self.shape) != 3 or self.shape[2] != 3):
            raise DatasetError(f"a camera feature has shape (height, width, 3), got {self.shape!r}")
        if self.dtype in NUMERIC_DTYPES and len(self.shape) != 1:
            raise DatasetError(f"numeric features are vectors (shape (n,)), got {self.shape!r}")
        if self.names is not None and self.dtype in NUMERIC_DTYPES and len(self.names) != self.shape[0]:
            raise DatasetError(f"{len(self.names)} names for a feature of shape {self.shape!r}")

    def to_json(self) -> dict[str, Any]:
        names = list(self.names) if self.names is not None else None
        if self.dtype in CAMERA_DTYPES:
            names = ["height", "width", "channels"]
        return {"dtype": self.dtype, "shape": list(self.shape), "names": names}

    @classmethod
    def from_json(cls, key: str, value: Any) -> Feature:
        try:
            names = value.get("names")
            if isinstance(names, dict):  # older LeRobot datasets: {"motors": [...]}
                names = next(iter(names.values()), None)
            if value["dtype"] in CAMERA_DTYPES:
                names = None
            return cls(str(value["dtype"]), tuple(int(s) for s in value["shape"]),
                       tuple(str(n) for n in names) if names is not None else None)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise DatasetError(f"feature {key!r}: not a valid feature entry {value!r} ({exc})") from None


DEFAULT_FEATURES: dict[str, Feature] = {
    "timestamp": Feature("float32", (1,)),
    "frame_index": Feature("int64", (1,)),
    "episode_index": Feature("int64", (1,)),
    "index": Feature("int64", (1,)),
    "task_index": Feature("int64", (1,)),
}
STEP_FEATURES: dict[str, Feature] = {
    "next.reward": Feature("float32", (1,)),
    "next.done": Feature("bool", (1,)),
    "next.success": Feature("bool", (1,)),
}
_ARROW_SCALARS = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "int32": pa.int32(),
                  "int16": pa.int16(), "uint8": pa.uint8(), "bool": pa.bool_(), "string": pa.string()}
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def arrow_type(feature: Feature) -> pa.DataType:
    """The Arrow type a feature's Parquet column has (what ``datasets`` writes for it)."""
    if feature.dtype == "image":
        return IMAGE_TYPE
    scalar = _ARROW_SCALARS[feature.dtype]
    return scalar if feature.shape == (1,) else pa.list_(scalar, feature.shape[0])


def _hf_feature(feature: Feature) -> dict[str, Any]:
    """The ``datasets`` feature description stored in the Parquet schema metadata (key ``huggingface``)."""
    if feature.dtype == "image":
        return {"_type": "Image"}
    value = {"dtype": feature.dtype, "_type": "Value"}
    return value if feature.shape == (1,) else {"feature": value, "length": feature.shape[0], "_type": "Sequence"}


def frame_schema(features: Mapping[str, Feature]) -> pa.Schema:
    columns = {k: f for k, f in features.items() if f.dtype != "video"}
    hf = {"info": {"features": {k: _hf_feature(f) for k, f in columns.items()}}}
    return pa.schema([pa.field(k, arrow_type(f)) for k, f in columns.items()],
                     metadata={b"huggingface": json.dumps(hf).encode()})


def encode_png(frame: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8)).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def to_column(values: np.ndarray, feature: Feature) -> pa.Array:
    """(T, *shape) values → the feature's Arrow column, without a round trip through Python objects."""
    if feature.dtype == "image":
        encoded = [encode_png(frame) for frame in values]
        return pa.StructArray.from_arrays([pa.array(encoded, pa.binary()), pa.nulls(len(encoded), pa.string())],
                                          fields=list(IMAGE_TYPE))
    flat = np.ascontiguousarray(values, dtype=np.dtype(feature.dtype)).reshape(len(values), -1)
    if feature.shape == (1,):
        return pa.array(flat[:, 0])
    return pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), feature.shape[0])


def from_column(column: pa.ChunkedArray | pa.Array, feature: Feature) -> np.ndarray:
    """An Arrow column → (T, *shape) numpy array (``(T,)`` for shape-(1,) features; images decoded)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if feature.dtype == "image":
        frames = [decode_png(item["bytes"]) for item in column.to_pylist()]
        return np.stack(frames) if frames else np.zeros((0, *feature.shape), dtype=np.uint8)
    if pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type) or pa.types.is_large_list(
            column.type):
        flat = column.flatten().to_numpy(zero_copy_only=False)
        return flat.reshape(len(column), -1)
    return column.to_numpy(zero_copy_only=False)


# --- statistics (min / max / mean / std / count per feature, as LeRobot's compute_stats defines them) ----------

def feature_stats(values: np.ndarray, feature: Feature) -> dict[str, np.ndarray]:
    """Stats over the frames of one episode. Images: per channel, scaled to [0, 1], shape (3, 1, 1)."""
    if feature.dtype in CAMERA_DTYPES:
        step = max(1, len(values) // 100)  # LeRobot samples about 100 frames per episode too
        data = np.asarray(values[::step], dtype=np.float64).transpose(0, 3, 1, 2) / 255.0  # (T, C, H, W)
        axes: tuple[int, ...] = (0, 2, 3)
        reduce = {"min": data.min(axis=axes), "max": data.max(axis=axes), "mean": data.mean(axis=axes),
                  "std": data.std(axis=axes)}
        out = {k: v.reshape(3, 1, 1) for k, v in reduce.items()}
    else:
        data = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        out = {"min": data.min(axis=0), "max": data.max(axis=0), "mean": data.mean(axis=0), "std": data.std(axis=0)}
    out["count"] = np.array([len(values)], dtype=np.int64)
    return out


def aggregate_stats(per_episode: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Combine episode stats exactly: count-weighted mean, pooled variance (within + between episodes)."""
    counts = np.array([s["count"][0] for s in per_episode], dtype=np.float64)
    means = np.stack([s["mean"] for s in per_episode])
    variances = np.stack([s["std"] ** 2 for s in per_episode])
    weights = counts.reshape(-1, *([1] * (means.ndim - 1)))
    total = counts.sum()
    mean = (means * weights).sum(axis=0) / total
    variance = ((variances + (means - mean) ** 2) * weights).sum(axis=0) / total
    return {"min": np.min(np.stack([s["min"] for s in per_episode]), axis=0),
            "max": np.max(np.stack([s["max"] for s in per_episode]), axis=0),
            "mean": mean, "std": np.sqrt(variance), "count": np.array([int(total)], dtype=np.int64)}


# --- small file helpers -----------------------------------------------------------------------------------

def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=4, allow_nan=False) + "\n")
    os.replace(tmp, path)


def write_parquet_atomic(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="snappy")
    os.replace(tmp, path)


def tasks_table(tasks: list[str]) -> pa.Table:
    """meta/tasks.parquet as pandas writes ``DataFrame({"task_index": ...}, index=Index(tasks, name="task"))``:
    LeRobot reads it with ``pd.read_parquet`` and looks tasks up by that index."""
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
             "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    schema = pa.schema([("task_index", pa.int64()), ("task", pa.string())],
                       metadata={b"pandas": json.dumps(pandas_meta).encode()})
    return pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())},
                    schema=schema)


def read_parquet(path: Path, **kwargs: Any) -> pa.Table:
    """``pq.read_table``, with any failure to read the file (truncated, not Parquet, a wrong schema: the
    whole Arrow error family, and OS errors) as one :class:`DatasetError` naming it."""
    try:
        return pq.read_table(path, **kwargs)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DatasetError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None


def read_json(path: Path) -> Any:
    """A JSON file (UTF-8), with a broken one as one :class:`DatasetError` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise DatasetError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read file ({exc.strerror})") from None


def read_info(root: Path) -> dict[str, Any]:
    path = root / INFO_PATH
    if not path.exists():
        raise DatasetError(f"{root}: no {INFO_PATH} — not a LeRobot dataset")
    info = read_json(path)
    if not isinstance(info, dict) or not isinstance(info.get("features"), dict):
        raise DatasetError(f"{path}: has no 'features' object")
    return info


def read_features(root: Path, info: dict[str, Any]) -> dict[str, Feature]:
    return {k: Feature.from_json(k, v) for k, v in info["features"].items()}


def read_tasks(root: Path) -> list[str]:
    path = root / TASKS_PATH
    table = read_parquet(path)
    if {"task_index", "task"} - set(table.column_names):
        raise DatasetError(f"{path}: needs columns 'task_index' and 'task', has {table.column_names}")
    order = np.argsort(table.column("task_index").to_numpy())
    tasks = table.column("task").to_pylist()
    return [tasks[i] for i in order]


def read_episodes_table(root: Path) -> pa.Table:
    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        raise DatasetError(f"{root}: no episode metadata under meta/episodes/")
    tables = [read_parquet(f) for f in files]
    try:
        return pa.concat_tables(tables, promote_options="default")
    except pa.ArrowException as exc:
        raise DatasetError(f"{root}/meta/episodes: the episode files do not fit together ({exc})") from None
