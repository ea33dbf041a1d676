"""Assemble BENCHMARKS.md from the summary below and each benchmark's latest results file.

Each benchmark script writes its own ``RESULTS_*.md`` (command, machine, figures); this keeps one page a
person reads, regenerated with ``python benchmarks/assemble_benchmarks_md.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECTIONS = [
    ("Training: time to walk, panda-reach", "RESULTS_training.md"),
    ("Env throughput vs the raw MuJoCo ceiling", "RESULTS_env_throughput.md"),
    ("Policy tick compute vs bare onnxruntime", "RESULTS_policy_tick.md"),
    ("50 Hz loop lateness vs a naive sleep(dt) loop", "RESULTS_loop_timing.md"),
    ("sim2sim gate wall time", "RESULTS_sim2sim.md"),
    ("DDS state-in → command-out latency vs bare Cyclone DDS", "RESULTS_dds_latency.md"),
    ("Deploy log enqueue cost", "RESULTS_deploy_log.md"),
    ("Behaviour cloning on panda-push", "RESULTS_bc_push.md"),
    ("Residual fine-tuning from a calibrated sim", "RESULTS_residual_calibrated.md"),
    ("Residual fine-tuning, sim as real", "RESULTS_residual.md"),
    ("Residual learner: update cost and real-time UTD", "RESULTS_learner_rate.md"),
]


def main() -> None:
    summary = (HERE / "SUMMARY.md").read_text()
    parts = ["# Benchmarks\n", summary.strip(), ""]
    for title, name in SECTIONS:
        path = HERE / name
        if not path.exists():
            continue
        body = path.read_text().strip()
        # Demote the file's own headings one level under this page's section heading.
        body = "\n".join("#" + line if line.startswith("#") else line for line in body.splitlines())
        # Images sit next to the results file; this page is one folder up.
        body = re.sub(r"\]\((?!benchmarks/|https?:)([^)]+\.png)\)", r"](benchmarks/\1)", body)
        parts += [f"## {title}", f"_Source: `benchmarks/{name}`_", "", body, ""]
    (HERE.parent / "BENCHMARKS.md").write_text("\n".join(parts))


if __name__ == "__main__":
    main()
