"""``robot-rl finetune``: residual off-policy fine-tuning of an exported policy on a robot.

    robot-rl finetune --policy policies/a1_flat/policy.onnx --robot a1 --interface unitree-dds
    robot-rl finetune --policy panda_reach.onnx --robot panda --interface sim --shift kp=0.5,payload=2.5,latency=2
    robot-rl finetune --policy runs/res_push/bc/policy.onnx --robot panda --shift kp=0.5,latency=2
    robot-rl finetune calibrated --policy policies/a1_flat/policy.onnx --robot a1 --interface unitree-dds

Push tasks (panda-push: a BC policy) run on the in-process sim only: every episode draws a layout (cube
start, goal) from the task's sampler and the scene is reset to it after the ramp
(:mod:`robot_rl.learn.residual.scenes`); the reward is the task's ``RewardsCfg`` (cube → goal distance,
success radius) from the scene's cube (the task's observation source), and evaluations report the task's success rate.

The same command runs against the in-process simulator (``sim``: lockstep, optionally shifted away from the
training sim to stand in for a real robot), the DDS sim bridge or a real Unitree robot (``unitree-dds``:
real time). It writes to ``--run-dir``: ``progress.jsonl`` (one line per episode and per evaluation),
the learner's ``checkpoint.pt`` and ``buffer.npz`` (``--resume`` continues from them; a buffer is also valid
prior data for another run, ``ReplayCfg.prior_path``), and ``policy_residual.onnx``: base + residual as one policy
with the base's contract (:mod:`robot_rl.learn.residual.export`). A ``--run-dir`` that already holds a run is
refused unless ``--resume`` names it: its buffer of robot transitions is never overwritten.

Sim first, then the robot: run the same command on ``--interface sim`` (free transitions), then on the robot
with ``--init-from`` that run (its residual and critics start the robot run); from Python, ``ReplayCfg.prior_path``
its ``buffer.npz`` (sampled at ``prior_fraction`` of every batch, as RLPD does with prior data). The calibrated
start (``robot-rl finetune calibrated``) is the preset for a sim-first run; how each start compares with learning
from scratch: ``benchmarks/results/RESULTS_residual.md`` and ``RESULTS_residual_calibrated.md``.

A policy imported from another trainer (``robot-rl import-policy``) runs as deploy runs it: :func:`load_base` takes
its observation, action decoding and recurrent state from its contract, the task of its provenance gives the rest
(commands, rewards, terminations, episodes, the robot); see docs/residual_finetuning.md, "A policy trained elsewhere".

Every setting is one :class:`~robot_rl.learn.residual.settings.FinetuneCfg` (the command line's, a preset's,
a benchmark's); :func:`run_finetune` runs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_rl.learn.residual.config import LearnerCfg, SACCfg
from robot_rl.learn.residual.episodes import EpisodeCfg, EpisodeLoop
from robot_rl.learn.residual.evaluation import evaluate, selection_key
from robot_rl.learn.residual.scenes import eval_setups, initial_scene, sample_setups
from robot_rl.learn.residual.settings import FinetuneCfg, Interface, parse_shift
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.typed_yaml import ConfigError


@dataclass
class FinetuneReport:
    run_dir: Path
    transitions: int
    episodes: int
    evaluations: list[dict] = field(default_factory=list)  # {"transitions", "tail_tip_error_m", "return", ...}
    learner: dict = field(default_factory=dict)
    sync: dict = field(default_factory=dict)
    exported: Path | None = None
    # The best-evaluated iterate (evaluation.selection_key), the run's start included: what to deploy when the
    # robot phase made things worse (it can undo a calibrated start: benchmarks/results/RESULTS_residual_calibrated.md).
    exported_best: Path | None = None
    best: dict | None = None  # that evaluation's line (transitions, success / return, weights_version)
    reward_terms_dropped: tuple[str, ...] = ()
    ended_by: dict[str, int] = field(default_factory=dict)  # learning episodes, by how they ended
    missed_deadlines: int = 0  # real time: policy deadlines missed during learning episodes
    # Gradient updates per transition the learner managed (lockstep sim: paced to the asked ratio; real time: what
    # the learner's machine could do while the robot ran, lower than asked when it cannot keep up).
    utd_achieved: float | None = None
    calibrated: dict | None = None  # a calibrated start: its log's ticks, the fitted shift, the sim residual


def policy_task(policy: str | Path):
    """The task an exported policy was trained on (its contract's provenance)."""
    from robot_rl.policy.onnx_policy import read_contract
    from robot_rl.tasks.registry import make_task

    return make_task(read_contract(policy).provenance.task)


def load_base(policy: str | Path, spec, task):
    """The base policy, loaded as deploy loads it: against the task's commands and the robot's facts, with the
    observation (terms, scales, clips, history layout), the action decoding and any recurrent state from the file's
    own contract (an imported policy's are not the task's). The residual observes that observation and adds to
    that raw action; :class:`~robot_rl.control.controller.PolicyController.for_task` builds and decodes them."""
    from robot_rl.policy.contract import expected_for_task
    from robot_rl.policy.onnx_policy import load_policy, read_contract

    base = load_policy(policy, expected_for_task(read_contract(policy), spec, task))
    if base.contract.chunk is not None:  # the residual adds to one action per tick, not to an ensembled chunk
        raise ConfigError("--policy", str(policy), f"predicts action chunks ({base.contract.chunk.length} per tick):"
                          " residual fine-tuning needs a base with one action per observation (train-bc --chunk 1)")
    return base


def runs_in_task_env(contract, spec, task) -> bool:
    """Does a base with ``contract`` take the task's own observation and action (as the task's vectorized env,
    where a calibrated start trains, feeds them), with no recurrent state (the env's batches start from zero)?"""
    from robot_rl.policy.contract import PolicyContract
    from robot_rl.policy.contract_check import compare_contracts

    native = PolicyContract.expected_from(spec, task.actor_obs, task.commands, task.action)
    return contract.recurrent is None and not compare_contracts(contract, native)


def make_robot(spec, interface: Interface, shift: RealityShift | None, domain_id: int | None,
               network_interface: str | None, scene=None):
    if interface == "sim":
        from robot_rl.learn.residual.shifted_sim import ShiftedSimRobot

        # No shift: the nominal sim (an identity shift), which can also set a fallen robot back on its feet.
        return ShiftedSimRobot(spec, shift or RealityShift(), scene=scene)
    if interface == "unitree-dds":
        if shift is not None:
            raise ConfigError("--shift", "unitree-dds", "a shift applies to the in-process sim only")
        from robot_rl.hardware.unitree_dds import UnitreeDdsRobot

        return UnitreeDdsRobot(spec, domain_id, network_interface)
    raise ConfigError("--interface", interface, "expected 'sim' or 'unitree-dds'")


def _check_run_dir(run_dir: Path, resume: str | None) -> None:
    """A run writes its checkpoint, its buffer of robot transitions and its policies into ``run_dir``: an existing
    run there would be overwritten and its transitions lost, unless this run continues it (``--resume`` of it)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError("--run-dir", str(run_dir), "is a file, not a directory")
    if not run_dir.is_dir() or not any(run_dir.iterdir()):
        return
    if resume is not None:
        continued = Path(resume) if Path(resume).is_dir() else Path(resume).parent
        if continued.resolve() == run_dir.resolve():
            return
    raise ConfigError("--run-dir", str(run_dir), f"is not empty (a run there would lose its robot transitions): "
                      f"continue it with --resume {run_dir}, or give a new --run-dir")


def run_finetune(cfg: FinetuneCfg, *, export: bool = True, log: bool = True,
                 episode_length_s: float | None = None) -> FinetuneReport:
    """Fine-tune as ``cfg`` says; returns what happened (the command prints it). See the module docstring.
    ``export``: write the ONNX files; ``log``: print evaluations; ``episode_length_s``: episodes this long instead of
    the task's (tests)."""
    from robot_rl.control.controller import PolicyController
    from robot_rl.control.runtime import DeployRuntime
    from robot_rl.core.loop_timing import realtime_context
    from robot_rl.learn.residual.actor import ResidualPolicy
    from robot_rl.learn.residual.learner import ERROR_LOG, LearnerProcess
    from robot_rl.learn.residual.rewards import StateReward
    from robot_rl.robots.spec import load_robot

    run = cfg.run
    policy, robot, interface, transitions, seed = run.policy, run.robot, run.interface, run.transitions, run.seed
    resume, init_from, eval_every, realtime = run.resume, run.init_from, run.eval_every, run.realtime
    shift = parse_shift(run.shift)
    spec = load_robot(robot)
    task = policy_task(policy)
    cfg = cfg.for_task(task)  # the task's learning rate and sim residual where the settings leave them to it
    residual, sac, replay, calibrated = cfg.residual, cfg.sac, cfg.replay, cfg.calibrated
    if task.robot != spec.name:
        raise ConfigError("--robot", robot, f"the policy was trained for task {task.name!r} on {task.robot!r}")
    if task.terms.source is not None and interface != "sim":
        raise ConfigError("--interface", interface, f"task {task.name!r} resets its scene (the cube) every episode "
                          "and reads the cube's position from the simulator: fine-tuning it runs on the in-process "
                          "sim only (on hardware it needs a perception source and a person resetting the cube)")
    base = load_base(policy, spec, task)
    if calibrated is not None and not runs_in_task_env(base.contract, spec, task):
        raise ConfigError("--policy", policy, "its observation, action decoding or recurrent state is its own, not "
                          f"task {task.name!r}'s: a calibrated start trains its sim residual in the task's vectorized "
                          "env, which builds the task's observation; fine-tune it from scratch (no calibrated preset)")
    realtime = interface != "sim" if realtime is None else realtime
    if interface != "sim" and not realtime:
        raise ConfigError("realtime", "false", "a real robot (or the DDS bridge) runs in real time")
    if run.learner_threads < 1:
        raise ConfigError("learner_threads", str(run.learner_threads), "the learner needs at least one thread")
    try:  # before the learner starts: a refused setting leaves nothing running
        episode = EpisodeCfg(length_s=episode_length_s or task.episode_length_s, train_length_s=run.train_episode_s,
                             settle_s=0.5 if realtime else 0.0)
    except ValueError as exc:
        raise ConfigError("robot-rl finetune", "episode settings", str(exc)) from None
    if replay.prior_path is not None:
        from robot_rl.learn.residual.replay import ReplayBuffer

        try:
            ReplayBuffer.load(replay.prior_path, gamma=sac.gamma, n_step=replay.n_step)
        except (FileNotFoundError, ValueError) as exc:
            raise ConfigError("prior_path", replay.prior_path, str(exc)) from None
    for flag, where in (("--resume", resume), ("--init-from", init_from)):
        if where is not None and not (Path(where).is_file() or (Path(where) / "checkpoint.pt").is_file()):
            raise ConfigError(flag, where, "no checkpoint.pt there (give a run directory or its checkpoint.pt)")
    if resume is not None and init_from is not None:
        raise ConfigError("--init-from", init_from, "give --resume (continue a run) or --init-from (start from its "
                          "networks), not both")
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    run_dir = Path(run.run_dir) if run.run_dir is not None else Path("runs") / "residual" / task.name / stamp
    _check_run_dir(run_dir, resume)
    run_dir.mkdir(parents=True, exist_ok=True)

    if sac.reward_scale is None:  # task reward weights are per second; a step's reward is weight × period
        sac = dataclasses.replace(sac, reward_scale=1.0 / spec.timing.policy_period_s)
    j, obs_dim = base.contract.num_actions, base.contract.obs_dim
    learner_cfg = LearnerCfg(state_dim=residual.state_dim(obs_dim, j), action_dim=j, residual=residual, sac=sac,
                             replay=replay, run_dir=str(run_dir), resume_from=resume, init_from=init_from, seed=seed,
                             torch_threads=run.learner_threads)
    start = None
    if calibrated is not None:  # the robot's log → a calibrated sim → the residual trained there starts the learner
        from robot_rl.learn.residual.calibrated import calibrated_start

        start = calibrated_start(policy, task, spec, base, episode, learner_cfg, calibrated, run_dir, seed,
                                 lambda: make_robot(spec, interface, shift, run.domain_id, run.network_interface,
                                                    scene=initial_scene(task)), realtime=realtime, log=print if log
                                 else lambda _: None)
        learner_cfg = dataclasses.replace(learner_cfg, init_from=str(start.init_from))
        spec = start.spec  # its chain may now know the fitted motors (CalibratedStartCfg.chain)
    (run_dir / "config.json").write_text(json.dumps({  # after a calibrated start: the learner's start is known
        "policy": str(policy), "robot": robot, "interface": interface, "task": task.name, "transitions": transitions,
        "shift": None if shift is None else dataclasses.asdict(shift), "learner": dataclasses.asdict(learner_cfg),
        "realtime": realtime, "seed": seed, "settings": dataclasses.asdict(cfg)}, indent=2, default=str))
    learner = LearnerProcess(learner_cfg)
    learner.start()
    res_policy = ResidualPolicy(base, residual, learner.board, learner.status, explore=True, seed=seed)
    runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, res_policy))
    reward = StateReward(task, spec)
    device = _intervention(run.teleop, spec, task)
    rob = make_robot(spec, interface, shift, run.domain_id, run.network_interface, scene=initial_scene(task))
    loop = EpisodeLoop(runtime, rob, res_policy, reward, episode, realtime=realtime, write=learner.ring.write,
                       intervention=device)
    # A calibrated start's log took robot transitions too: they count against the budget.
    report = FinetuneReport(run_dir=run_dir, transitions=0 if start is None else start.transitions, episodes=0,
                            calibrated=None if start is None else start.summary())
    rng = np.random.default_rng(seed)
    evaluation_set = eval_setups(task, run.eval_episodes)
    progress = (run_dir / "progress.jsonl").open("a")

    def record(kind: str, data: dict) -> None:
        line = {"kind": kind, "transitions": report.transitions, "wall_s": time.monotonic() - started, **data}
        progress.write(json.dumps(line) + "\n")
        progress.flush()
        if kind == "eval":
            report.evaluations.append(line)
        if log and kind == "eval":
            print(f"[finetune] {report.transitions:>6} transitions: " +
                  ", ".join(f"{k} {v:.4g}" for k, v in line.items() if isinstance(v, float) and k != "wall_s"),
                  flush=True)

    best_flat: np.ndarray | None = None

    def evaluate_iterate() -> None:
        """Score the iterate the actor holds (no syncs meanwhile) and keep its weights if it is the best so far."""
        nonlocal best_flat
        with res_policy.holding_weights():
            score = evaluate(loop, evaluation_set)
        record("eval", score | {"weights_version": res_policy.weights_version})
        if report.best is None or selection_key(task, score) > selection_key(task, report.best):
            report.best = report.evaluations[-1]
            # version 0: no weights yet, the base alone was scored; a zero network is that residual (tanh(0) = 0)
            best_flat = res_policy.actor.flat.copy() if res_policy.weights_version else np.zeros_like(
                res_policy.actor.flat)

    started = time.monotonic()
    try:
        if not learner.wait_ready():
            log_file = run_dir / ERROR_LOG
            why = log_file.read_text().strip().splitlines()[-1] if log_file.is_file() else "no error log"
            raise RuntimeError(f"the learner did not start: {why} (full traceback: {log_file})")
        if not realtime:
            loop.pace = _pacer(learner, sac, stalled_s=max(5.0, residual.learner_timeout_s),
                               timeout_s=max(30.0, residual.learner_timeout_s))
        rob.connect()
        with realtime_context(fifo_priority=run.fifo_priority) if realtime else contextlib.nullcontext():
            next_eval = 0
            while report.transitions < transitions:
                if eval_every and report.transitions >= next_eval:
                    evaluate_iterate()
                    next_eval += eval_every
                setup = sample_setups(task, rng, 1)[0]  # push: a layout from the task's sampler, on rng's stream
                result = loop.run_episode(setup.command, explore=True, learn=True, scene=setup.scene)
                report.transitions += result.transitions
                report.episodes += 1
                report.ended_by[result.ended_by] = report.ended_by.get(result.ended_by, 0) + 1
                report.missed_deadlines += result.missed_deadlines
                record("episode", {"return": result.episode_return, "ended_by": result.ended_by,
                                   "interventions": result.interventions, "residual_off": result.residual_off_ticks,
                                   "learner_updates": learner.status.updates})
            learner.stop()
            final = np.zeros_like(res_policy.actor.flat)
            version = learner.board.poll(0, final)
            if version is None:
                raise RuntimeError("the learner left no complete weights behind")
            res_policy.detach(final, version)  # the learner is gone on purpose: keep its last residual on
            evaluate_iterate()
    finally:
        report.learner = learner.status.summary()
        trained_on = report.learner["received"] - sac.warmup_transitions
        if trained_on > 0:
            report.utd_achieved = report.learner["updates"] / trained_on
        learner.close()
        rob.close()
        progress.close()
    report.sync = res_policy.sync_summary()
    report.reward_terms_dropped = reward.dropped
    if export:
        from robot_rl.learn.residual.export import export_residual

        notes = {"transitions": report.transitions, "run_dir": str(run_dir)}
        report.exported = export_residual(policy, res_policy.actor.flat, residual, run_dir / "policy_residual.onnx",
                                          notes=notes)
        if best_flat is not None:
            picked = {"selected_at_transitions": report.best["transitions"],
                      "selected_by": "success, return" if task.terms.state_success else "return"}
            report.exported_best = export_residual(policy, best_flat, residual, run_dir / "policy_residual_best.onnx",
                                                   notes=notes | picked)
    return report


def _pacer(learner, sac: SACCfg, slack: int = 8, timeout_s: float = 30.0, stalled_s: float = 5.0):
    """Lockstep only: wait until the learner's updates match the update-to-data ratio (or it is gone).

    ``stalled_s``: a learner whose heartbeat is older is not waited for (at least the actor's own
    ``learner_timeout_s``: on a machine shared with other jobs a starved learner would otherwise fall behind
    for good, the actor switch the residual off, and the run measure the base).
    Call after the learner is ready: a resumed learner counts the transitions of the runs before this one."""
    status = learner.status
    before = int(status.cells[status.RECEIVED])

    def pace(written: int) -> None:
        target = sac.utd_ratio * (before + written - sac.warmup_transitions - slack)
        if status.updates >= target:
            return
        deadline = time.monotonic() + timeout_s
        while status.updates < target and time.monotonic() < deadline:
            if status.heartbeat_age() > stalled_s or status.state not in (status.STARTING, status.RUNNING):
                return  # a dead or stalled learner: carry on with the base (the actor switches itself)
            time.sleep(0.0005)

    return pace


def _intervention(teleop: str | None, spec, task):
    if teleop is None:
        return None
    from robot_rl.learn.residual.interventions import TeleopIntervention
    from robot_rl.teleop.arm_ik import ArmTeleopController
    from robot_rl.teleop.devices import open_device

    if spec.kind != "arm":
        raise ConfigError("--teleop", teleop, "interventions drive arm joints; a legged robot is steered by command")
    return TeleopIntervention(open_device(teleop), ArmTeleopController(spec, task))
