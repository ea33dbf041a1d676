"""The LeRobotDataset v3.0 format: features, Arrow column types, statistics, metadata files (pyarrow only).

Layout and field names follow Hugging Face LeRobot's "LeRobotDataset v3.0" documentation
(``docs/source/lerobot-dataset-v3.mdx``) and its reference implementation (``lerobot/datasets/utils.py``,
``dataset_metadata.py``, ``dataset_writer.py``, ``compute_stats.py``); the code here is our own::

    meta/info.json                                   codebase_version "v3.0", fps, features, totals, path templates
    meta/stats.json                                  per feature: min, max, mean, std, count, q01…q99 (all frames)
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

The episodes table and the statistics are exactly what LeRobot 0.4 writes (same columns in the same order,
same Arrow types, the same numbers: see "statistics" below), so LeRobot can append episodes to a dataset
written here and both read the result (``benchmarks/lerobot_roundtrip.py``). Whether an episode reached its
task is in its frames (``next.success``) and so in its stats (``stats/next.success/max``): no column of our own,
which LeRobot's reader would refuse once it appends (its files must share one schema). The writer and reader
are in :mod:`robot_rl.data.lerobot_dataset`, the validator in :mod:`robot_rl.data.lerobot_validate`.
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
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)  # LeRobot's DEFAULT_QUANTILES
QUANTILE_NAMES = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)  # q01, q10, q50, q90, q99
QUANTILE_BINS = 5000  # LeRobot's RunningQuantileStats default
STAT_NAMES = ("min", "max", "mean", "std", "count", *QUANTILE_NAMES)
# The episodes table's columns, in LeRobot's order: these, then videos/<key>/… per video feature, then
# stats/<feature>/<stat> per feature and stat (STAT_NAMES order), then meta/episodes/chunk_index and file_index.
EPISODE_COLUMNS = ("episode_index", "tasks", "length", "data/chunk_index", "data/file_index", "dataset_from_index",
                   "dataset_to_index")


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


# --- statistics, as LeRobot 0.4 computes them (``lerobot/datasets/compute_stats.py``) ---------------------------
#
# Per episode and feature: min, max, mean, std, count and the quantiles q01 … q99 (LeRobot's quantile
# normalization, used by pi0.5, raises without them), from one update of LeRobot's ``RunningQuantileStats``:
# moments in the data's own dtype (float32 stays float32, so the numbers are LeRobot's to the last bit), min and
# max in the feature's dtype (bool and int features keep it: LeRobot stores them so in the episodes table, and a
# table mixing its rows with float64 ones cannot be read as one), quantiles interpolated in a 5000-bin
# histogram. Cameras: about 100 frames sampled, per channel, scaled to [0, 1], shape (3, 1, 1). Aggregation over
# episodes: count-weighted mean, pooled variance, count-weighted quantiles (LeRobot's ``aggregate_stats``).

def _stats_of_batch(batch: np.ndarray) -> dict[str, np.ndarray]:
    """(N, D) → per-column stats: ``RunningQuantileStats.update`` once, then ``get_statistics``; the same numpy
    operations on the same dtypes (comments mark where that matters)."""
    mean = np.mean(batch, axis=0)
    mean_of_squares = np.mean(batch**2, axis=0)  # uint8 image pixels wrap around here, in LeRobot too
    low, high = np.min(batch, axis=0), np.max(batch, axis=0)
    if len(batch) < 2:  # LeRobot's _compute_basic_stats: quantiles are the mean
        out = {"min": low, "max": high, "mean": mean, "std": np.std(batch, axis=0)}
        return out | {name: mean.copy() for name in QUANTILE_NAMES}
    std = np.sqrt(np.maximum(0, mean_of_squares - mean**2))
    out = {"min": low.copy(), "max": high.copy(), "mean": mean.copy(), "std": std}
    columns = []
    for i in range(batch.shape[1]):
        edges = np.linspace(low[i] - 1e-10, high[i] + 1e-10, QUANTILE_BINS + 1)
        column = batch[:, i].view(np.uint8) if batch.dtype == bool else batch[:, i]  # numpy converts so, warning
        hist, _ = np.histogram(column, bins=edges)
        columns.append((np.cumsum(hist.astype(np.float64)), edges))
    for q, name in zip(QUANTILES, QUANTILE_NAMES, strict=True):
        out[name] = np.array([_quantile(cumsum, edges, q * len(batch)) for cumsum, edges in columns])
    return out


def _quantile(cumsum: np.ndarray, edges: np.ndarray, target: float) -> float:
    """LeRobot's ``_compute_single_quantile``: linear interpolation inside the bin where the count is reached."""
    idx = int(np.searchsorted(cumsum, target))
    if idx == 0:
        return edges[0]
    if idx >= len(cumsum):
        return edges[-1]
    before = cumsum[idx - 1]
    in_bin = cumsum[idx] - before
    if in_bin == 0:
        return edges[idx]
    return edges[idx] + (target - before) / in_bin * (edges[idx + 1] - edges[idx])


def _sample_indices(length: int) -> list[int]:
    """The frames LeRobot samples for image stats (``sample_indices``: 100 up to ~500 frames, then length^0.75)."""
    count = max(min(100, length), min(int(length**0.75), 10_000))
    return np.round(np.linspace(0, length - 1, count)).astype(int).tolist()


def feature_stats(values: np.ndarray, feature: Feature) -> dict[str, np.ndarray]:
    """Stats over the frames of one episode, as LeRobot 0.4 writes them (see above)."""
    if feature.dtype in CAMERA_DTYPES:
        frames = np.asarray(values, dtype=np.uint8)[_sample_indices(len(values))].transpose(0, 3, 1, 2)
        if max(frames.shape[2:]) >= 300:  # LeRobot's auto_downsample_height_width
            step = int(max(frames.shape[2:]) / 150)
            frames = frames[:, :, ::step, ::step]
        stats = _stats_of_batch(frames.transpose(0, 2, 3, 1).reshape(-1, 3))
        stats = {k: np.asarray(v).reshape(3, 1, 1) / 255.0 for k, v in stats.items()}
        return _in_order(stats, len(frames))
    data = np.asarray(values)
    return _in_order(_stats_of_batch(data.reshape(len(data), -1) if data.ndim != 2 else data), len(values))


def _in_order(stats: dict[str, np.ndarray], count: int) -> dict[str, np.ndarray]:
    """LeRobot's key order (the episodes table's column order follows it): min, max, mean, std, count, q…"""
    return {name: np.array([count], dtype=np.int64) if name == "count" else stats[name] for name in STAT_NAMES}


def aggregate_stats(per_episode: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Combine episode stats (LeRobot's ``aggregate_feature_stats``): count-weighted mean, pooled variance
    (within + between episodes), count-weighted quantiles where every part has them."""
    means = np.stack([s["mean"] for s in per_episode])
    variances = np.stack([np.asarray(s["std"]) ** 2 for s in per_episode])
    counts = np.stack([np.asarray(s["count"]) for s in per_episode])
    total = counts.sum(axis=0)
    while counts.ndim < means.ndim:
        counts = np.expand_dims(counts, axis=-1)
    mean = (means * counts).sum(axis=0) / total
    variance = ((variances + (means - mean) ** 2) * counts).sum(axis=0) / total
    out = {"min": np.min(np.stack([s["min"] for s in per_episode]), axis=0),
           "max": np.max(np.stack([s["max"] for s in per_episode]), axis=0),
           "mean": mean, "std": np.sqrt(variance), "count": total}
    for name in QUANTILE_NAMES:
        if all(name in s for s in per_episode):
            out[name] = (np.stack([s[name] for s in per_episode]) * counts).sum(axis=0) / total
    return out


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


def episode_files(root: Path) -> list[Path]:
    return sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))


def read_episode_rows(root: Path) -> list[dict[str, Any]]:
    """Every row of every episodes file, in file order, as dicts, each with ``success`` (see
    :func:`episode_success`). Read file by file: files written by different writers may type a column
    differently (an older robot_rl stored the stats of bool features as float64, LeRobot as bool), which
    Arrow cannot concatenate but which mean the same values."""
    files = episode_files(root)
    if not files:
        raise DatasetError(f"{root}: no episode metadata under meta/episodes/")
    rows: list[dict[str, Any]] = []
    for path in files:
        table = read_parquet(path)
        try:
            found = table.to_pylist()
        except (pa.ArrowException, ValueError) as exc:
            raise DatasetError(f"{path}: unreadable episodes table ({type(exc).__name__}: {exc})") from None
        for row in found:
            row["success"] = episode_success(row)
        rows += found
    return rows


def episode_success(row: Mapping[str, Any]) -> bool:
    """Did the episode reach its task? ``next.success`` is True from the success frame on, so its per-episode
    max (``stats/next.success/max``, a column LeRobot writes itself) says so; datasets from before kept a
    ``success`` column of their own, which LeRobot cannot append to. Neither: False."""
    if row.get("success") is not None:
        return bool(row["success"])
    best = row.get("stats/next.success/max")
    return bool(best[0]) if best else False
