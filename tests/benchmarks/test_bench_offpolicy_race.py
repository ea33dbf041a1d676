"""The off-policy race's scoring and plot (the training and the criterion's evaluation are the trainer's and
bench_time_to_walk's, tested in tests/learn): first walking checkpoint per run, medians only when every seed
walked, FastTD3's wall ratio to PPO."""

from __future__ import annotations


def _runs(bench, walk_minutes: dict[tuple[str, int], float | None]):
    row = bench.Row  # bench_time_to_walk's
    results = []
    for (algo, seed), minute in walk_minutes.items():
        rows = [row("model_0.pt", 0.0, 0, 0.5, 0.5, 0, 20, False)]
        if minute is not None:
            rows += [row("model_1.pt", minute, int(minute * 1000), 0.1, 0.1, 0, 20, True),
                     row("model_2.pt", minute + 1, int(minute * 1000) + 1000, 0.09, 0.09, 0, 20, True)]
        results.append(bench.RunResult(algo, seed, f"/runs/{algo}{seed}", rows, None))
    return results


def test_medians_ratio_and_plot(benchmark_module, tmp_path):
    bench = benchmark_module("bench_offpolicy_race")
    results = _runs(bench, {("ppo", 1): 30.0, ("ppo", 2): 40.0, ("ppo", 3): 50.0,
                            ("fasttd3", 1): 10.0, ("fasttd3", 2): 20.0, ("fasttd3", 3): 30.0})
    assert results[0].first_walk.checkpoint == "model_1.pt"
    summary = bench.summarize(results, bench.ALGOS)
    assert summary["ppo"]["median_minutes"] == 40.0 and summary["fasttd3"]["median_env_steps"] == 20000
    assert summary["wall_ratio_fasttd3_over_ppo"] == 0.5
    bench.plot(results, tmp_path / "race.png", "test", 0.15)
    assert (tmp_path / "race.png").stat().st_size > 0


def test_a_seed_that_never_walks_leaves_no_median(benchmark_module):
    bench = benchmark_module("bench_offpolicy_race")
    summary = bench.summarize(_runs(bench, {("ppo", 1): 30.0, ("fasttd3", 1): None, ("fasttd3", 2): 5.0}),
                              bench.ALGOS)
    assert summary["fasttd3"] == {"runs": 2, "reached": 1, "median_minutes": None, "median_env_steps": None}
    assert "wall_ratio_fasttd3_over_ppo" not in summary


def _mark(bench, run_dir, **fields):
    run_dir.mkdir(parents=True)
    (run_dir / bench.RUN_MARK).write_text(__import__("json").dumps(fields))
    return run_dir


def test_only_a_run_that_trained_the_same_budget_to_the_end_is_reused(benchmark_module, tmp_path):
    bench = benchmark_module("bench_offpolicy_race")
    args = bench.Args(minutes=45.0, log_dir=tmp_path)
    task = tmp_path / "a1-flat"
    (task / "2026-01-01_00-00-00_race_ppo_s1").mkdir(parents=True)  # interrupted: no mark
    assert bench.finished_run(args, "ppo", 1) is None
    _mark(bench, task / "2026-01-01_01-00-00_race_ppo_s1", algo="ppo", seed=1, task="a1-flat", minutes=3.0)
    assert bench.finished_run(args, "ppo", 1) is None  # a smoke run's shorter budget
    older = _mark(bench, task / "2026-01-02_00-00-00_race_ppo_s1", algo="ppo", seed=1, task="a1-flat", minutes=45.0)
    assert bench.finished_run(args, "ppo", 1) == older
    newer = _mark(bench, task / "2026-01-03_00-00-00_race_ppo_s1", algo="ppo", seed=1, task="a1-flat", minutes=45.0)
    assert bench.finished_run(args, "ppo", 1) == newer  # the newest of two finished runs
    assert bench.finished_run(args, "ppo", 2) is None and bench.finished_run(args, "fasttd3", 1) is None


def test_scores_are_reused_only_for_the_same_criterion(benchmark_module, tmp_path, monkeypatch):
    bench = benchmark_module("bench_offpolicy_race")
    calls = []

    def evaluate(run_dir, task, episodes, threshold_m_s, every):
        calls.append((episodes, every))
        return [bench.Row("model_0.pt", 0.0, 0, 0.5, 0.5, 0, episodes, False),
                bench.Row("model_50.pt", 40.0, 9000, 0.1, 0.1, 0, episodes, True)]

    monkeypatch.setattr(bench, "evaluate_run", evaluate)
    args = bench.Args(log_dir=tmp_path, every=2)
    first = bench.scored_rows(args, tmp_path, 0.15)
    again = bench.scored_rows(args, tmp_path, 0.15)
    assert again == first and first[1].walks and len(calls) == 1  # the second came from race_eval.json
    bench.scored_rows(bench.Args(log_dir=tmp_path, every=1), tmp_path, 0.15)
    assert calls == [(20, 2), (20, 1)]  # another criterion scores again


def test_a_run_is_bounded_by_its_minutes_only_and_leaves_its_mark(benchmark_module, tmp_path, monkeypatch):
    import json

    import robot_rl.learn.train as train_module
    from robot_rl.tasks.registry import make_task

    bench = benchmark_module("bench_offpolicy_race")
    asked = []

    def train(args):  # stands in for the trainer: records what it was asked and writes a final checkpoint
        asked.append(args)
        run = tmp_path / args.task / f"2026-01-01_00-00-00_{args.run_name}"
        run.mkdir(parents=True)
        (run / "model_10.pt").write_bytes(b"")
        return run / "model_10.pt"

    monkeypatch.setattr(train_module, "train", train)
    args = bench.Args(minutes=45.0, log_dir=tmp_path)
    run = bench.train_run(args, "ppo", 2)
    (sent,) = asked
    # PPO's task default (a1-flat: 3000 iterations) would end a quiet machine's run before its 45 minutes
    task_bound = make_task(args.task).ppo.max_iterations
    assert sent.max_minutes == 45.0 and sent.max_iterations == bench.RACE_MAX_ITERATIONS > task_bound
    mark = json.loads((run / bench.RUN_MARK).read_text())
    assert {k: mark[k] for k in ("algo", "seed", "task", "minutes")} == {"algo": "ppo", "seed": 2, "task": "a1-flat",
                                                                         "minutes": 45.0}
    assert bench.finished_run(args, "ppo", 2) == run
