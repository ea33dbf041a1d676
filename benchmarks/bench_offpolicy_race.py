"""The off-policy race (issue 27): PPO against FastTD3 on one task, same DR, same time-to-walk criterion.

Each (algorithm, seed) trains for ``--minutes`` of wall clock with ``robot-rl train`` (defaults of each
algorithm, DR on as the task has it), one after the other on this machine; then every checkpoint of every run
is scored with ``bench_time_to_walk``'s criterion (20 episodes of 20 s at 0.5 m/s forward on the nominal
robot: per-step velocity error < 0.15 m/s and no falls). Reported per run: wall minutes and env steps to the
first checkpoint that walks; per algorithm: the median over seeds (a run that never walks counts as "not
within the budget"); FastTD3's median over PPO's is the race's ratio (goal ≤ 0.5). Curves of every run (error
against wall time and against env steps) on one plot; FastTD3 runs add their ``profile.json`` (where the
time went: env step, updates, replay sampling).

    nice -n 10 python benchmarks/bench_offpolicy_race.py --minutes 45 --seeds 1 2 3 \\
        --out benchmarks/results/offpolicy_race

Training time is measured to each checkpoint's write; evaluation runs after training and is not counted.

The race takes about 5 h of a 2-core machine (6 runs × 45 min, then scoring), longer than one session, so it runs
in pieces: a finished run leaves ``race_run.json`` in its run directory and its scores in ``race_eval.json``, and
a later invocation with the same ``--log-dir``, ``--task`` and ``--minutes`` reuses both instead of training or
scoring again. Train one piece per quiet stretch (``--algos ppo --seeds 1``), then ask for the whole race
(``--seeds 1 2 3``): only the missing runs train, and the summary covers every run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_time_to_walk import Row, evaluate_run  # the sibling script: the criterion's one copy

ALGOS = ("ppo", "fasttd3")


@dataclasses.dataclass(frozen=True)
class Args:
    minutes: float = 45.0  # training wall clock per run (the documented race: RESULTS_offpolicy_race.md)
    seeds: tuple[int, ...] = (1, 2, 3)
    algos: tuple[str, ...] = ALGOS
    task: str = "a1-flat"
    log_dir: Path = Path("runs/race")
    out: Path = Path("benchmarks/results/offpolicy_race")  # writes <out>.json and <out>.png
    episodes: int = 20  # the criterion's
    every: int = 1  # evaluate every n-th checkpoint (and the last)
    label: str = ""  # e.g. "smoke": goes into the JSON and the plot's title


@dataclasses.dataclass(frozen=True)
class RunResult:
    algo: str
    seed: int
    run_dir: str
    rows: list[Row]
    profile: dict | None

    @property
    def first_walk(self) -> Row | None:
        return next((r for r in self.rows if r.walks), None)


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


RACE_MAX_ITERATIONS = 1_000_000  # a bound no run reaches in its minutes
RUN_MARK = "race_run.json"  # written once a run has trained its whole budget: what it was asked for
EVAL_MARK = "race_eval.json"  # its scores and the criterion they were scored with


def finished_run(args: Args, algo: str, seed: int) -> Path | None:
    """The newest run of ``algo`` and ``seed`` under ``args.log_dir`` that trained ``args.task`` for
    ``args.minutes`` to the end (an interrupted run has no mark and trains again)."""
    wanted = {"algo": algo, "seed": seed, "task": args.task, "minutes": args.minutes}
    found = []
    for mark in (args.log_dir / args.task).glob(f"*_race_{algo}_s{seed}/{RUN_MARK}"):
        record = json.loads(mark.read_text())
        if {k: record.get(k) for k in wanted} == wanted:
            found.append(mark.parent)
    return max(found, key=lambda p: p.name) if found else None  # the timestamped names sort in time


def train_run(args: Args, algo: str, seed: int) -> Path:
    from robot_rl.learn.train import TrainArgs, train

    # The clock is the only bound, for both algorithms: a task's PPO iteration default (a1-flat: 3000) can end a
    # fast machine's run before its minutes are up, which would cut one side of the race short.
    final = train(TrainArgs(task=args.task, algo=algo, seed=seed, max_minutes=args.minutes,
                            max_iterations=RACE_MAX_ITERATIONS, log_dir=args.log_dir,
                            run_name=f"race_{algo}_s{seed}", progress=False))
    mark = {"algo": algo, "seed": seed, "task": args.task, "minutes": args.minutes,
            "machine": machine(),
            "load_average_at_end": os.getloadavg(), "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (final.parent / RUN_MARK).write_text(json.dumps(mark, indent=2))
    return final.parent


def scored_rows(args: Args, run_dir: Path, threshold: float) -> list[Row]:
    """The run's checkpoints against the criterion, from its ``race_eval.json`` where that was scored with the same
    criterion (episodes, threshold, every), else scored now and written there."""
    criterion = {"episodes": args.episodes, "threshold_m_s": threshold, "every": args.every}
    cache = run_dir / EVAL_MARK
    if cache.is_file():
        record = json.loads(cache.read_text())
        if record.get("criterion") == criterion:
            print(f"    scores reused from {cache}", flush=True)
            return [Row(**row) for row in record["rows"]]
    rows = evaluate_run(run_dir, args.task, episodes=args.episodes, threshold_m_s=threshold, every=args.every)
    cache.write_text(json.dumps({"criterion": criterion, "rows": [dataclasses.asdict(r) for r in rows]}, indent=2))
    return rows


def summarize(results: list[RunResult], algos: tuple[str, ...]) -> dict:
    out: dict = {}
    for algo in algos:
        runs = [r for r in results if r.algo == algo]
        walked = [r.first_walk for r in runs]
        reached = [w for w in walked if w is not None]
        out[algo] = {
            "runs": len(runs), "reached": len(reached),
            # the median only when every seed walked: a median over the lucky seeds would flatter
            "median_minutes": statistics.median(w.minutes for w in reached) if runs and len(reached) == len(runs)
            else None,
            "median_env_steps": statistics.median(w.env_steps for w in reached) if runs and len(reached) == len(runs)
            else None,
        }
    if "ppo" in out and "fasttd3" in out and out["ppo"]["median_minutes"] and out["fasttd3"]["median_minutes"]:
        out["wall_ratio_fasttd3_over_ppo"] = out["fasttd3"]["median_minutes"] / out["ppo"]["median_minutes"]
    return out


def plot(results: list[RunResult], path: Path, title: str, threshold: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ppo": "tab:blue", "fasttd3": "tab:red"}
    fig, (wall, steps) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for r in results:
        label = f"{r.algo} seed {r.seed}"
        kw = {"color": colors.get(r.algo), "marker": "o", "ms": 3, "lw": 1.2, "label": label}
        wall.plot([x.minutes for x in r.rows], [x.error for x in r.rows], **kw)
        steps.plot([max(x.env_steps, 1) for x in r.rows], [x.error for x in r.rows], **kw)
    for ax in (wall, steps):
        ax.axhline(threshold, color="k", ls="--", lw=1)
        ax.grid(alpha=0.3)
    wall.set_xlabel(f"training wall time (min, {os.cpu_count()}-core CPU)")
    wall.set_ylabel("per-step forward-velocity error at 0.5 m/s (m/s)")
    steps.set_xscale("log")
    steps.set_xlabel("env steps")
    wall.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(args: Args) -> None:
    unknown = [a for a in args.algos if a not in ALGOS]
    if unknown:
        raise SystemExit(f"unknown --algos {unknown}; known: {', '.join(ALGOS)}")
    started = time.time()
    results = []
    for seed in args.seeds:  # seed-major: a machine's load drifting over the race hits both algorithms alike
        for algo in args.algos:
            run_dir = finished_run(args, algo, seed)
            if run_dir is not None:
                print(f"=== {algo} seed {seed}: reusing {run_dir} (trained {args.minutes} min before)", flush=True)
            else:
                print(f"=== {algo} seed {seed}: {args.minutes} min", flush=True)
                run_dir = train_run(args, algo, seed)
            profile_path = run_dir / "profile.json"
            profile = json.loads(profile_path.read_text()) if profile_path.is_file() else None
            results.append(RunResult(algo, seed, str(run_dir), [], profile))
    threshold = 0.15
    for i, r in enumerate(results):
        print(f"=== evaluating {r.algo} seed {r.seed} ({r.run_dir})", flush=True)
        rows = scored_rows(args, Path(r.run_dir), threshold)
        results[i] = dataclasses.replace(r, rows=rows)
    summary = summarize(results, args.algos)
    title = f"{args.task}: time to walk, PPO vs FastTD3" + (f" ({args.label})" if args.label else "")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plot(results, args.out.with_suffix(".png"), title, threshold)
    record = {
        "label": args.label, "task": args.task, "minutes_per_run": args.minutes, "seeds": list(args.seeds),
        "machine": machine(),
        "load_average_at_end": os.getloadavg(), "total_wall_min": (time.time() - started) / 60,
        "criterion": {"episodes": args.episodes, "command": [0.5, 0.0, 0.0], "threshold_m_s": threshold},
        "summary": summary,
        "runs": [{"algo": r.algo, "seed": r.seed, "run_dir": r.run_dir, "profile": r.profile,
                  "trained": json.loads((Path(r.run_dir) / RUN_MARK).read_text()),  # when, on what, under what load
                  "first_walk": None if r.first_walk is None else dataclasses.asdict(r.first_walk),
                  "rows": [dataclasses.asdict(x) for x in r.rows]} for r in results],
    }
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2))
    for r in results:
        w = r.first_walk
        print(f"{r.algo:>8} seed {r.seed}: " + (f"walks at {w.minutes:.1f} min, {w.env_steps:,} env steps"
                                               if w else f"did not walk within {args.minutes} min"))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main(tyro.cli(Args))
