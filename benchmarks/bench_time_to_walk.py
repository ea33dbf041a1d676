"""Time to walk: evaluate every checkpoint of an a1-flat training run against the walking criterion.

Criterion (issue 3): over 20 evaluation episodes of 20 s at a held forward command of 0.5 m/s on the
nominal robot (no randomization), the mean per-step forward-velocity tracking error is below 0.15 m/s and
no episode falls. The wall-clock time of a checkpoint is its file's modification time minus the run
directory's creation (the trainer writes the run directory first), so the curve is training wall time.

    python benchmarks/bench_time_to_walk.py runs/a1-flat/<run> --markdown-out benchmarks/results/RESULTS_training.md
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
from pathlib import Path

import tyro


@dataclasses.dataclass(frozen=True)
class Args:
    run_dir: tyro.conf.Positional[Path]
    task: str = "a1-flat"
    command: tuple[float, ...] = (0.5, 0.0, 0.0)
    episodes: int = 20
    threshold_m_s: float = 0.15
    every: int = 1  # evaluate every n-th checkpoint
    offset_min: float = 0.0  # training minutes before this run directory (a run resumed from another)
    markdown_out: Path | None = None
    plot_out: Path | None = None
    training_command: str = "python sim/train.py --task a1-flat --max-minutes 30 --seed 1"


@dataclasses.dataclass(frozen=True)
class Row:
    """One checkpoint against the criterion."""

    checkpoint: str
    minutes: float  # training wall time when it was written
    env_steps: int  # env steps of training behind it
    error: float  # mean per-step forward-velocity error (m/s)
    mean_error: float  # error of the episode's mean velocity (m/s)
    falls: int
    episodes: int
    walks: bool


def walks(error: float, falls: int, threshold_m_s: float) -> bool:
    """The walking criterion: tracking error under the threshold and no episode fell."""
    return error < threshold_m_s and falls == 0


def evaluate_run(run_dir: Path, task: str = "a1-flat", command: tuple[float, ...] = (0.5, 0.0, 0.0),
                 episodes: int = 20, threshold_m_s: float = 0.15, every: int = 1, offset_min: float = 0.0,
                 echo: bool = True) -> list[Row]:
    """Every ``every``-th checkpoint of a run (and its last) against the criterion, in training order."""
    from robot_rl.learn.play import PlayArgs, play
    from robot_rl.learn.ppo import read_checkpoint_info

    ckpts = sorted(run_dir.glob("model_*.pt"), key=lambda p: int(re.findall(r"\d+", p.stem)[0]))
    ckpts = ckpts[::every] + ([ckpts[-1]] if ckpts and (len(ckpts) - 1) % every else [])
    start = min(p.stat().st_mtime for p in [run_dir, *run_dir.iterdir()])
    rows = []
    for ck in ckpts:
        report = play(PlayArgs(checkpoint=ck, task=task, num_envs=episodes, episodes=episodes,
                               command=command, randomize=False))
        err = report.metrics.get("Episode/lin_vel_error_m_s", float("nan"))
        mean_err = report.metrics.get("Episode/mean_vel_error_m_s", float("nan"))
        minutes = offset_min + (ck.stat().st_mtime - start) / 60
        steps = int(read_checkpoint_info(ck).get("env_steps", 0))
        row = Row(ck.name, minutes, steps, err, mean_err, report.falls, report.episodes,
                  walks(err, report.falls, threshold_m_s))
        rows.append(row)
        if echo:
            print(f"{ck.name:>16}  {minutes:6.1f} min  {steps:>11,} steps  per-step err {err:.3f} m/s  mean-vel err "
                  f"{mean_err:.3f}  falls {report.falls}/{report.episodes}  {'WALKS' if row.walks else ''}",
                  flush=True)
    return rows


def main(args: Args) -> None:
    rows = [(r.checkpoint, r.minutes, r.error, r.mean_error, r.falls, r.episodes, r.walks)
            for r in evaluate_run(args.run_dir, args.task, args.command, args.episodes, args.threshold_m_s,
                                  args.every, args.offset_min)]
    first = next((r for r in rows if r[6]), None)
    lines = [
        f"Command: `python benchmarks/bench_time_to_walk.py {args.run_dir} --markdown-out ...` after training with "
        f"`{args.training_command}`.",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, CPU only, shared with "
        "other jobs during training (the training's own steps/s is in its TensorBoard log).",
        "",
        f"Criterion: {args.episodes} episodes of 20 s at command {args.command} on the nominal robot; mean "
        f"per-step forward-velocity error < {args.threshold_m_s} m/s and no falls.",
        "",
        "| checkpoint | training wall time (min) | per-step vel error (m/s) | error of episode mean vel (m/s) "
        "| falls | walks |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {n} | {m:.1f} | {e:.3f} | {me:.3f} | {f}/{ep} | {'yes' if w else 'no'} |"
              for n, m, e, me, f, ep, w in rows]
    lines += ["", f"**Time to walk: {first[1]:.1f} min** ({first[0]})." if first else
              "**Did not reach the walking criterion within the run.**"]
    text = "\n".join(lines) + "\n"
    if args.markdown_out:
        args.markdown_out.write_text(text)
    if args.plot_out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([r[1] for r in rows], [r[2] for r in rows], "o-", label="per-step forward-velocity error")
        ax.axhline(args.threshold_m_s, color="k", ls="--", lw=1, label=f"criterion {args.threshold_m_s} m/s")
        ax.set_xlabel("training wall time (min, 2-core CPU)")
        ax.set_ylabel("m/s")
        ax.set_title("a1-flat: tracking error at 0.5 m/s forward")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot_out, dpi=110)


if __name__ == "__main__":
    main(tyro.cli(Args))
