"""``robot-rl finetune``: the command line over :func:`~robot_rl.learn.residual.finetune.run_finetune`: tyro over
:class:`~robot_rl.learn.residual.settings.FinetuneCfg`, starting from a named preset (the settings' own checks make
a bad value a one-line error; the report is printed)."""

from __future__ import annotations

import sys

import tyro

from robot_rl.learn.residual.config import check, checks_deferred
from robot_rl.learn.residual.finetune import run_finetune
from robot_rl.learn.residual.settings import PRESETS, FinetuneCfg
from robot_rl.typed_yaml import ConfigError

DESCRIPTION = """Residual off-policy fine-tuning of an exported policy on a robot (sim, DDS bridge or hardware).

Settings start from a named preset, given as the first word (default: scratch): {names}. This one, {name}: {summary}.
`robot-rl finetune PRESET --help` shows a preset's values."""


def parse(args: list[str], prog: str = "robot-rl finetune") -> FinetuneCfg:
    """The settings ``args`` ask for: an optional first word naming a preset (:data:`PRESETS`), then flags over it."""
    name, chosen = "scratch", bool(args) and args[0] in PRESETS
    if chosen:
        name, args = args[0], args[1:]
    default, summary = PRESETS[name]
    with checks_deferred():  # checked below, where a bad value makes the command's one-line error
        cfg = tyro.cli(tyro.conf.OmitArgPrefixes[FinetuneCfg], args=args, default=default,  # type: ignore[misc]
                       prog=f"{prog} {name}" if chosen else prog,
                       description=DESCRIPTION.format(names=", ".join(PRESETS), name=name, summary=summary))
    try:  # the settings' own checks name the setting and the bad value: a one-line error, not a traceback
        check(cfg)
        return cfg
    except ValueError as exc:
        raise ConfigError("robot-rl finetune", "arguments", str(exc)) from None


def finetune(argv: list[str] | None = None, prog: str = "robot-rl finetune") -> int:
    """Residual off-policy fine-tuning of an exported policy on a robot (sim, DDS bridge or hardware)."""
    cfg = parse(sys.argv[1:] if argv is None else argv, prog)
    report = run_finetune(cfg)
    utd = cfg.sac.utd_ratio
    if report.calibrated is not None:
        print(f"calibrated start: {report.calibrated['log_transitions']} transitions logged, sim fitted as "
              f"{report.calibrated['calibration']['shift_text']}; sim residual {report.calibrated['exported']}")
    print(f"fine-tuned on {report.transitions} transitions ({report.episodes} episodes) → {report.run_dir}")
    if report.utd_achieved is not None:
        print(f"learner: {int(report.learner['updates'])} updates, {report.utd_achieved:.2f} per transition "
              f"(asked {utd:g})")
        if report.utd_achieved < 0.9 * utd:
            print("warning: the learner fell behind the robot (fewer updates per transition than asked): give it a "
                  "faster machine (or RunCfg.learner_threads where cores are idle), or ask for a lower --utd")
    if report.evaluations:
        first, last = report.evaluations[0], report.evaluations[-1]
        print(f"evaluation return {first['return']:.3f} → {last['return']:.3f}")
        if "success" in last:
            print(f"evaluation success rate {first['success']:.2f} → {last['success']:.2f}")
    if report.reward_terms_dropped:
        print(f"reward terms this robot's state cannot give, left out: {', '.join(report.reward_terms_dropped)}")
    if report.exported:
        print(f"base + residual policy: {report.exported}")
    if report.exported_best:
        b = report.best
        scored = ", ".join(f"{k} {b[k]:.3g}" for k in ("success", "return") if k in b)
        print(f"base + best-evaluated residual ({b['transitions']:,} transitions: {scored}): {report.exported_best}")
    return 0


finetune.own_cli = True  # robot_rl.cli hands it the arguments (a preset word, then tyro's flags)
