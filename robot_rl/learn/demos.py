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
  its names spell out the contract's observation layout (``robot_rl.tasks.task_observation``).
- ``observation.environment_state`` — cube position (base frame) and goal, for analysis.
- ``action`` — the label: the joint position action the expert chose for the tick's state, in the task's
  ``JointPositionAction`` space: ``(q_target − default) / scale`` before the safety chain (which then acts
  on a policy's output exactly as it acted on the teleop's).
- ``executed_action`` — the action actually sent: equal to ``action`` (the column stays for datasets recorded
  with DART noise on the executed action, since removed: ``benchmarks/results/RESULTS_bc_push.md``). Not
  named ``action.…``: LeRobot treats every feature whose name starts with ``action`` as a policy output, and
  would normalize and predict it. Datasets recorded before the rename call it ``action.executed``
  (:func:`executed_action` reads either).
- ``teleop.command`` — the expert's normalized device command.

Layouts: drawn independently per attempt by default, as the evaluation draws them; ``layouts="stratified"``
draws them as a Latin hypercube over the task's ranges instead (:func:`stratified_episodes`): with 50 demos,
independent draws can leave parts of the range thin (the widest push angles, where cloned policies failed
most), stratified ones cannot. Whether that shows in BC's success: ``benchmarks/results/RESULTS_bc_push.md``.

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
from robot_rl.core.validate import non_negative, positive
from robot_rl.hardware.sim_robot import SimRobot, SimulatorName
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.tasks import panda_push
from robot_rl.tasks.registry import make_task
from robot_rl.tasks.task import TaskCfg
from robot_rl.tasks.task_observation import TASK_TEXTS, TaskObservation, observation_names
from robot_rl.typed_yaml import ConfigError

if TYPE_CHECKING:
    from robot_rl.teleop.arm_ik import TeleopSource
    from robot_rl.teleop.recorder import EpisodeRecorder

TASK_TEXT = TASK_TEXTS[panda_push.NAME]  # the scripted expert knows this one task
EXECUTED_ACTION = "executed_action"  # the action sent to the robot; ``action`` is the expert's label
LEGACY_EXECUTED_ACTION = "action.executed"  # its name before LeRobot compatibility (see the module docstring)


def executed_action(episode: dict[str, np.ndarray]) -> np.ndarray:
    """An episode's executed actions (``LeRobotDataset.episode``), under the current name or the old one."""
    for key in (EXECUTED_ACTION, LEGACY_EXECUTED_ACTION):
        if key in episode:
            return episode[key]
    raise KeyError(f"the episode has no executed actions ({EXECUTED_ACTION!r}); it has {sorted(episode)}")


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
                    label = controller.last_raw_action
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
                   shift=None) -> EpisodeOutcome:
    """The scripted expert drives ``ArmTeleopController`` for one episode (recording into ``recorder``).

    ``shift``: a ``RealityShift`` — the expert on a shifted MuJoCo robot (the residual benchmarks' "real" one)
    instead of the nominal sim."""
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
    return run_push_episode(spec, task, episode, teleop, robot=robot, device=expert, recorder=recorder)


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


def collect_demos(task: str = "panda-push", episodes: int = 100, out_dir: str = "runs/demos/panda_push", seed: int = 0,
                  simulator: SimulatorName = "mujoco", max_attempts_factor: float = 3.0,
                  layouts: Literal["random", "stratified"] = "random",
                  progress: bool = True) -> DemoSummary:
    """Record ``episodes`` successful scripted-expert demos into a LeRobot v3 dataset at ``out_dir``
    (appending if it already holds demos with the same features), and a ``README.md`` saying how.

    Args:
        task: the task (the scripted expert knows panda-push).
        episodes: successful demos to write.
        out_dir: dataset directory.
        seed: layouts, the expert's style and its command noise.
        simulator: where the expert runs.
        max_attempts_factor: give up after this many attempts per demo asked for.
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
    non_negative(seed=seed)
    positive(max_attempts_factor=max_attempts_factor)
    cfg = make_task(task)
    spec = load_robot(cfg.robot)
    writer = LeRobotDatasetWriter(Path(out_dir), fps=round(1.0 / spec.timing.policy_period_s),
                                  features=demo_features(cfg, spec), robot_type=spec.name)
    recorder = EpisodeRecorder(writer, task=TASK_TEXT)
    rng = np.random.default_rng(seed)
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
            outcome = expert_episode(spec, cfg, episode, rng, simulator, recorder)
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
    write_dataset_card(Path(out_dir), summary, seed, simulator)
    return summary


def stratified_episodes(n: int, rng: np.random.Generator) -> list[panda_push.PushEpisode]:
    """``n`` layouts from the task's ranges as a Latin hypercube over (cube x, cube y, push angle, push
    distance): each range is cut into ``n`` equal strata and every stratum of every one is used once."""
    dims = len(panda_push.LAYOUT_RANGES)
    unit = (np.argsort(rng.random((dims, n)), axis=1) + rng.random((dims, n))) / n
    return [panda_push.layout_at(u) for u in unit.T]


def write_dataset_card(out_dir: Path, summary: DemoSummary, seed: int, simulator: str) -> None:
    """``README.md`` beside the dataset: how the demos were made and what the action columns mean."""
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
