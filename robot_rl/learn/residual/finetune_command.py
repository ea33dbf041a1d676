"""``robot-rl finetune``: the command line over :func:`~robot_rl.learn.residual.finetune.run_finetune` (its flags
become the typed settings, whose own checks make a bad value a one-line error; the report is printed)."""

from __future__ import annotations

from typing import Literal

from robot_rl.learn.residual.calibrated import CALIBRATED_DEFAULTS, CalibratedStartCfg, sim_residual_cfg
from robot_rl.learn.residual.config import ReplayCfg, ResidualCfg, SACCfg, finetune_lr
from robot_rl.learn.residual.finetune import Interface, parse_shift, policy_task, run_finetune
from robot_rl.typed_yaml import ConfigError


def finetune(policy: str, robot: str = "a1", interface: Interface = "sim", transitions: int = 20_000,
             fraction: float | None = None, history: int = ResidualCfg.history, utd: float = SACCfg.utd_ratio,
             lr: float | None = None, algorithm: Literal["sac", "td3"] = SACCfg.algorithm,
             explore_std: float = SACCfg.explore_std, n_step: int = ReplayCfg.n_step,
             critic_norm: Literal["layernorm", "batchnorm"] = "layernorm",
             critic_dropout: float = SACCfg.critic_dropout, actor_ema: float = 0.0,
             prior: str | None = None,
             prior_fraction: float = ReplayCfg.prior_fraction, shift: str | None = None, run_dir: str | None = None,
             resume: str | None = None, init_from: str | None = None, eval_every: int = 2500,
             eval_episodes: int = 8, command_every_s: float | None = None, train_episode_s: float | None = None,
             teleop: str | None = None, realtime: bool | None = None, fifo_priority: int | None = None, seed: int = 0,
             domain_id: int | None = None, network_interface: str | None = None, learner_threads: int = 1,
             calibrate: bool = False, calibration_ticks: int = CalibratedStartCfg.log_ticks,
             sim_iterations: int | None = None, sim_start: Literal["zero", "actuators"] | None = None,
             calibrate_chain: bool = False, actor_warmup: int | None = None,
             anchor_penalty: float | None = None, anchor_q_scaled: bool = False, learn_sent: bool = False) -> int:
    """Residual off-policy fine-tuning of an exported policy on a robot (sim, DDS bridge or hardware).

    Args:
        policy: the base policy (.onnx with its contract); its task comes from the contract's provenance.
        robot: robot spec name (hardware/robots/NAME.yaml).
        interface: sim (in-process MuJoCo, lockstep) or unitree-dds (the robot or `robot-rl bridge`, real time).
        transitions: policy transitions to collect (evaluation episodes are not counted).
        fraction: residual bound, as a fraction of the contract's action clip (raw action units). Default 0.1;
            0.2 with --calibrate.
        history: ticks of observations and base actions the residual and its critics see (1: this tick's). More
            show them the robot's recent response, where latency and soft gains show; the exported file then
            takes its observation terms with history − 1 more frames.
        utd: gradient updates per transition (update-to-data ratio).
        lr: learning rate of the residual actor, the critics and the temperature (default: the policy's task's
            measured one, TaskCfg.finetune_lr, else 3e-4; 3e-4 with --calibrate).
        algorithm: sac (soft actor-critic) or td3 (a deterministic residual with fixed exploration noise,
            target smoothing and an actor update every second critic update).
        explore_std: td3: the exploration noise σ the loop adds before the residual's tanh.
        n_step: n-step returns.
        critic_norm: layernorm (with target critics) or batchnorm (CrossQ, no target critics).
        critic_dropout: dropout in the critics (DroQ: 0.01 with layernorm, for a high --utd).
        actor_ema: > 0: also export an average of the actor's weights at this rate per update
            (policy_residual_ema.onnx, next to the last iterate).
        prior: an .npz of prior transitions (a previous run's buffer.npz), sampled at prior_fraction.
        prior_fraction: share of every batch drawn from the prior data (RLPD: 0.5).
        shift: sim only: the "real" robot's difference from the training sim, e.g. kp=0.5,payload=2.5,latency=2.
        run_dir: output directory (default runs/residual/TASK/TIMESTAMP).
        resume: a previous run directory (or its checkpoint.pt) to continue from.
        init_from: a previous run (e.g. the same fine-tuning in sim) whose residual and critics start this run;
            its buffer and counts are not carried (give it as --prior for that).
        eval_every: transitions between deterministic evaluations.
        eval_episodes: episodes per evaluation (fixed, seeded commands).
        command_every_s: training episodes change command this often (default: one command per episode).
        train_episode_s: length of training episodes (default: the task's; evaluation always uses the task's).
            Shorter ones give the same transitions more resets, commands and starts.
        teleop: arm interventions from a device: keyboard, gamepad[:PATH], spacemouse[:PATH].
        realtime: real-time loop (default: on for hardware, off for sim).
        fifo_priority: real time: run the loop under SCHED_FIFO at this priority (needs root or CAP_SYS_NICE).
        seed: seed of the learner and of the episode commands.
        domain_id: DDS domain (default: the spec's).
        network_interface: DDS network interface (default: the spec's).
        learner_threads: torch threads of the learner process (real time: more updates per second only where
            the machine has idle cores; on cores shared with the control loop they compete with it).
        calibrate: start from a calibrated sim: log the base alone on the robot for calibration_ticks, fit the
            training sim's gains, latency, payload and friction to that log, train the residual there by PPO
            (sim_iterations), then fine-tune on the robot from it. The log's ticks count as transitions.
        calibration_ticks: policy ticks of the robot log a calibrated start fits the sim to.
        sim_iterations: PPO iterations of the residual in the calibrated sim (6,144 sim transitions each). Default
            400; 0 for push tasks (calibrated.SIM_RESIDUAL_BY_OBJECTIVE).
        sim_start: where the sim residual starts: zero (the base alone) or actuators (the calibrated motors'
            inverse, fitted by regression: the residual under which they apply the torques the base's targets ask of
            the nominal ones and hold the fitted payload). Default zero; actuators for push tasks.
        calibrate_chain: with --calibrate, tell the safety chain's torque limit the fitted motor gains for the rest
            of the run (it estimates the torque a weaker motor really applies instead of clipping it at a fraction
            of it); for deployment, write them into the robot's file (robot-rl calibrate prints the lines).
        actor_warmup: critic-only updates before the residual first moves (fresh critics learning a started
            residual's value before their gradient reaches it). Default 0; 2000 with --calibrate.
        anchor_penalty: × the squared distance of the residual from the one the run started from (--calibrate,
            --init-from), in the actor's loss: keeps a good start where the robot's data does not show it wrong.
            Default 0; 1.0 with --calibrate.
        anchor_q_scaled: the anchor's weight × the batch's mean |Q| (TD3+BC's normalization: the same share of the
            actor's loss whatever the size of the returns; --anchor-penalty 0.4 ≈ TD3+BC's α 2.5).
        learn_sent: where the safety chain changed a tick's target (rate or torque limit), the transition records
            the residual that produces the target it sent, not the one the actor sampled: the critics learn the
            value of what the robot did.
    """
    if calibrate:  # the settings measured for a calibrated start, where not given (calibrated.CALIBRATED_DEFAULTS)
        given = {"fraction": fraction, "lr": lr, "actor_warmup": actor_warmup, "anchor_penalty": anchor_penalty}
        fraction, lr, actor_warmup, anchor_penalty = (CALIBRATED_DEFAULTS[k] if v is None else v
                                                      for k, v in given.items())
    fraction = ResidualCfg.fraction if fraction is None else fraction
    actor_warmup = SACCfg.actor_warmup_updates if actor_warmup is None else actor_warmup
    anchor_penalty = SACCfg.anchor_penalty if anchor_penalty is None else anchor_penalty
    task = policy_task(policy) if lr is None or calibrate else None  # the contract, read once
    if lr is None:
        lr = finetune_lr(task)
    try:  # the settings' own checks name the setting and the bad value: a one-line error, not a traceback
        residual_cfg = ResidualCfg(fraction=fraction, history=history, learn_sent=learn_sent)
        sac_cfg = SACCfg(utd_ratio=utd, critic_norm=critic_norm, actor_ema_rate=actor_ema, actor_lr=lr, critic_lr=lr,
                         alpha_lr=lr, algorithm=algorithm, explore_std=explore_std, critic_dropout=critic_dropout,
                         actor_warmup_updates=actor_warmup, anchor_penalty=anchor_penalty,
                         anchor_q_scaled=anchor_q_scaled)
        replay_cfg = ReplayCfg(n_step=n_step, prior_path=prior, prior_fraction=prior_fraction)
        calibrated = CalibratedStartCfg(log_ticks=calibration_ticks, sim=sim_residual_cfg(
            task, seed, iterations=sim_iterations, start=sim_start),
            chain="calibrated" if calibrate_chain else "spec") if calibrate else None
    except ValueError as exc:
        raise ConfigError("robot-rl finetune", "arguments", str(exc)) from None
    report = run_finetune(
        policy, robot, interface, transitions=transitions, residual=residual_cfg, sac=sac_cfg, replay=replay_cfg,
        shift=parse_shift(shift),
        run_dir=run_dir, resume=resume, init_from=init_from, eval_every=eval_every, eval_episodes=eval_episodes,
        command_every_s=command_every_s, train_episode_s=train_episode_s, realtime=realtime, teleop=teleop,
        seed=seed, domain_id=domain_id, network_interface=network_interface, fifo_priority=fifo_priority,
        learner_threads=learner_threads, calibrated=calibrated)
    if report.calibrated is not None:
        print(f"calibrated start: {report.calibrated['log_transitions']} transitions logged, sim fitted as "
              f"{report.calibrated['calibration']['shift_text']}; sim residual {report.calibrated['exported']}")
    print(f"fine-tuned on {report.transitions} transitions ({report.episodes} episodes) → {report.run_dir}")
    if report.utd_achieved is not None:
        print(f"learner: {int(report.learner['updates'])} updates, {report.utd_achieved:.2f} per transition "
              f"(asked {utd:g})")
        if report.utd_achieved < 0.9 * utd:
            print("warning: the learner fell behind the robot (fewer updates per transition than asked): give it a "
                  "faster machine (or --learner-threads where cores are idle), or ask for a lower --utd")
    if report.evaluations:
        first, last = report.evaluations[0], report.evaluations[-1]
        print(f"evaluation return {first['return']:.3f} → {last['return']:.3f}")
        if "success" in last:
            print(f"evaluation success rate {first['success']:.2f} → {last['success']:.2f}")
    if report.reward_terms_dropped:
        print(f"reward terms this robot's state cannot give, left out: {', '.join(report.reward_terms_dropped)}")
    if report.exported:
        print(f"base + residual policy: {report.exported}")
    if report.exported_ema:
        print(f"base + averaged residual: {report.exported_ema}")
    if report.exported_best:
        b = report.best
        scored = ", ".join(f"{k} {b[k]:.3g}" for k in ("success", "return") if k in b)
        print(f"base + best-evaluated residual ({b['transitions']:,} transitions: {scored}): {report.exported_best}")
    return 0
