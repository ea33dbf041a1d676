"""The robustness suite's table: ``robustness.md`` (written next to a policy, read back by tests)."""

from __future__ import annotations

import math
import os
from pathlib import Path

from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.robustness import SuiteResult

# The tracking error beside its ratio: where the nominal error is small, a low ratio can be a difference of a
# centimetre per second, and the reader should see which.
COLUMNS = ("group", "condition", "setting", "runs", "falls", "tracking error", "tracking ratio",
           "interventions / tick (worst)", "result")
# Tables written before the error had its column (committed ones, users' own) still parse, without it.
LEGACY_COLUMNS = tuple(c for c in COLUMNS if c != "tracking error")
VERDICT_PREFIX = "**verdict: "


def _num(value: float, digits: int = 3) -> str:
    return "—" if math.isnan(value) else f"{value:.{digits}f}"


def _nominal_spread(result: SuiteResult) -> list[str]:
    """How far single nominal runs stray from their mean, per setting: their seeds differ in script (shove
    directions, targets) and, for a gait, in which mode it settles into; a single run is not a measurement."""
    parts = []
    for r in result.results:
        errors = [e for e in r.tracking_errors if not math.isnan(e)]
        if r.condition.group == "nominal" and len(errors) > 1:
            mean = sum(errors) / len(errors)
            parts.append(f"{r.condition.setting} {mean / max(errors):.2f}–{mean / min(errors):.2f}")
    if not parts:
        return []
    return ["Spread of the nominal runs (why ratios compare means): mean nominal error / each single nominal "
            "run's error — " + ", ".join(parts) + "."]


def suite_markdown(result: SuiteResult, config: GateConfig, command: str) -> str:
    failed = [r for r in result.results if not r.passed]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    lines = [
        f"# Robustness suite: {result.task} on {result.robot}", "",
        f"Policy `{result.policy}`. Command: `{command}`", "",
        f"{result.runs} runs, {result.simulated_s:.0f} s simulated, in {result.wall_s:.0f} s wall on "
        f"{result.workers} worker processes (1-minute load average at the end: {load:.1f}).", "",
        f"Pass: falls ≤ {config.max_falls} per condition (all its runs), safety interventions ≤ "
        f"{config.max_intervention_rate:g} per tick in every run, tracking ratio (nominal mean error / condition "
        f"mean error, same simulator, the nominal seeds' scripts) ≥ {config.robust_tracking_ratio_min:g} at the DR "
        "corners and the worst case, and the gate's tracking checks in every nominal, long-walk and steps run. "
        "Tracking error: mean over the runs of each run's mean |vx| and |vy| errors (m/s) plus its mean yaw-rate "
        "error (rad/s), over the scored ticks; for an arm, the tool point's mean distance to its targets (m). "
        "Definitions: `robot_rl/evaluation/robustness.py`.", "",
        *_nominal_spread(result), "",
        "| " + " | ".join(COLUMNS) + " |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in result.results:
        c = r.condition
        notes = []
        if c.gate_tracking and r.gate_tracking_failures:
            notes.append(f"gate tracking failed in {r.gate_tracking_failures}")
        if r.errors:
            notes.append(f"{r.errors} runs crashed")
        word = "PASS" if r.passed else "FAIL"
        cells = [c.group, c.label, c.setting, str(r.runs), str(r.falls), _num(r.mean_error), _num(r.ratio),
                 _num(r.intervention_rate), word + (f" ({'; '.join(notes)})" if notes else "")]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"{VERDICT_PREFIX}{'PASS' if result.passed else 'FAIL'}** — {len(failed)} of "
              f"{len(result.results)} conditions fail."]
    if result.errors:
        lines += ["", "Errors:", *[f"- {e}" for e in result.errors]]
    return "\n".join(lines) + "\n"


def parse_suite_table(text: str) -> tuple[bool, list[dict[str, str]]]:
    """(verdict, rows as column → text) of a ``robustness.md``; ValueError when it has no verdict or table."""
    verdicts = [line for line in text.splitlines() if line.startswith(VERDICT_PREFIX)]
    if len(verdicts) != 1:
        raise ValueError(f"a robustness table needs one line starting with {VERDICT_PREFIX!r}, found {len(verdicts)}")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        columns = {len(COLUMNS): COLUMNS, len(LEGACY_COLUMNS): LEGACY_COLUMNS}.get(len(cells))
        if line.startswith("|") and columns and cells[0] not in ("group",) and not set(cells[0]) <= set("-:"):
            rows.append({"tracking error": "—", **dict(zip(columns, cells, strict=True))})
    if not rows:
        raise ValueError("a robustness table needs at least one condition row")
    return verdicts[0].startswith(VERDICT_PREFIX + "PASS"), rows


def write_suite(result: SuiteResult, config: GateConfig, command: str, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "robustness.md"
    path.write_text(suite_markdown(result, config, command))
    return path
