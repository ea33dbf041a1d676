"""The panda-push residual benchmark's report: the curves' plot and its results section (markdown), drawn from its
results store (``OUT_DIR/results.json``), so a page can be redrawn without re-running anything
(``bench_residual_push.py --phase report``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from residual_report import learner_extras

# Fine-tuning runs the benchmark knows (``--run-name``), in plot and table order.
RUN_LABELS = {"residual": "residual, α = 0.1 × clip (SAC, ours)",
              "residual_small": "residual, α = 0.03 × clip (SAC)",
              "residual_full": "full-authority residual, α = 1.0 × clip (SAC; base frozen, not its weights)",
              "residual_penalized": "residual, α = 0.1 × clip, critic warm-up and residual penalty (SAC)",
              "calibrated": "calibrated start, α = 0.2 × clip (calibrated actuators' inverse, then SAC)",
              "calibrated_s1": "calibrated start, seed 1", "calibrated_s2": "calibrated start, seed 2",
              "calibrated_anchored": "calibrated start, robot phase anchored harder (anchor 10, lr 1e-4)",
              "calibrated_chain": "calibrated start, the safety chain told the fitted motor gains",
              "calibrated_dagger": "calibrated start, DAgger fit, the chain as in the robot's file",
              "calibrated_chain_dagger": "calibrated start, DAgger fit, the chain told the fitted motor gains (ours)",
              "calibrated_keep_best": "calibrated start (DAgger fit, the chain told the motors), SAC robot phase to "
                                      "20k, the best-evaluated iterate exported",
              "calibrated_learn_sent": "calibrated start (DAgger fit, the chain told the motors), SAC robot phase "
                                       "learning from the residual the chain sent, best-evaluated iterate exported",
              "calibrated_q_anchor": "calibrated start (DAgger fit, the chain told the motors), SAC robot phase "
                                     "anchored in proportion to |Q| (TD3+BC-style), best-evaluated iterate exported",
              "ppo": "continued PPO on the full BC network (the task's PPO settings)",
              "ppo_gentle": "continued PPO on the full BC network, gentle (lr 1e-4 fixed, σ 0.05, 8 critic-only "
                            "iterations)",
              "ppo_quiet": "continued PPO on the full BC network, quiet exploration (lr 1e-4 fixed, σ 0.02, 8 "
                           "critic-only iterations)"}
STYLES = ("o-", "^-", "s-", "d-", "*-", "*:", "*--", "P-", "X-", "v-", "D-", "p-.", "p:", "p--", "h--", "h:", "h-.")
SENT = ", transitions recording the residual the safety chain sent (`--learn-sent`)"
SECTION_START, SECTION_END = "<!-- residual-push:start -->", "<!-- residual-push:end -->"


def recovered(s: float, nominal: float, real: float) -> float:
    return (s - real) / (nominal - real) if nominal != real else float("nan")


def binomial_se(p: float, n: int) -> float:
    return float(np.sqrt(max(p * (1 - p), 1e-12) / max(n, 1)))


def plot(results: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nom, real = results["base_nominal"], results["base_real"]
    drawn = [(name, label, style) for (name, label), style in zip(RUN_LABELS.items(), STYLES, strict=True)
             if results.get(name)]
    # One legend for both panels, under them: a dozen runs' labels do not fit inside an axis.
    rows = (len(drawn) + 4) // 2  # legend rows: the runs and four reference lines, two columns
    legend_in = 0.2 * rows + 0.2
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5 + legend_in))
    for name, label, style in drawn:
        curve = results[name]
        x = [c["transitions"] for c in curve]
        se = [binomial_se(c["success"], c["episodes"]) for c in curve]
        ax1.errorbar(x, [c["success"] for c in curve], yerr=se, fmt=style, capsize=3, label=f"{label} ± s.e.")
        ax2.plot(x, [100 * c["final_object_error_m"] for c in curve], style)
    ax1.axhline(real["success"], color="gray", ls="--", label="no fine-tuning (base on the 'real' robot)")
    ax1.axhline(nom["success"], color="black", ls="-.", label="base in its training sim")
    ax2.axhline(100 * real["final_object_error_m"], color="gray", ls="--")
    ax2.axhline(100 * nom["final_object_error_m"], color="black", ls="-.")
    ax2.axhline(3.0, color="green", ls=":", label="success radius (3 cm, right)")
    longest = max((c["transitions"] for name, _, _ in drawn for c in results[name]), default=0)
    for ax in (ax1, ax2):
        if longest > 100_000:  # continued PPO runs to ~10⁶: linear below 10⁴, where the residual runs live
            ax.set_xscale("symlog", linthresh=10_000)
        ax.set_xlim(left=0)
        ax.set_xlabel("transitions on the 'real' robot" + (" (linear to 10⁴, log above)" if longest > 100_000
                                                           else ""))
        ax.grid(alpha=0.3)
    ax1.set_ylabel(f"success rate ({results['eval_episodes']} fixed layouts)")
    ax1.set_ylim(-0.02, 1.02)
    ax2.set_ylabel("mean final cube–goal distance (cm)")
    handles = [h for ax in (ax1, ax2) for h in ax.get_legend_handles_labels()[0]]
    labels = [lab for ax in (ax1, ax2) for lab in ax.get_legend_handles_labels()[1]]
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=7.5, frameon=False)
    fig.suptitle(f"panda-push, BC base: 'real' = {results['shift_text']}", fontsize=10)
    fig.tight_layout(rect=(0, legend_in / (4.5 + legend_in), 1, 1))
    fig.savefig(png, dpi=110)


def section(results: dict, png: Path) -> str:
    nom, real = results["base_nominal"], results["base_real"]
    n = results["eval_episodes"]
    base = results.get("base", {})
    lines = [
        SECTION_START,
        "### Panda push (panda-push), a behaviour-cloned base",
        "",
        f"Base: BC policy ({base.get('how', 'see results.json')}). The \"real\" robot is the same MuJoCo Panda, "
        f"table and cube shifted beyond anything the demos saw: {results['shift_text']} (the demos and BC: the "
        "nominal sim, no randomization). Every policy is scored by one harness: deterministic episodes through "
        f"`DeployRuntime` (safety chain on) on the shifted robot, on the same {n} seeded layouts (seed "
        f"{results['eval_seed']}; never trained on: the demos use seed 0, fine-tuning its own stream), each "
        "episode: ramp to the default pose, the cube set at its start, 10 s of policy ticks. Performance = the "
        "task's success rate (cube centre within 3 cm of the goal at the end); **gap recovered** = "
        "(S − S_base,real) / (S_base,sim − S_base,real). x = transitions collected on the \"real\" robot "
        f"(evaluation episodes not counted). Binomial standard error at n = {n}: ±{binomial_se(0.5, n):.2f} "
        "at 50 %.",
        "",
        *("    " + c for c in results.get("commands", [])),
        "",
        "| | success | gap recovered | mean final cube–goal distance (cm) | return | safety interventions |",
        "|---|---:|---:|---:|---:|---:|",
        f"| base in its training sim | {nom['success']:.2f} | 1 (definition) | "
        f"{100 * nom['final_object_error_m']:.1f} | {nom['return']:.2f} | {nom['safety_events']} |",
        f"| base on the \"real\" robot, no fine-tuning | {real['success']:.2f} | 0 (definition) | "
        f"{100 * real['final_object_error_m']:.1f} | {real['return']:.2f} | {real['safety_events']} |",
    ]
    for name, label in RUN_LABELS.items():
        for c in results.get(name, []):
            lines.append(f"| {label.split(' (')[0]}, {c['transitions']:,} transitions | {c['success']:.2f} | "
                         f"{c['recovered']:.2f} | {100 * c['final_object_error_m']:.1f} | {c['return']:.2f} | "
                         f"{c['safety_events']} |")
    for name in RUN_LABELS:
        run = results.get(f"{name}_run")
        if not run:
            continue
        if name.startswith("ppo"):
            lines += ["", f"Run `{name}`: rsl_rl PPO on the BC network's own weights (normalizer fixed), "
                      f"{run['num_envs']} envs × 24 steps = {24 * run['num_envs']:,} transitions per iteration, "
                      f"learning rate {run['learning_rate']:g} ({run['schedule']}), initial σ {run['init_std']:g} "
                      f"(action units), no entropy bonus, {run['critic_warmup']} critic-only iterations first "
                      "(counted), γ 0.99, λ 0.95, clip 0.2, 5 epochs × 4 mini-batches; reward: panda-push `REWARDS`, "
                      "as the residual's."]
            continue
        learner, sync = run["learner"], run["sync"]
        lines += ["", f"Run `{name}`: α = {run['fraction']} × the action clip, SAC with {run['critic_norm']} critics, "
                  f"UTD {run['utd']}, 3-step returns{learner_extras(run)}"
                  f"{SENT if run.get('learn_sent') else ''}, the learner in its own process (the "
                  f"lockstep sim paces itself to the UTD ratio, waiting up to {run.get('learner_timeout_s', 2.0):g} s "
                  f"for a learner slowed by other jobs); {run['episodes']} training episodes, "
                  f"{int(learner['updates']):,} updates, "
                  f"{int(learner['lost'])} transitions lost in the ring, {sync['syncs']} weight syncs; wall time "
                  f"{run['wall_s'] / 60:.1f} min on 2 cores shared with other jobs. Reward (panda-push `REWARDS`, "
                  "used by fine-tuning only): cube → goal distance −5/m·s, exp kernel (σ 5 cm) 1/s, inside the "
                  "success radius 2/s, tool → cube −0.2/m·s, action rate −0.01."]
        cal = run.get("calibrated")
        if cal:
            how = ("the calibrated actuators' inverse fitted by regression" if cal["sim"].get("start") == "actuators"
                   else "from the base alone")
            how += f", then {cal['sim']['iterations']} PPO iterations" if cal["sim"].get("iterations") else ", no PPO"
            lines[-1] += (f" Calibrated start: {cal['log_transitions']:,} robot transitions logged (counted), the sim "
                          f"fitted as {cal['calibration']['shift_text']}; sim residual: {how} "
                          f"({cal['sim']['transitions']:,} sim transitions).")
    final = results.get("final_eval")
    if final and final.get("runs"):
        fn, fr = final["base_nominal"], final["base_real"]
        lines += ["", f"Second look (`--phase final-eval`): {final['episodes']} other layouts (seed {final['seed']}), "
                  f"binomial standard error ±{binomial_se(0.5, final['episodes']):.2f} at 50 %.", "",
                  "| policy | success | gap recovered | mean final cube–goal distance (cm) | return |",
                  "|---|---:|---:|---:|---:|",
                  f"| base in its training sim | {fn['success']:.2f} | 1 (definition) | "
                  f"{100 * fn['final_object_error_m']:.1f} | {fn['return']:.2f} |",
                  f"| base on the \"real\" robot | {fr['success']:.2f} | 0 (definition) | "
                  f"{100 * fr['final_object_error_m']:.1f} | {fr['return']:.2f} |"]
        for name, r in final["runs"].items():
            lines.append(f"| {name} | {r['success']:.2f} | {r['recovered']:.2f} | "
                         f"{100 * r['final_object_error_m']:.1f} | {r['return']:.2f} |")
    shifts = results.get("shift_search")
    if shifts:
        lines += ["", "How the shift was chosen: the base's success on the first layouts of the evaluation set "
                  "under candidate shifts (the nominal sim first):", "",
                  *("    " + c for c in results.get("shift_search_commands", [])), "",
                  "| shift | episodes | success | mean final distance (cm) |", "|---|---:|---:|---:|"]
        for row in shifts:
            lines.append(f"| {row['shift_text']} | {row['episodes']} | {row['success']:.2f} | "
                         f"{100 * row['final_object_error_m']:.1f} |")
    for note in results.get("notes", []):  # findings written by hand after a run (results.json "notes")
        lines += ["", note]
    lines += ["", "Compared with: no fine-tuning, and continued PPO on the full BC network in the shifted vectorized "
              "push env (`--phase ppo`; continued BC would need new demos on the \"real\" robot). Residual PPO in the "
              "vectorized push env under the true shift (the calibrated start's PPO phase, given the exact "
              "calibration) did not raise the return in 300 iterations from zero and drifted away from the "
              "actuators start (benchmarks/results/RESULTS_residual_calibrated.md).",
              "", f"![success vs transitions]({png.name})", "",
              f"Machine: {results.get('machine', '?')}, 2 cores shared with other jobs.", SECTION_END]
    return "\n".join(lines) + "\n"


def write_section(text: str, path: Path) -> None:
    """Replace this benchmark's section of ``path`` (between its markers), or append it; keep the rest."""
    old = path.read_text() if path.exists() else ""
    if SECTION_START in old and SECTION_END in old:
        head, rest = old.split(SECTION_START, 1)
        new = head + text.rstrip("\n") + rest.split(SECTION_END, 1)[1]
    else:
        new = (old.rstrip("\n") + "\n\n" if old.strip() else "") + text
    path.write_text(new)
