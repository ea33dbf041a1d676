"""Demonstrations for panda-push: the scripted expert drives arm teleop through the deploy runtime, and
the teleop ``EpisodeRecorder`` writes every running tick to a LeRobotDataset v3.0; and the evaluation of
cloned policies (and of the expert) by the same episode code.

One episode (:func:`run_push_episode`): a fresh ``SimRobot`` with the task's scene (table, cube at the
episode's start), a fresh ``DeployRuntime`` around the controller, the goal set as the task command,
arm → ramp to the default pose (not recorded) → ``episode_length_s`` of running ticks. Each tick, as in a
teleop session: poll the device (the expert) and hand its command to the ``ArmTeleopController`` and its
buttons to the recorder, ``runtime.step`` (controller → safety chain), write the command, and while the
recorder records, add the frame. Success: the cube within the task's radius of the goal at the end.

Recorded per running tick (:func:`demo_features`: the teleop recorder's usual features):

- ``observation.state`` — the task's actor observation of the tick's state, built by the same
  ``ObservationBuilder`` the policy controller uses (so it is exactly what a policy will be fed), float32;
  its names spell out the contract's observation layout.
- ``observation.environment_state`` — cube position (base frame) and goal, for analysis.
- ``action`` — the label: the joint position action the expert chose for the tick's state, in the task's
  ``JointPositionAction`` space: ``(q_target − default) / scale`` before the safety chain (which then acts
  on a policy's output exactly as it acted on the teleop's).
- ``action.executed`` — the action actually sent: equal to ``action``, except with demo noise
  (``DemoNoise``, DART: :mod:`robot_rl.learn.demo_noise`), where it is the label plus the perturbation.
- ``teleop.command`` — the expert's normalized device command.

Layouts: drawn independently per attempt by default, as the evaluation draws them; ``layouts="stratified"``
draws them as a Latin hypercube over the task's ranges instead (:func:`stratified_episodes`): with 50 demos,
independent draws can leave parts of the range thin (the widest push angles, where cloned policies failed
most), stratified ones cannot. Measured on panda-push over three demo seeds: 80 / 76 / 67 % BC success
against 68 / 69 / 78 % — a slightly higher mean, within the seed-to-seed spread
(``benchmarks/RESULTS_bc_push.md``).

Demos are recorded until ``episodes`` are written: the expert presses start on its first poll and stop +
success once done (``success_frame``); an episode it never stops is discarded and counts as a failure in
the expert's success rate (which is measured by the task's criterion).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from robot_rl.control.runtime import Controller, DeployRuntime
from robot_rl.control.state_machine import ControllerMode
from robot_rl.core.types import RobotState
from robot_rl.hardware.sim_robot import SimRobot, SimulatorName
from robot_rl.learn.demo_noise import DemoNoise, NoisyExecution, NoisyTeleop, expert_label
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.tasks import panda_push
from robot_rl.tasks.observations import ObservationBuilder, ObsInputs
from robot_rl.tasks.registry import make_task
from robot_rl.tasks.task import TaskCfg
from robot_rl.typed_yaml import ConfigError

if TYPE_CHECKING:
    from robot_rl.teleop.arm_ik import TeleopSource
    from robot_rl.teleop.recorder import EpisodeRecorder

TASK_TEXT = "push the red cube to the goal on the table"
NO_NOISE = DemoNoise()
EXECUTED_ACTION = "action.executed"  # the action sent to the robot; ``action`` is the expert's label


class TaskObservation:
    """The task's actor observation of one ``RobotState`` (N = 1), as the policy controller builds it."""

    def __init__(self, task: TaskCfg, spec: RobotSpec):
        j, c = spec.num_joints, task.commands.size
        self.builder = ObservationBuilder(task.actor_obs, 1, j, c, j, noise=False)
        self.dim = self.builder.dim
        self.default_q = spec.default_positions
        self.last_action = np.zeros((1, j))
        self.names = observation_names(task, spec)

    def reset(self) -> None:
        self.builder.reset()
        self.last_action.fill(0.0)

    def __call__(self, state: RobotState, command: np.ndarray, object_pos: np.ndarray | None = None) -> np.ndarray:
        """``object_pos``: the task's object with this state (its observation source; RobotState has none)."""
        inputs = ObsInputs(
            q=state.q[None], dq=state.dq[None], default_q=self.default_q, base_quat=state.base_quat[None],
            base_ang_vel=state.base_ang_vel[None], command=np.asarray(command, dtype=np.float64)[None],
            last_action=self.last_action,
            base_lin_vel=None if state.base_lin_vel is None else state.base_lin_vel[None],
            object_pos=None if object_pos is None else np.asarray(object_pos)[None],
        )
        return self.builder.compute(inputs)[0].copy()


def observation_names(task: TaskCfg, spec: RobotSpec) -> tuple[str, ...]:
    """One name per observation element, e.g. ``joint_pos_rel.panda_joint1``, ``command.goal_x``, in order."""
    j, c = spec.num_joints, task.commands.size
    per_term = {"joint_pos_rel": spec.joint_names, "joint_vel": spec.joint_names, "last_action": spec.joint_names,
                "command": task.commands.names, "object_pos": ("x", "y", "z"), "base_lin_vel": ("x", "y", "z"),
                "base_ang_vel": ("x", "y", "z"), "projected_gravity": ("x", "y", "z")}
    names: list[str] = []
    for term, size in zip(task.actor_obs.terms, task.actor_obs.term_sizes(j, c, j), strict=True):
        parts = per_term.get(term.name, tuple(str(i) for i in range(size)))
        for h in range(term.history_length):
            suffix = f"[t-{term.history_length - 1 - h}]" if term.history_length > 1 else ""
            names += [f"{term.name}{suffix}.{p}" for p in parts]
    return tuple(names)


@dataclass
class EpisodeOutcome:
    success: bool  # the task's criterion at the episode's end
    final_distance_m: float
    running_ticks: int
    faulted: bool  # the safety chain latched a fault
    saved: bool = False  # a recorder wrote the episode
    safety: dict = field(default_factory=dict)


def demo_features(task: TaskCfg, spec: RobotSpec) -> dict:
    """Dataset features of arm demos for ``task``: the teleop recorder's usual ones (observation.state =
    the task's actor observation, action, teleop.command) plus the cube and goal."""
    from robot_rl.data.lerobot_dataset import Feature
    from robot_rl.teleop.recorder import teleop_features

    env_names = ("cube_x", "cube_y", "cube_z", *task.commands.names)
    return teleop_features(observation_names(task, spec), spec.joint_names, extra={
        "observation.environment_state": Feature("float32", (len(env_names),), env_names),
        EXECUTED_ACTION: Feature("float32", (spec.num_joints,), tuple(spec.joint_names))})


def run_push_episode(
    spec: RobotSpec, task: TaskCfg, episode: panda_push.PushEpisode, controller: Controller, *,
    simulator: SimulatorName = "mujoco", robot: SimRobot | None = None, device: TeleopSource | None = None,
    recorder: EpisodeRecorder | None = None,
) -> EpisodeOutcome:
    """One lockstep episode through ``DeployRuntime`` (see the module docstring).

    ``device``: polled every tick, as a teleop session polls; its command goes to the controller
    (``set_teleop``) and its buttons to ``recorder``, which gets a frame on every running tick while it
    records. The episode ends after ``episode_length_s`` of running ticks, or once the recorder has closed
    the episode it opened; one still open then is discarded (the operator never pressed stop).
    """
    robot = robot if robot is not None else SimRobot(spec, simulator, scene=panda_push.push_scene(episode.cube_xy))
    observe = TaskObservation(task, spec)
    n_run = round(task.episode_length_s / spec.timing.policy_period_s)
    runtime = DeployRuntime(spec, controller)
    runtime.observe_objects(robot)  # the cube: the scene is the task's observation source
    runtime.set_command(episode.command)
    runtime.arm()
    running, faulted, opened = 0, False, False
    saved_before = len(recorder.saved) if recorder is not None else 0
    robot.connect()
    try:
        state, cube = robot.read(), robot.object_position()  # the cube as the state was read
        while running < n_run:
            command = device.poll() if device is not None else None
            if command is not None:
                controller.set_teleop(command)
                if recorder is not None:
                    recorder.handle(command.buttons)
                    opened |= recorder.recording
                    if opened and not recorder.recording:
                        break  # the operator closed the episode
            result = runtime.step(state, robot.sim_time())
            if result.mode is ControllerMode.DAMPING:
                faulted = True
                break
            robot.write(result.command)
            if result.mode is ControllerMode.RUNNING:
                if recorder is not None and recorder.recording:
                    env = np.concatenate([cube, controller.last_command]).astype(np.float32)
                    label = expert_label(controller)  # with demo noise: the clean action, not the sent one
                    recorder.add_frame({"observation.state": observe(state, controller.last_command, cube),
                                        "observation.environment_state": env,
                                        "action": np.asarray(label, dtype=np.float32),
                                        EXECUTED_ACTION: controller.last_raw_action.astype(np.float32)}, command)
                running += 1
            state, cube = robot.read(), robot.object_position()
        final = cube
    finally:
        robot.close()
    if recorder is not None and recorder.recording:
        recorder.discard()
    return EpisodeOutcome(
        success=panda_push.push_success(final, episode.goal_xy) and not faulted,
        final_distance_m=panda_push.goal_distance(final, episode.goal_xy), running_ticks=running, faulted=faulted,
        saved=recorder is not None and len(recorder.saved) > saved_before, safety=runtime.diagnostics()["safety"],
    )


def expert_episode(spec: RobotSpec, task: TaskCfg, episode: panda_push.PushEpisode, rng: np.random.Generator,
                   simulator: SimulatorName = "mujoco", recorder: EpisodeRecorder | None = None,
                   noise: DemoNoise = NO_NOISE, noise_rng: np.random.Generator | None = None,
                   shift=None) -> EpisodeOutcome:
    """The scripted expert drives ``ArmTeleopController`` for one episode (recording into ``recorder``).

    ``noise`` (off by default): the executed action is perturbed while the expert is still working on the
    cube (not once it is done and going home), drawn from ``noise_rng``; the recorded label stays the
    expert's clean action (DART, :mod:`robot_rl.learn.demo_noise`). ``shift``: a ``RealityShift`` — the expert
    on a shifted MuJoCo robot (the residual benchmarks' "real" one) instead of the nominal sim."""
    from robot_rl.teleop.arm_ik import ArmTeleopController
    from robot_rl.teleop.scripted_expert import ScriptedPushExpert

    teleop = ArmTeleopController(spec, task)
    scene = panda_push.push_scene(episode.cube_xy)
    if shift is not None:
        from robot_rl.learn.residual.shifted_sim import ShiftedSimRobot

        if simulator != "mujoco":
            raise ValueError(f"a shifted robot is a MuJoCo one, not {simulator}")
        robot = ShiftedSimRobot(spec, shift, scene=scene)
    else:
        robot = SimRobot(spec, simulator, scene=scene)
    expert = ScriptedPushExpert(spec, robot, episode.goal_xy, rng, kinematics=teleop.ik.kin)
    controller: Controller = teleop
    if noise.enabled:
        if noise_rng is None:
            raise ValueError("expert_episode: demo noise needs its own noise_rng (seeded by the caller)")

        def working() -> bool:
            return expert.zone not in ("retreat", "home")

        if noise.twist_std > 0:
            controller = NoisyTeleop(teleop, spec, noise, noise_rng, clean_command=lambda: expert.clean_command,
                                     active=working)
        if noise.joint_std > 0:
            controller = NoisyExecution(controller, spec, task, noise, noise_rng, active=working)
    return run_push_episode(spec, task, episode, controller, robot=robot, device=expert, recorder=recorder)


@dataclass(frozen=True)
class DemoSummary:
    out_dir: str
    written: int  # demos in the dataset (expert episodes that succeeded and were stopped by the expert)
    attempts: int
    expert_successes: int  # attempts that met the task's success criterion
    frames: int

    @property
    def expert_success_rate(self) -> float:
        return self.expert_successes / max(self.attempts, 1)


def collect_demos(task: str = "panda-push", episodes: int = 50, out_dir: str = "runs/demos/panda_push", seed: int = 0,
                  simulator: SimulatorName = "mujoco", max_attempts_factor: float = 3.0,
                  noise: DemoNoise = NO_NOISE, layouts: Literal["random", "stratified"] = "random",
                  progress: bool = True) -> DemoSummary:
    """Record ``episodes`` successful scripted-expert demos into a LeRobot v3 dataset at ``out_dir``
    (appending if it already holds demos with the same features), and a ``README.md`` saying how.

    Args:
        task: the task (the scripted expert knows panda-push).
        episodes: successful demos to write.
        out_dir: dataset directory.
        seed: layouts, the expert's style and its command noise; demo noise draws from its own stream.
        simulator: where the expert runs.
        max_attempts_factor: give up after this many attempts per demo asked for.
        noise: DART noise on the executed action (off by default; ``action`` stays the expert's label,
            ``action.executed`` records what was sent).
        layouts: "random": each attempt's layout drawn independently (as the evaluation draws them);
            "stratified": Latin hypercube blocks of ``episodes`` layouts (:func:`stratified_episodes`), so
            few demos still cover every part of the layout space, the edges of the push angles included.
        progress: show a progress bar.
    """
    from robot_rl.data.lerobot_dataset import LeRobotDatasetWriter
    from robot_rl.teleop.recorder import EpisodeRecorder

    if task != panda_push.NAME:
        raise ConfigError("robot-rl collect-demos", "--task", f"the scripted expert knows task {panda_push.NAME!r} "
                          f"only, got {task!r}")
    if episodes < 1:
        raise ConfigError("robot-rl collect-demos", "--episodes", f"must be ≥ 1, got {episodes}")
    cfg = make_task(task)
    spec = load_robot(cfg.robot)
    writer = LeRobotDatasetWriter(Path(out_dir), fps=round(1.0 / spec.timing.policy_period_s),
                                  features=demo_features(cfg, spec), robot_type=spec.name)
    recorder = EpisodeRecorder(writer, task=TASK_TEXT)
    rng = np.random.default_rng(seed)
    noise_rng = np.random.default_rng([seed, 2])  # its own stream: turning noise on leaves the layouts as they were
    layout_rng = np.random.default_rng([seed, 3])
    planned: list[panda_push.PushEpisode] = []
    max_attempts = max(episodes, int(np.ceil(episodes * max_attempts_factor)))
    attempts = successes = written = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=episodes, desc="demos", unit="ep")
    try:
        while written < episodes and attempts < max_attempts:
            if layouts == "stratified":
                planned = planned or stratified_episodes(episodes, layout_rng)
                episode = planned.pop()
            else:
                episode = panda_push.sample_episode(rng)
            outcome = expert_episode(spec, cfg, episode, rng, simulator, recorder,
                                     noise=noise, noise_rng=noise_rng)
            attempts += 1
            successes += outcome.success
            if outcome.saved and not outcome.success:
                raise RuntimeError("the expert stopped an unsuccessful episode")  # would poison the dataset
            written += outcome.saved
            if bar is not None:
                bar.update(int(outcome.saved))
                bar.set_postfix(expert_success=f"{successes / attempts:.0%}")
    finally:
        if bar is not None:
            bar.close()
    summary = DemoSummary(str(out_dir), written, attempts, successes, writer.total_frames)
    write_dataset_card(Path(out_dir), summary, seed, simulator, noise)
    return summary


def stratified_episodes(n: int, rng: np.random.Generator) -> list[panda_push.PushEpisode]:
    """``n`` layouts from the task's ranges as a Latin hypercube over (cube x, cube y, push angle, push
    distance): each range is cut into ``n`` equal strata and every stratum of every one is used once."""
    dims = len(panda_push.LAYOUT_RANGES)
    unit = (np.argsort(rng.random((dims, n)), axis=1) + rng.random((dims, n))) / n
    return [panda_push.layout_at(u) for u in unit.T]


def write_dataset_card(out_dir: Path, summary: DemoSummary, seed: int, simulator: str, noise: DemoNoise) -> None:
    """``README.md`` beside the dataset: how the demos were made and what the action columns mean."""
    if noise.enabled:
        how = (f"DART noise injection (`robot_rl.learn.demo_noise`): the robot executed the expert's action "
               f"plus Ornstein–Uhlenbeck noise ({noise.describe()}) while the expert worked on the cube (faded "
               f"out over {noise.fade_s:g} s once it was done). `action` is the expert's clean action for the "
               f"state visited (the label); `{EXECUTED_ACTION}` is the perturbed action that was sent.")
    else:
        how = f"No noise injection: `{EXECUTED_ACTION}` equals `action`, the action the expert sent."
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir.joinpath("README.md").write_text(
        f"# panda-push scripted demos\n\nTask: {TASK_TEXT}. The scripted expert "
        f"(`robot_rl.teleop.scripted_expert`) drove arm teleop through the deploy runtime in {simulator} "
        f"(`robot_rl.learn.demos.collect_demos`, seed {seed}).\n\n"
        f"Demos written in this run: {summary.written} from {summary.attempts} attempts "
        f"({summary.expert_successes} met the task's success criterion); the dataset holds "
        f"{summary.frames} frames.\n\n"
        f"- `observation.state`: the task's actor observation (the policy's input).\n"
        f"- `action`: the label, the expert's joint position action `(q_target − default) / scale`.\n"
        f"- `{EXECUTED_ACTION}`: the action sent to the robot.\n"
        f"- `observation.environment_state`: cube position and goal (base frame), for analysis.\n"
        f"- `teleop.command`: the expert's normalized teleop command.\n\n{how}\n")


@dataclass(frozen=True)
class PushEvaluation:
    """A policy's push episodes through the deploy runtime."""

    simulator: str
    episodes: int
    successes: int
    mean_final_distance_m: float
    faults: int  # episodes that ended with the safety chain latched
    safety_interventions: int  # summed over episodes, every filter
    wall_s: float

    @property
    def success_rate(self) -> float:
        return self.successes / max(self.episodes, 1)


def evaluate_expert(task: str = "panda-push", episodes: int = 50, seed: int = 10_000,
                    simulator: SimulatorName = "mujoco", progress: bool = False, shift=None) -> PushEvaluation:
    """The scripted expert on the same layouts :func:`evaluate_push_policy` draws from ``seed`` (its own
    noise from another stream), through the same runtime: the baseline a cloned policy is compared to.
    ``shift``: on a shifted MuJoCo robot (a ``RealityShift``), e.g. the residual benchmark's "real" one."""
    import time

    cfg = make_task(task)
    spec = load_robot(cfg.robot)
    layouts, noise = np.random.default_rng(seed), np.random.default_rng([seed, 1])
    start = time.perf_counter()
    outcomes = []
    episodes_iter = range(episodes)
    if progress:
        from tqdm import tqdm

        episodes_iter = tqdm(episodes_iter, desc=f"expert {simulator}", unit="ep")
    for _ in episodes_iter:
        outcomes.append(expert_episode(spec, cfg, panda_push.sample_episode(layouts), noise, simulator, shift=shift))
    return _summary(simulator, outcomes, time.perf_counter() - start)


def _summary(simulator: str, outcomes: list[EpisodeOutcome], wall_s: float) -> PushEvaluation:
    return PushEvaluation(
        simulator, len(outcomes), sum(o.success for o in outcomes),
        float(np.mean([o.final_distance_m for o in outcomes])) if outcomes else float("nan"),
        sum(o.faulted for o in outcomes), sum(sum(o.safety.get("interventions", {}).values()) for o in outcomes),
        wall_s)


def evaluate_push_policy(policy: str, task: str = "panda-push", episodes: int = 50, seed: int = 10_000,
                         simulator: SimulatorName = "mujoco", progress: bool = False) -> PushEvaluation:
    """Run an exported policy (loaded with its contract checked against ``task``) for ``episodes`` fresh
    layouts drawn from ``seed``, each through ``DeployRuntime`` exactly as :func:`collect_demos` ran the expert."""
    import time

    from robot_rl.control.controller import PolicyController
    from robot_rl.policy.contract import contract_for_task
    from robot_rl.policy.onnx_policy import load_policy

    cfg = make_task(task)
    spec = load_robot(cfg.robot)
    controller = PolicyController.for_task(cfg, spec, load_policy(policy, contract_for_task(cfg, spec)))
    layouts = np.random.default_rng(seed)
    start = time.perf_counter()
    episodes_iter = range(episodes)
    if progress:
        from tqdm import tqdm

        episodes_iter = tqdm(episodes_iter, desc=f"policy {simulator}", unit="ep")
    outcomes = [run_push_episode(spec, cfg, panda_push.sample_episode(layouts), controller, simulator=simulator)
                for _ in episodes_iter]
    return _summary(simulator, outcomes, time.perf_counter() - start)
