"""The calibrated start next to the other methods, on the 32-command second look: gap recovered against the
transitions the "real" robot gave.

The calibrated runs' points are read from a results store (``bench_residual.py --phase final-eval`` over the runs'
exported files; a run is named "… seed N: sim residual, 3,000 robot transitions" or "… seed N: + SAC …, T
transitions"). The other methods' points were measured earlier on the same 32 commands with the same harness
(their stores are gone; the base's scores then and now agree to the last digit): they are the figures of
``benchmarks/results/RESULTS_residual.md``, written out below.

    .venv/bin/python benchmarks/plot_residual_calibrated.py runs/cal_a1/results.json \\
        --match "calibrated start α 0.2" --png benchmarks/results/RESULTS_residual_calibrated.png
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

# benchmarks/results/RESULTS_residual.md, second look (32 commands, seed 777): (transitions, recovered).
SAC_FROM_SCRATCH_20K = [(20_436, 0.41), (20_108, 0.50), (20_979, 0.45), (20_356, 0.57)]  # lr 1e-3, seeds 0–3
CONTINUED_PPO = [(24_576, 0.14), (79_872, 0.42), (159_744, 0.59), (319_488, 0.81), (638_976, 0.88)]


def calibrated_points(final_eval: dict, match: str) -> dict[int, list[tuple[int, float]]]:
    """Per seed: (robot transitions, recovered) of the sim residual and of the robot phase's end."""
    seeds: dict[int, list[tuple[int, float]]] = {}
    for name, score in final_eval["runs"].items():
        if match not in name or "anchor 10" in name:
            continue
        seed = int(re.search(r"seed (\d+)", name).group(1))
        transitions = int(re.search(r"([\d,]+) (robot )?transitions", name).group(1).replace(",", ""))
        seeds.setdefault(seed, []).append((transitions, score["recovered"]))
    return {s: sorted(p) for s, p in sorted(seeds.items())}


def main(argv: list[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path)
    p.add_argument("--match", default="calibrated start α 0.2", help="the calibrated runs' names contain this")
    p.add_argument("--png", type=Path, required=True)
    args = p.parse_args(argv)
    final = json.loads(args.results.read_text())["final_eval"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (seed, points) in enumerate(calibrated_points(final, args.match).items()):
        x, y = zip(*points, strict=True)
        ax.plot(x, y, "^-", color="tab:green", alpha=0.8, label="calibrated start (ours): log → calibrate → sim "
                "residual → SAC on the robot" if i == 0 else None)
        ax.annotate(f"s{seed}", (x[-1], y[-1]), textcoords="offset points", xytext=(4, -3), fontsize=7)
    x, y = zip(*SAC_FROM_SCRATCH_20K, strict=True)
    ax.plot(x, y, "o", color="tab:blue", label="residual SAC from scratch, 4 seeds (sessions 4–6)")
    x, y = zip(*CONTINUED_PPO, strict=True)
    ax.plot(x, y, "s-", color="tab:orange", label="continued PPO, full policy (session 4)")
    ax.axhline(0.0, color="gray", ls="--", label="no fine-tuning")
    ax.axhline(0.8, color="green", ls=":", label="80 % of the gap")
    ax.axvline(20_000, color="black", alpha=0.4, lw=3, label="20k transitions")
    ax.set_xscale("log")
    ax.set_xlabel("transitions on the 'real' robot (a calibrated start's log included)")
    ax.set_ylabel("fraction of the return gap recovered")
    ax.set_title("A1, 'real' = kp ×0.7, +4 kg, 2-step latency, friction ×0.3; 32 commands (seed 777)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
