"""Round trip with Hugging Face LeRobot: a project dataset that LeRobot reads, appends to, and both reopen.

Two interpreters, because LeRobot pins a torch this project's environment must not have: the project's
(this file as a script) and one with ``lerobot`` installed (``--lerobot-python``, or the environment variable
``ROBOT_RL_LEROBOT_PYTHON``), which runs this same file with ``--lerobot-side`` and imports nothing of
``robot_rl``. Nothing is downloaded (``HF_HUB_OFFLINE=1``).

1. project: ``collect_demos`` records ``--episodes`` scripted panda-push demos (a real dataset, as
   ``robot-rl collect-demos`` writes it); ``validate_dataset`` finds no problem.
2. LeRobot: ``LeRobotDataset(root=…)`` loads it; every frame through ``__getitem__``; its own
   ``compute_episode_stats`` on each episode's frames reproduces the stats we stored (the episodes table's
   ``stats/*`` columns), quantiles included; then it appends one episode (the first episode's frames with
   every float feature shifted by 0.25, as a new recording) with ``add_frame`` / ``save_episode`` / ``finalize``.
3. LeRobot reopens the dataset (a fresh ``LeRobotDataset``) and dumps every column of every frame.
4. project: our ``LeRobotDataset`` reopens it; every value of every episode equals LeRobot's dump (the
   appended episode included, which also equals what was appended); our stats code on the appended episode
   reproduces the stats LeRobot wrote for it; ``validate_dataset`` finds no problem; our writer appends one
   more episode, and LeRobot loads the result once more.

    ROBOT_RL_LEROBOT_PYTHON=/work/lerobot_venv/bin/python PYTHONPATH=. .venv/bin/python \\
        benchmarks/lerobot_roundtrip.py --markdown-out benchmarks/results/lerobot_roundtrip_output.md

Exit status 0 only if every check passed; each check prints one line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO_ID = "local/robot_rl_roundtrip"
SHIFT = 0.25  # added to every float feature of the appended episode, so it differs from the one it copies
DEFAULT_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


# --- the LeRobot side (runs under the interpreter that has lerobot; imports no robot_rl) ----------------------

def _columns(hf_dataset) -> dict[str, np.ndarray]:
    """Every column of LeRobot's frames table as numpy: vectors (T, n), scalars (T,)."""
    import pyarrow as pa

    table = hf_dataset.with_format("arrow")[:]
    out = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if pa.types.is_fixed_size_list(column.type) or pa.types.is_list(column.type):
            out[name] = column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), -1)
        else:
            out[name] = column.to_numpy(zero_copy_only=False)
    return out


def lerobot_side(root: Path, dump: Path, append: bool) -> int:
    from lerobot.datasets.compute_stats import compute_episode_stats
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    report: dict = {}
    ds = LeRobotDataset(REPO_ID, root=root)
    report["loaded"] = {"episodes": ds.num_episodes, "frames": ds.num_frames, "fps": ds.fps}
    items = [ds[i] for i in range(len(ds))]  # the training path: every frame through __getitem__
    report["getitem_frames"] = len(items)
    columns = _columns(ds.hf_dataset)
    features = ds.meta.features
    # LeRobot's metadata loader drops the stats/* columns (memory): read them from its episodes files directly.
    import pyarrow.parquet as pq

    stored_rows = [row for path in sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
                   for row in pq.read_table(path).to_pylist()]
    # LeRobot's own stats of each episode's frames, against the stats the project stored for it.
    worst = 0.0
    mismatched: list[str] = []
    for e in range(ds.num_episodes):
        rows = columns["episode_index"] == e
        data = {k: columns[k][rows] for k in features if features[k]["dtype"] not in ("image", "video", "string")}
        data["timestamp"] = columns["frame_index"][rows] / ds.fps  # what LeRobot's writer computes stats from
        computed = compute_episode_stats(data, features)
        stored = stored_rows[e]
        for key, stats in computed.items():
            for name, value in stats.items():
                if stored.get(f"stats/{key}/{name}") is None:
                    mismatched.append(f"episode {e} {key}/{name}: not stored")
                    continue
                got, want = np.asarray(stored[f"stats/{key}/{name}"]), np.asarray(value)
                numeric = got.dtype.kind in "fiu" and want.dtype.kind in "fiu"  # int64 count vs int: the same
                if got.shape != want.shape or (got.dtype.kind != want.dtype.kind and not numeric):
                    mismatched.append(f"episode {e} {key}/{name}: stored {got.dtype}{got.shape}, "
                                      f"LeRobot computes {np.asarray(value).dtype}{np.shape(value)}")
                    continue
                diff = float(np.max(np.abs(got.astype(np.float64) - np.asarray(value, dtype=np.float64))))
                if diff > 0:
                    mismatched.append(f"episode {e} {key}/{name}: differs by {diff:.3g}")
                worst = max(worst, diff)
    report["episode_stats"] = {"max_abs_difference": worst, "mismatches": mismatched[:10],
                               "quantiles_in_meta_stats": sorted({k for s in ds.meta.stats.values() for k in s
                                                                  if k.startswith("q")})}
    if append:
        first = columns["episode_index"] == 0
        task = ds.meta.tasks.index[int(columns["task_index"][first][0])]
        appended = {}
        for key, ft in features.items():
            if key in DEFAULT_KEYS or ft["dtype"] in ("image", "video", "string"):
                continue
            values = columns[key][first]
            if ft["dtype"].startswith("float"):
                values = values + np.asarray(SHIFT, dtype=values.dtype)
            appended[key] = values.reshape(len(values), *ft["shape"]).astype(ft["dtype"])
        for t in range(int(first.sum())):
            ds.add_frame({key: values[t] for key, values in appended.items()} | {"task": task})
        ds.save_episode()
        ds.finalize()
        np.savez(dump.with_name(dump.stem + "_appended.npz"), **appended)
        reopened = LeRobotDataset(REPO_ID, root=root)
        report["reopened"] = {"episodes": reopened.num_episodes, "frames": reopened.num_frames}
        _ = [reopened[i] for i in range(len(reopened))]
        columns = _columns(reopened.hf_dataset)
    np.savez(dump, **columns)
    dump.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, default=str))
    return 0


# --- the project side ------------------------------------------------------------------------------------------

class Checks:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.failed = 0

    def __call__(self, ok: bool, text: str) -> None:
        line = f"{'PASS' if ok else 'FAIL'}  {text}"
        self.lines.append(line)
        self.failed += not ok
        print(line, flush=True)


def _run_lerobot(python: str, root: Path, dump: Path, append: bool) -> dict:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    env.pop("PYTHONPATH", None)  # the LeRobot interpreter sees no robot_rl
    cmd = [python, str(Path(__file__).resolve()), "--lerobot-side", str(root), "--dump", str(dump)]
    done = subprocess.run(cmd + (["--append"] if append else []), env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir(), timeout=900)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise SystemExit(f"the LeRobot side failed (exit {done.returncode}):\n{tail}")
    return json.loads(dump.with_suffix(".json").read_text())


def project_side(args: argparse.Namespace) -> int:
    from robot_rl.data.lerobot_dataset import LeRobotDataset, LeRobotDatasetWriter
    from robot_rl.data.lerobot_format import STAT_NAMES, feature_stats
    from robot_rl.data.lerobot_validate import validate_dataset
    from robot_rl.learn.demos import collect_demos

    python = args.lerobot_python or os.environ.get("ROBOT_RL_LEROBOT_PYTHON")
    if not python:
        raise SystemExit("no LeRobot interpreter: pass --lerobot-python or set ROBOT_RL_LEROBOT_PYTHON")
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="lerobot_roundtrip_"))
    root = work / "demos"
    check = Checks()

    collect_demos("panda-push", episodes=args.episodes, out_dir=str(root), seed=args.seed, progress=False)
    ours = LeRobotDataset(root)
    check(validate_dataset(root) == [], f"project dataset: {ours.num_episodes} episodes, {ours.num_frames} frames "
          f"from collect_demos (seed {args.seed}); validate_dataset finds no problem")
    before = {e: ours.episode(e) for e in range(ours.num_episodes)}

    report = _run_lerobot(python, root, work / "lerobot_dump.npz", append=True)
    loaded = report["loaded"]
    check(loaded["episodes"] == ours.num_episodes and loaded["frames"] == ours.num_frames
          and report["getitem_frames"] == ours.num_frames,
          f"LeRobot loads it: {loaded['episodes']} episodes, {loaded['frames']} frames, every frame through "
          "LeRobotDataset.__getitem__")
    stats = report["episode_stats"]
    check(not stats["mismatches"], "LeRobot's compute_episode_stats on each episode reproduces the stored stats "
          f"(max |difference| {stats['max_abs_difference']:.3g}; dtypes and shapes equal)"
          + (f": {stats['mismatches']}" if stats["mismatches"] else ""))
    check(stats["quantiles_in_meta_stats"] == ["q01", "q10", "q50", "q90", "q99"],
          f"meta/stats.json as LeRobot loads it has the quantiles {stats['quantiles_in_meta_stats']}")
    check(report["reopened"]["episodes"] == ours.num_episodes + 1,
          f"LeRobot appended an episode and reopened the dataset: {report['reopened']['episodes']} episodes, "
          f"{report['reopened']['frames']} frames")

    dump = dict(np.load(work / "lerobot_dump.npz"))
    appended = dict(np.load(work / "lerobot_dump_appended.npz"))
    again = LeRobotDataset(root)
    check(again.num_episodes == ours.num_episodes + 1 and again.num_frames == report["reopened"]["frames"],
          f"the project reader reopens it: {again.num_episodes} episodes, {again.num_frames} frames")
    unequal = []
    compared = 0
    for e in range(again.num_episodes):
        got = again.episode(e)
        rows = dump["episode_index"] == e
        for key, values in got.items():
            theirs = dump[key][rows].reshape(values.shape)
            compared += values.size
            if values.dtype != theirs.dtype or not np.array_equal(values, theirs):
                unequal.append(f"episode {e} {key}")
        if e < ours.num_episodes:
            unequal += [f"episode {e} {k} changed" for k, v in before[e].items() if not np.array_equal(got[k], v)]
    check(not unequal, f"every value of every episode is equal in both readers ({compared} values, dtypes "
          f"included)" + (f": {unequal[:8]}" if unequal else ""))
    new = again.episode(again.num_episodes - 1)
    same = all(np.array_equal(new[k].reshape(v.shape), v) for k, v in appended.items())
    check(same, f"the appended episode holds what LeRobot was given ({len(appended)} features, "
          f"{len(new['index'])} frames)")
    stored = again.episodes[-1]
    worst, bad = 0.0, []
    for key, feature in again.features.items():
        values = new[key] if key != "timestamp" else new["frame_index"] / again.fps
        for name, value in feature_stats(values, feature).items():
            got = np.asarray(stored[f"stats/{key}/{name}"])
            if got.dtype.kind != np.asarray(value).dtype.kind and not (got.dtype.kind in "fiu" and
                                                                        np.asarray(value).dtype.kind in "fiu"):
                bad.append(f"{key}/{name} dtype {got.dtype} vs {np.asarray(value).dtype}")
            worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - np.asarray(value, np.float64)))))
    check(not bad and worst == 0.0, f"our stats code reproduces the stats LeRobot wrote for its episode "
          f"({len(STAT_NAMES)} stats per feature, max |difference| {worst:.3g})" + (f": {bad[:5]}" if bad else ""))
    check(again.episodes[-1]["success"] == again.episodes[0]["success"] == bool(new["next.success"][-1]),
          "episode success reads from the frames' next.success (stats/next.success/max) for both writers' episodes")
    problems = validate_dataset(root)
    check(problems == [], "validate_dataset finds no problem after LeRobot's append" + (f": {problems[:3]}"
                                                                                       if problems else ""))

    writer = LeRobotDatasetWriter(root, fps=again.fps, features={k: f for k, f in again.features.items()
                                                                 if k not in (*DEFAULT_KEYS, "next.reward",
                                                                              "next.done", "next.success")},
                                  robot_type=again.info.get("robot_type"))
    first = again.episode(0)
    writer.add_episode({k: first[k] for k in writer.user_features}, again.tasks[0],
                       success_frame=int(np.argmax(first["next.success"])))
    final = _run_lerobot(python, root, work / "lerobot_final.npz", append=False)
    check(final["loaded"]["episodes"] == again.num_episodes + 1 and not final["episode_stats"]["mismatches"],
          f"the project writer appends after LeRobot; LeRobot loads all {final['loaded']['episodes']} episodes, "
          f"{final['loaded']['frames']} frames, and its stats still match")
    check(validate_dataset(root) == [], "validate_dataset: still no problem")

    print(f"{len(check.lines) - check.failed}/{len(check.lines)} checks passed; dataset at {root}")
    if args.markdown_out:
        args.markdown_out.write_text("\n".join(check.lines) + "\n")
    return 1 if check.failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir")
    parser.add_argument("--lerobot-python", help="an interpreter with lerobot installed (or ROBOT_RL_LEROBOT_PYTHON)")
    parser.add_argument("--markdown-out", type=Path)
    parser.add_argument("--lerobot-side", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--append", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.lerobot_side is not None:
        return lerobot_side(args.lerobot_side, args.dump, args.append)
    return project_side(args)


if __name__ == "__main__":
    sys.exit(main())
