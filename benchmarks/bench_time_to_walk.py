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


def main(args: Args) -> None:
    from robot_rl.learn.play import PlayArgs, play

    ckpts = sorted(args.run_dir.glob("model_*.pt"), key=lambda p: int(re.findall(r"\d+", p.stem)[0]))
    ckpts = ckpts[:: args.every] + ([ckpts[-1]] if ckpts and (len(ckpts) - 1) % args.every else [])
    start = min(p.stat().st_mtime for p in [args.run_dir, *args.run_dir.iterdir()])
    rows = []
    for ck in ckpts:
        report = play(PlayArgs(checkpoint=ck, task=args.task, num_envs=args.episodes, episodes=args.episodes,
                               command=args.command, randomize=False))
        err = report.metrics.get("Episode/lin_vel_error_m_s", float("nan"))
        mean_err = report.metrics.get("Episode/mean_vel_error_m_s", float("nan"))
        minutes = args.offset_min + (ck.stat().st_mtime - start) / 60
        walks = err < args.threshold_m_s and report.falls == 0
        rows.append((ck.name, minutes, err, mean_err, report.falls, report.episodes, walks))
        print(f"{ck.name:>16}  {minutes:6.1f} min  per-step err {err:.3f} m/s  mean-vel err {mean_err:.3f}  "
              f"falls {report.falls}/{report.episodes}  {'WALKS' if walks else ''}", flush=True)
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
