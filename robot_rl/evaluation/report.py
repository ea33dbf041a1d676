"""The sim2sim gate's report: ``report.md`` (verdict, tables, contract, thresholds) and ``report.png``.

The plot overlays every simulator on the command: velocity tasks get vx, vy, yaw rate and base height;
reach tasks get the tool point's distance to the target and its x, y, z against the target; object-goal tasks the
object's distance to the goal and its x, y against the goal. The lead-in
(ramp) is shaded, pushes are dashed vertical lines, a fall is marked with an ×.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from robot_rl.evaluation.scoring import VELOCITY_CHANNELS, SimScore, commanded

if TYPE_CHECKING:
    from robot_rl.evaluation.sim2sim import GateResult

SIM_COLORS = {"mujoco": "tab:blue", "pybullet": "tab:orange", "mujoco-alt": "tab:green"}


def write_report(result: GateResult, out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = plot_runs(result, out / "report.png")
    md = out / "report.md"
    md.write_text(markdown(result, png.name))
    return [md, png]


def _fmt(value: float, digits: int = 3) -> str:
    from robot_rl.evaluation.sim2sim import format_value

    return format_value(value) if digits == 3 else f"{value:.{digits}f}"


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell (a bare | would end the cell)."""
    return text.replace("|", "\\|")


def _pass(passed: bool) -> str:
    return "**PASS**" if passed else "**FAIL**"


def _contract_rows(result: GateResult) -> list[str]:
    c = result.contract
    if c is None:
        return ["No policy: the runtime holds the spec's default pose (a positive control for the gate)."]
    p = c.provenance
    commands = ", ".join(f"{n} [{lo:g}, {hi:g}]" for n, (lo, hi) in zip(c.commands.names, c.commands.ranges,
                                                                          strict=True))
    rows = [
        ("robot", c.robot), ("spec hash", f"`{c.spec_hash}`"), ("task", p.task or "—"),
        ("joints", f"{len(c.joint_names)} ({c.joint_names[0]} … {c.joint_names[-1]})"),
        ("observation", f"{c.obs_dim} values: " + ", ".join(f"{t.name}×{t.history_length}" if t.history_length > 1
                                                           else t.name for t in c.observation.terms)),
        ("action", f"{c.action.type}, scale {c.action.scale:g}, clip {c.action.clip:g}"),
        ("commands", commands), ("policy period", f"{c.policy_period_s * 1e3:g} ms"),
        ("normalizer baked in", str(c.normalizer_baked_in)),
        ("training seed", str(p.seed)), ("iterations", str(p.iterations)), ("env steps", str(p.env_steps)),
        ("git commit", f"`{p.git_commit or '—'}`"), ("exported (UTC)", p.created_utc or "—"),
    ]
    rows += [(f"metric: {k}", f"{v:.4g}") for k, v in p.metrics.items()]
    return ["| field | value |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows]]


def _checks_table(scores: list[SimScore]) -> list[str]:
    sims = [s.simulator for s in scores]
    lines = ["| check | limit | " + " | ".join(sims) + " |", "|---|---|" + "---|" * len(sims)]
    names: list[str] = []
    for s in scores:
        names += [c.name for c in s.checks if c.name not in names]
    for name in names:
        cells, limit = [], ""
        for s in scores:
            c = next((c for c in s.checks if c.name == name), None)
            if c is None:
                cells.append("—")
                continue
            limit = f"≤ {_fmt(c.limit)} {c.unit}".strip()
            cells.append(_fmt(c.value) + ("" if c.passed else " ✗"))
        lines.append(f"| {name} | {limit} | " + " | ".join(cells) + " |")
    lines.append("| **result** | | " + " | ".join(_pass(s.passed) for s in scores) + " |")
    return lines


def _details(score: SimScore) -> list[str]:
    out = [f"### {score.simulator}", ""]
    if score.error is not None:
        return [*out, f"The run failed: `{score.error}`", ""]
    out.append(f"- fall: at t = {score.fall.t_s:.2f} s — {score.fall.cause}" if score.fall.fell else "- fall: none")
    t = score.timing
    if t is not None:
        out.append(f"- timing: {t.simulated_s:.1f} s simulated in {t.wall_s:.2f} s ({t.realtime_factor:.1f}× real "
                   f"time) + {t.setup_s:.2f} s setup; runtime.step p50 {t.step_p50_ms:.3f} ms, p99 "
                   f"{t.step_p99_ms:.3f} ms, max {t.step_max_ms:.3f} ms over {t.ticks} ticks")
    inter = ", ".join(f"{k} {v}" for k, v in score.interventions.items()) or "none"
    faults = ", ".join(f"{k} {v}" for k, v in score.faults.items()) or "none"
    out += [f"- safety interventions: {inter} (rate {score.intervention_rate:.4f} per tick); faults: {faults}", ""]
    if score.tracking:
        out += ["| channel | mean error | p95 error | scored ticks |", "|---|---|---|---|"]
        for name, _, unit in VELOCITY_CHANNELS:
            e = score.tracking[name]
            out.append(f"| {name} ({unit}) | {_fmt(e.mean)} | {_fmt(e.p95)} | {e.samples} |")
        out.append("")
    if score.segments:
        out += ["| segment | vx mean error (m/s) | vy mean error (m/s) | yaw rate mean error (rad/s) | scored ticks |",
                "|---|---|---|---|---|"]
        for label, errors in score.segments.items():
            cells = " | ".join(_fmt(errors[name].mean) for name, _, _ in VELOCITY_CHANNELS)
            out.append(f"| {label} | {cells} | {errors['vx'].samples} |")
        out.append("")
    if score.reach:
        out += ["| target | position (m) | final distance (m) | mean distance (m) | scored ticks |",
                "|---|---|---|---|---|"]
        for r in score.reach:
            pos = ", ".join(f"{v:.3f}" for v in r.target)
            out.append(f"| {r.label} | {pos} | {_fmt(r.final_m)} | {_fmt(r.mean_m)} | {r.samples} |")
        out.append("")
    return out


def markdown(result: GateResult, png_name: str = "report.png") -> str:
    sc = result.scenario
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    lines = [
        f"# sim2sim gate: {_pass(result.passed)}", "",
        f"- policy: `{result.policy or '(none: hold default pose)'}`",
        f"- robot `{result.robot}`, task `{result.task}`, scenario: {sc.name} ({sc.total_s:g} s per simulator: "
        f"{sc.lead_in_s:g} s arm + ramp, then the script)",
        f"- produced by: `{result.command or '(called from Python)'}`",
        f"- generated {now}, total wall time {result.wall_s:.1f} s", "",
        "## Checks", "", *_checks_table(result.scores), "",
        "## Per simulator", "", *[line for s in result.scores for line in _details(s)],
        "## Policy contract", "", *_contract_rows(result), "",
        "## Scenario", "", "| segment | from (s) | to (s) | command |", "|---|---|---|---|",
    ]
    names = ", ".join(sc.command_names)
    for seg, start, end in sc.segment_bounds():
        lines.append(f"| {seg.label} | {start:g} | {end:g} | ({names}) = "
                     f"({', '.join(f'{v:g}' for v in seg.command)}) |")
    lines.append("")
    for push in sc.loop_pushes():
        lines.append(f"- push at t = {push.t_s:g} s: base velocity += {tuple(push.velocity)} m/s (world frame)")
    lines += ["", "Definitions of every measured quantity: the docstring of `robot_rl/evaluation/sim2sim.py`.", "",
              "## Thresholds", "", "| name | value | unit | meaning |", "|---|---|---|---|"]
    lines += [f"| `{n}` | {v} | {u} | {_cell(d)} |" for n, v, u, d in result.config.describe()]
    lines += ["", "## Plots", "", f"![commanded vs measured, per simulator]({png_name})", ""]
    return "\n".join(lines)


def plot_runs(result: GateResult, path: str | Path) -> Path:
    """One figure, every simulator overlaid on the command (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sc = result.scenario
    moved = sc.scene is not None  # an object to its goal
    velocity = not sc.tracks_tool_point and not moved  # a base velocity, or a tool point to its targets
    rows = (["object distance to goal (m)", "object x (m)", "object y (m)"] if moved
            else ["vx (m/s)", "vy (m/s)", "yaw rate (rad/s)", "base height (m)"] if velocity
            else ["tip distance to target (m)", "tip x (m)", "tip y (m)", "tip z (m)"])
    fig, axes = plt.subplots(len(rows), 1, figsize=(11, 2.3 * len(rows)), sharex=True, constrained_layout=True)
    falls = {s.simulator: s.fall for s in result.scores}
    command_drawn = False
    for sim, run in result.runs.items():
        rec, color = run.record, SIM_COLORS.get(sim)
        cmd = commanded(rec, sc)
        if moved:
            obj = run.object_pos if run.object_pos is not None else np.full((len(rec.t), 3), np.nan)
            series = [np.array([sc.goal_distance(o, c) for o, c in zip(obj, cmd, strict=True)]), obj[:, 0], obj[:, 1]]
            targets = [None, cmd[:, 0], cmd[:, 1]]
        elif velocity:
            series = [rec.base_lin_vel[:, 0], rec.base_lin_vel[:, 1], run.base_ang_vel[:, 2], rec.base_pos[:, 2]]
            targets = [cmd[:, 0], cmd[:, 1], cmd[:, 2], None]
        else:
            tip = run.tip_pos if run.tip_pos is not None else np.full((len(rec.t), 3), np.nan)
            series = [np.linalg.norm(tip - cmd[:, :3], axis=1), tip[:, 0], tip[:, 1], tip[:, 2]]
            targets = [None, cmd[:, 0], cmd[:, 1], cmd[:, 2]]
        for ax, y, target in zip(axes, series, targets, strict=True):
            if target is not None and not command_drawn:
                ax.plot(rec.t, target, color="black", linestyle="--", linewidth=1.2, label="command")
            ax.plot(rec.t, y, color=color, linewidth=1.0, label=sim)
            fall = falls.get(sim)
            if fall is not None and fall.fell:
                k = min(int(np.searchsorted(rec.t, fall.t_s)), len(rec.t) - 1)
                ax.plot(rec.t[k], y[k], marker="x", color=color, markersize=10, mew=2)
        command_drawn = True
    nominal = result.spec.sim_model.base_height if result.spec.sim_model.floating_base else None
    if velocity and nominal is not None:
        axes[3].axhline(nominal, color="gray", linewidth=0.8)
        axes[3].axhline(nominal * result.config.fall_height_fraction, color="red", linewidth=0.8, linestyle=":")
    if not velocity:
        limit = result.config.object_goal_final_error_max_m if moved else result.config.reach_final_error_max_m
        axes[0].axhline(limit, color="red", linewidth=0.8, linestyle=":", label="final limit")
    for ax, label in zip(axes, rows, strict=True):
        ax.axvspan(0.0, sc.lead_in_s, color="0.9", zorder=0)
        for t_push in sc.push_times():
            ax.axvline(t_push, color="purple", linestyle="--", linewidth=0.9)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8, ncol=4)
    axes[-1].set_xlabel("time since arming (s); grey: ramp; purple dashed: push")
    fig.suptitle(f"sim2sim {'PASS' if result.passed else 'FAIL'}: {result.task} on {result.robot}")
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

