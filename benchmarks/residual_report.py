"""The residual benchmarks' report: the score, the curves' plot and the results page (markdown), all drawn from a
results store (``OUT_DIR/results.json``) so a page can be redrawn without re-running anything
(``bench_residual.py --phase report``)."""

from __future__ import annotations

from pathlib import Path

from robot_rl.learn.residual.config import SAC_LR, SACCfg
from robot_rl.learn.residual.shifted_sim import describe_training_ranges
from robot_rl.tasks.registry import make_task

# The performance every method is scored on: the task's own episode return (what the base was trained to
# maximize). Shown next to it: a physical error of the task (reach: the tool point's error after the first second).
METRIC = "return"
# Fine-tuning runs (``--run-name``) and the comparison, in plot and table order: (results key, label, style).
RUNS = {"residual": "residual from scratch (ours)",  # the learner's first transition is on the robot
        "residual_s1": "residual from scratch, seed 1",
        "residual_sim": "residual started in sim (ours)",  # from a run in the nominal sim, its data as prior
        "residual_sim_s1": "residual started in sim, seed 1",
        # a calibrated start: the robot's log → a calibrated sim → PPO residual there → SAC on the robot
        "calibrated": "calibrated start (ours)", "calibrated_s1": "calibrated start, seed 1",
        "calibrated_s2": "calibrated start, seed 2", "calibrated_s3": "calibrated start, seed 3"}
METHODS = (*((key, label, style) for (key, label), style in zip(
    RUNS.items(), ("o-", "o:", "d-", "d:", "^-", "^:", "^--", "^-."), strict=True)),
           ("ppo", "continued PPO (full policy)", "s-"))
SECONDARY = {"reach": ("settled_tip_error_m", "tip error after the first second", 100.0, "cm"),
             "velocity_tracking": ("vel_error_m_s", "velocity tracking error ‖command − v_xy‖", 1.0, "m/s")}


def recovered(e: float, nominal: float, real: float) -> float:
    return (real - e) / (real - nominal)


def first_reaching(curve: list[dict], level: float) -> int | None:
    return next((c["transitions"] for c in curve if c["recovered"] >= level), None)


def plot(results: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key, label, k, unit = SECONDARY[make_task(results["task"]).objective]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for curve_key, name, style in METHODS:
        curve = results.get(curve_key, [])
        if curve:
            x = [max(c["transitions"], 100) for c in curve]
            ax1.plot(x, [c["recovered"] for c in curve], style, label=name)
            ax2.plot(x, [k * c[key] for c in curve], style, label=name)
    ax1.axhline(0.0, color="gray", ls="--", label="no fine-tuning")
    ax1.axhline(0.8, color="green", ls=":", label="80 % of the gap")
    ax2.axhline(k * results["base_real"][key], color="gray", ls="--", label="base on the 'real' robot")
    ax2.axhline(k * results["base_nominal"][key], color="black", ls="-.", label="base in its training sim")
    for ax in (ax1, ax2):
        ax.axvline(20_000, color="black", alpha=0.4, lw=3, label="20k transitions")
        ax.set_xscale("log")
        ax.set_xlabel("transitions on the 'real' robot")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax1.set_ylabel("fraction of the return gap recovered")
    ax2.set_ylabel(f"{label} ({unit})")
    fig.suptitle(f"{results['task']}: 'real' = {results['shift_text']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def _fmt_transitions(n: int | None) -> str:
    return "not reached" if n is None else f"{n:,}"


def write_markdown(results: dict, png: Path, path: Path) -> None:
    key, label, k, unit = SECONDARY[make_task(results["task"]).objective]
    nom, real = results["base_nominal"], results["base_real"]
    ppo = results.get("ppo", [])
    curves = [(label, results[key]) for key, label, _ in METHODS if results.get(key)]

    def at(curve: list[dict], budget: int) -> dict | None:
        """The first evaluation at or after ``budget`` transitions (episodes end past it by up to one episode)."""
        return next((c for c in curve if c["transitions"] >= budget), None)

    reach = "success" in nom

    def score_table(what: str, fraction_name: str, rows: list[tuple[str, dict, float]]) -> list[str]:
        """One row per scored policy or robot: its return, a fraction of the gap, the task's error, falls."""
        return [f"| {what} | return | {fraction_name} | {label} ({unit}) | falls |", "|---|---:|---:|---:|---:|",
                *(f"| {name} | {c[METRIC]:.3f} | {fraction:.2f} | {k * c[key]:.2f} | {c.get('falls', '')} |"
                  for name, c, fraction in rows)]
    success = (lambda c: f" {c.get('success', float('nan')):.2f} |") if reach else (lambda c: "")

    lines = [
        "## Residual off-policy fine-tuning, sim as \"real\" (issue 8)",
        "",
        f"Task `{results['task']}`, base policy trained by PPO in the nominal training sim. The \"real\" robot is "
        f"the same MuJoCo robot shifted beyond the training randomization: {results['shift_text']} (training: "
        f"{describe_training_ranges(make_task(results['task']).randomization)}). Every "
        "method is scored by one harness: deterministic episodes through `DeployRuntime` (safety chain on) on the "
        f"shifted robot, the same {results['eval_episodes']} seeded commands, each episode reset by the state "
        "machine's ramp to the default pose. Performance = the task's episode return (the objective the base was "
        "trained on); **gap recovered** = (R − R_base,real) / (R_base,sim − R_base,real). x = transitions collected "
        "on the \"real\" robot (evaluation episodes not counted)." + (
            " Two residual runs: *from scratch* starts on the robot with a zero residual and fresh critics; *started "
            "in sim* first runs the same fine-tuning in the nominal sim (free: not counted), then starts on the robot "
            "from those networks with the sim run's buffer as prior data (RLPD's symmetric sampling)."
            if results.get("residual_sim") else ""),
        "",
        f"| | return | gap recovered | {label} ({unit}) |" + (" success (tip < 2 cm at the end) |" if reach else ""),
        "|---|---:|---:|---:|" + ("---:|" if reach else ""),
        f"| base in its training sim | {nom['return']:.3f} | 1 (definition) | {k * nom[key]:.2f} |" + success(nom),
        f"| base on the \"real\" robot, no fine-tuning | {real['return']:.3f} | 0 (definition) | {k * real[key]:.2f} |"
        + success(real),
    ]
    for name, curve in curves:
        c20 = at(curve, 20_000)
        for tag, c in (("first evaluation ≥ 20k transitions", c20), ("last point", curve[-1])):
            if c is not None and (tag == "first evaluation ≥ 20k transitions" or c is not c20):
                lines.append(f"| {name}, {tag} ({c['transitions']:,}) | {c['return']:.3f} | {c['recovered']:.2f} | "
                             f"{k * c[key]:.2f} |" + success(c))
    lines += ["", "| method | gap recovered at 20k transitions | transitions to 50 % | transitions to 80 % |",
              "|---|---:|---:|---:|", "| no fine-tuning | 0 | never | never |"]
    for name, curve in curves:
        c20 = at(curve, 20_000)
        if c20 is not None:
            lines.append(f"| {name} | {c20['recovered']:.2f} (at {c20['transitions']:,}) | "
                         f"{_fmt_transitions(first_reaching(curve, 0.5))} | "
                         f"{_fmt_transitions(first_reaching(curve, 0.8))} |")
    final = results.get("final_eval")
    if final and final.get("runs"):
        fn, fr = final["base_nominal"], final["base_real"]
        lines += ["", f"A second look with {final['episodes']} episodes per policy on another command set (seed "
                  f"{final['seed']}), each exported policy (`--phase final-eval`), the gap re-measured on that set "
                  f"(base: {fn['return']:.3f} in its training sim, {fr['return']:.3f} on the \"real\" robot):", ""]
        runs = final["runs"].items()
        lines += score_table("policy", "gap recovered", [(name, c, c["recovered"]) for name, c in runs])
    parts = results.get("decomposition")
    if parts:
        pn, pr = parts["nominal"][METRIC], parts["real"][METRIC]
        lines += ["", f"Where the gap comes from: the base alone on each part of the shift ({parts['episodes']} "
                  f"commands, seed {parts['seed']}, `--phase decompose`); share = (R_nominal − R) / (R_nominal − "
                  f"R_real), nominal {pn:.3f}, the whole shift {pr:.3f}:", ""]
        lines += score_table("robot", "share of the gap", [(f"{name} ({c['shift']})", c, (pn - c[METRIC]) / (pn - pr))
                                                           for name, c in parts["parts"].items()])
    ceiling = results.get("ceiling")
    if ceiling:
        fin = results["final_eval"]
        lines += ["", f"What a residual at each bound could reach (`--phase ceiling`, the same {ceiling['episodes']} "
                  f"commands, seed {ceiling['seed']}): the base plus the correction of {ceiling['name']} "
                  f"(`{ceiling['onnx']}`), clipped per joint to α = fraction × the action clip — a policy a residual "
                  "at that bound can represent exactly, so a lower bound on the best one; ∞ is that policy itself. "
                  f"Base: {fin['base_nominal'][METRIC]:.3f} in its training sim, {fin['base_real'][METRIC]:.3f} on "
                  "the \"real\" robot.", ""]
        rows = [(f"α = {'∞' if c['fraction'] == float('inf') else format(c['fraction'], 'g') + ' × clip'} "
                 f"(clip acts on {c['clipped_share']:.0%} of joint-ticks; the correction's mean size "
                 f"{c['correction_mean_abs']:.2f} raw units)", c, c["recovered"])
                for c in ceiling["fractions"].values()]
        lines += score_table("bound", "gap recovered", rows)
    lines += ["", f"![gap recovered vs transitions]({png.name})", "", "Every evaluation:", "",
              f"| method | transitions | return | recovered | {label} ({unit}) |", "|---|---:|---:|---:|---:|"]
    for name, curve in curves:
        for c in curve:
            lines.append(f"| {name} | {c['transitions']:,} | {c['return']:.3f} | {c['recovered']:.2f} | "
                         f"{k * c[key]:.2f} |")
    if ppo and "vec_env_return" in nom and "vec_env_return" in ppo[0]:
        v_nom, v_real = nom["vec_env_return"], real["vec_env_return"]
        lines += ["", "Continued PPO trains in the vectorized sim with the same shift, where no deploy runtime or "
                  "safety chain sits between the policy and the motors. Its own yardstick — deterministic return "
                  f"in that env on the same targets (base: {v_nom:.3f} nominal, {v_real:.3f} shifted):", "",
                  "| PPO transitions | return in its training env | gap recovered there | return through the runtime "
                  "on the \"real\" robot |", "|---:|---:|---:|---:|"]
        for c in ppo:
            lines.append(f"| {c['transitions']:,} | {c['vec_env_return']:.3f} | "
                         f"{recovered(c['vec_env_return'], v_nom, v_real):.2f} | {c['return']:.3f} |")
    for key, label in RUNS.items():
        run = results.get(f"{key}_run")
        if not run:
            continue
        learner, sync = run["learner"], run["sync"]
        start = ""
        if run.get("init_from"):
            start = (f" Started from the networks of the same fine-tuning run for {run['init_transitions']:,} "
                     "transitions in the nominal sim (`--phase prior`)" + (
                         f", whose buffer is also sampled as prior data at {run['prior_fraction']:.0%} of every batch "
                         "(RLPD)" if run.get("prior") else "") + "; the sim transitions are not counted.")
        lines += ["", f"Run `{key}` ({label}): α = {run['fraction']} × the action clip, SAC with "
                  f"{run['critic_norm']} critics, UTD {run['utd']}, 3-step returns{learner_extras(run)}, the learner "
                  "in its own process (the lockstep sim paces itself to the UTD ratio); "
                  f"{int(learner['updates']):,} updates, {int(learner['lost'])} transitions lost in the ring, "
                  f"{sync['syncs']} weight syncs (poll mean {1e6 * sync['sync_mean_s']:.0f} µs, max "
                  f"{1e6 * sync['sync_max_s']:.0f} µs); wall time {run['wall_s'] / 60:.1f} min on 2 cores shared with "
                  "other jobs. The exported base + residual is one ONNX file with the base's contract." + start]
    timing = results.get("timing")
    if timing:
        r, b, a, m = (timing["runtime_step_us"], timing["base_only_step_us"], timing["after_kill_step_us"],
                      timing["act_us"])
        y, late = timing["sync_poll_us"], timing["lateness_us"]
        lines += ["", "### Real-time loop with a live learner, the learner SIGKILLed halfway", "",
                  f"50 Hz `RateLoop` (GC paused, {timing.get('scheduling', 'normal')}) for {timing['ticks']} ticks on "
                  "the SimRobot; the learner trained on "
                  f"the loop's transitions ({timing['learner_updates_before_kill']} updates) and was killed at tick "
                  f"{timing['kill_tick']}. Missed deadlines: **{timing['missed_deadlines']}**; the runtime stayed "
                  f"`{timing['mode_at_end']}`; the base drove alone on {timing['fallback_ticks']} ticks after the "
                  f"learner's heartbeat timed out; {timing['syncs']} weight syncs before that.", "",
                  "| per tick (µs) | p50 | p99 | max |", "|---|---:|---:|---:|",
                  f"| `runtime.step`, base + residual | {r['p50']:.0f} | {r['p99']:.0f} | {r['max']:.0f} |",
                  f"| `runtime.step`, base alone (baseline, same states and ticks) | {b['p50']:.0f} | {b['p99']:.0f} | "
                  f"{b['max']:.0f} |",
                  f"| `runtime.step`, after the kill (base) | {a['p50']:.0f} | {a['p99']:.0f} | {a['max']:.0f} |",
                  f"| `ResidualPolicy.act` alone, no learner (exploring) | {m['residual_p50']:.0f} | "
                  f"{m['residual_p99']:.0f} | |",
                  f"| base `OnnxPolicy.act` alone (baseline) | {m['base_p50']:.0f} | {m['base_p99']:.0f} | |",
                  f"| weight-sync poll, inside the residual step ({y['n']} polls) | {y['p50']:.0f} | {y['p99']:.0f} | "
                  f"{y['max']:.0f} |",
                  f"| loop wake-up lateness | {late['p50']:.0f} | {late['p99']:.0f} | {late['max']:.0f} |", "",
                  f"Step time with the residual / base alone, p50, while the learner runs: {r['p50'] / b['p50']:.2f}×; "
                  f"the policy call alone: {m['residual_p50'] / m['base_p50']:.1f}× "
                  f"(+{m['residual_p50'] - m['base_p50']:.0f} µs)."]
    lines += ["", f"Machine: {results.get('machine', '?')}, 2 cores shared with other jobs; single-core speed drifts, "
              "so compare only figures from one run."]
    path.write_text("\n".join(lines) + "\n")


def learner_extras(run: dict) -> str:
    """The non-default learner settings of a recorded run, as a phrase for the results text."""
    out = ""
    if run.get("actor_warmup"):
        out += f", {run['actor_warmup']:,} critic-only updates before the residual moves"
    if run.get("anchor_penalty"):
        scaled = " × the batch's mean |Q|" if run.get("anchor_q_scaled") else ""
        out += f", anchored to its start (× {run['anchor_penalty']:g}{scaled} the squared distance in the actor loss)"
    if run.get("residual_penalty"):
        out += f", residual penalty {run['residual_penalty']:g} × mean squared unit residual in the actor loss"
    lr = run.get("lr") or 3e-4  # runs recorded before the setting was (all at 3e-4, the default then)
    if lr != SAC_LR:
        out += f", learning rates {lr:g}"
    if run.get("gamma", SACCfg.gamma) != SACCfg.gamma:
        out += f", γ {run['gamma']:g}"
    if run.get("init_log_std", SACCfg.init_log_std) != SACCfg.init_log_std:
        out += f", initial exploration log σ {run['init_log_std']:g}"
    if run.get("target_entropy", SACCfg.target_entropy_per_dim) != SACCfg.target_entropy_per_dim:
        out += f", entropy target {run['target_entropy']:g} per dimension"
    if run.get("num_critics", SACCfg.num_critics) != SACCfg.num_critics:
        out += f", {run['num_critics']} critics (the minimum over all of them)"
    # Variants removed from the product since (commit eaf2417; git history has them): recorded runs still say so.
    if run.get("actor_ema"):
        out += f", an average of the actor's weights kept at rate {run['actor_ema']:g} per update"
    if run.get("command_every_s"):
        out += f", a new command every {run['command_every_s']:g} s in training episodes"
    if run.get("train_episode_s"):
        out += f", {run['train_episode_s']:g} s training episodes"
    if run.get("seed"):
        out += f", seed {run['seed']}"
    return out
