"""The sim2sim gate: an exported policy must work, through the deploy runtime, in every simulator.

``robot-rl sim2sim --policy policies/a1_flat/policy.onnx`` loads the policy with
``DeployRuntime.load`` (contract checked against the task named in its provenance), and for each
simulator (MuJoCo and a second physics: PyBullet, or for a robot without a URDF MuJoCo's second
integrator/contact configuration ``mujoco-alt``) runs it in lockstep through ``run_loop`` — the same runtime,
safety chain and loop the robot uses — over the task kind's scripted scenario (:mod:`robot_rl.evaluation.scenarios`):
arm → ramp to the default pose → the command script, with pushes. Each simulator is scored against the
thresholds of :class:`~robot_rl.evaluation.gate_config.GateConfig`; the gate passes only when every
simulator passes every check. It writes ``report.md``, ``report.png`` and ``gate.json`` and prints a table.

Definitions (one policy tick = one row of the run's record, at loop time ``t`` since arming):

- **Scored ticks.** Ticks in mode ``running`` (the ramp is excluded), minus every tick with
  ``t_e <= t < t_e + settle_s`` for each event time ``t_e`` — the tick the policy took over, every tick on
  which the command differs from the previous tick's, every push — and minus every tick from the first
  fallen tick on.
- **Velocity tracking error**, per channel c ∈ {vx, vy, yaw rate}: ``e_c(t) = |command_c(t) − measured_c(t)|``
  over the scored ticks, where the command is the one the policy saw that tick (after the controller's
  clamp to the trained ranges), measured vx, vy are the base's linear velocity in the body frame as the
  simulator reports it (``RobotState.base_lin_vel``), and the measured yaw rate is the gyro's z component
  (``RobotState.base_ang_vel[2]``, body frame — the quantity the task's command and reward use). Reported:
  ``mean(e_c)`` and the 95th percentile (linear interpolation), over the whole run; and the mean within
  each scripted segment alone, of which the worst segment is checked (the whole-run mean is diluted by the
  standing segments, so a policy ignoring one command would pass it). No scored tick → NaN → fails.
- **Fall**: the first tick where the base height (world z of the base body) is below
  ``fall_height_fraction`` × the spec's ``sim_model.base_height``, or the tilt ``arccos(1 − 2(qx² + qy²))``
  of the measured orientation (``RobotState.base_quat``) exceeds ``fall_tilt_rad``, or the runtime is in
  ``damping`` (its safety chain latched a fault; the gate never stops a run itself). Height and tilt apply
  to floating-base robots.
- **Safety interventions**: the chain's intervention counters (all filters, faults excluded) from
  ``runtime.diagnostics()["safety"]`` divided by the chain's step count.
- **Timing**: wall time of each simulator's run (``run_loop`` in lockstep, plus setup: simulator and
  policy load), and the wall time inside ``runtime.step`` (observation, onnxruntime, safety chain) on each
  running tick, p50 / p99 / max. Garbage collection is paused during the run, as the real-time loop does.
- **Reach** (arms): the tool point (spec ``sim_model.end_effector_body``) in the base frame, by MuJoCo
  forward kinematics of the joint positions each simulator reported; per scripted target, its distance to
  the target at the segment's last tick (final) and its mean over the segment's scored ticks.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import shlex
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import tyro
from rich.console import Console
from rich.table import Table

from robot_rl.control.deploy_loop import run_loop
from robot_rl.control.runtime import DeployRuntime, StepResult
from robot_rl.core.types import JointCommand, RobotState
from robot_rl.core.validate import positive
from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.scenarios import Scenario, scenario_for
from robot_rl.evaluation.scoring import SimRun, SimScore, layouts_score, score_run, verdict
from robot_rl.hardware.sim_robot import SimRobot
from robot_rl.policy.contract import PolicyContract
from robot_rl.robots.spec import RobotSpec, load_robot

SIMULATORS = ("mujoco", "pybullet", "mujoco-alt")
Simulator = Literal["mujoco", "pybullet", "mujoco-alt"]


def default_simulators(spec: RobotSpec) -> tuple[str, str]:
    """MuJoCo and the robot's second physics: PyBullet where its model is a URDF (PyBullet reads no MJCF), else
    MuJoCo's second integrator/contact configuration (robot_rl.robots.mujoco_physics), as for the Go2 and G1."""
    return ("mujoco", "pybullet" if spec.sim_model.path.lower().endswith(".urdf") else "mujoco-alt")


class _TimedRuntime:
    """The runtime with a stopwatch around ``step``; everything else passes through to it.

    The stopwatch is this thread's CPU time, not wall time: the gate runs in lockstep on shared machines, where
    another process's preemption would otherwise land in the percentile and fail a policy for the machine's load.
    ONNX Runtime runs on the calling thread (one intra-op thread, ``robot_rl.policy.onnx_policy``), so the policy's
    inference is counted. Wall-clock deadlines are the real-time loop's, measured by the loop benchmarks."""

    def __init__(self, runtime: DeployRuntime, capacity: int):
        self._runtime = runtime
        self.compute_s = np.zeros(capacity)
        self._k = 0

    def step(self, state: RobotState, now: float, missed_deadlines: int = 0) -> StepResult:
        start = time.thread_time()
        result = self._runtime.step(state, now, missed_deadlines)
        if self._k < len(self.compute_s):
            self.compute_s[self._k] = time.thread_time() - start
        self._k += 1
        return result

    def __getattr__(self, name: str):
        return getattr(self._runtime, name)


class _StateProbe:
    """The simulated robot, keeping the gyro of every state the loop reads (the run record has none), and the
    scene's object with it when there is one."""

    def __init__(self, robot: SimRobot, capacity: int):
        self._robot = robot
        self.gyro = np.full((capacity, 3), np.nan)
        self.object_pos = np.full((capacity, 3), np.nan)
        self._k = 0

    def read(self) -> RobotState:
        state = self._robot.read()
        if self._k < len(self.gyro):
            self.gyro[self._k] = state.base_ang_vel
            found = self._robot.object_position()
            if found is not None:
                self.object_pos[self._k] = found
        self._k += 1
        return state

    def write(self, command: JointCommand) -> JointCommand:
        return self._robot.write(command)

    def __getattr__(self, name: str):
        return getattr(self._robot, name)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def tool_points(spec: RobotSpec, q: np.ndarray) -> np.ndarray:
    """(T, 3) tool point (the spec's end-effector body) in the base frame for joint positions (T, J), by
    MuJoCo forward kinematics of the spec's model."""
    import mujoco

    from robot_rl.robots.mujoco_model import build_mujoco_model

    if spec.sim_model.end_effector_body is None:
        raise ValueError(f"robot {spec.name!r} has no sim_model.end_effector_body: no tool point to score")
    model = build_mujoco_model(spec, floor=False)
    data = model.make_data()
    site, base = model.end_effector_site_id, model.base_body_id
    out = np.zeros((len(q), 3))
    for k, qk in enumerate(q):
        data.qpos[model.qpos_adr] = qk
        mujoco.mj_kinematics(model.model, data)
        rot = data.xmat[base].reshape(3, 3)
        out[k] = rot.T @ (data.site_xpos[site] - data.xpos[base])
    return out


def run_simulator(make_runtime: Callable[[], DeployRuntime], spec: RobotSpec, simulator: str,
                  scenario: Scenario, make_robot: Callable[[], SimRobot] | None = None) -> SimRun:
    """One lockstep run of ``scenario`` in ``simulator`` with a fresh runtime (``make_robot``: a robot other
    than the plain SimRobot, e.g. the robustness suite's perturbed one)."""
    start = time.perf_counter()
    capacity = round(scenario.total_s / spec.timing.policy_period_s) + 1
    timed = _TimedRuntime(make_runtime(), capacity)
    robot_in = make_robot() if make_robot is not None else SimRobot(spec, simulator, scene=scenario.scene)
    with robot_in as robot:
        timed.observe_objects(robot)  # an object-goal task's policy observes the scene's object
        probe = _StateProbe(robot, capacity)
        setup_s = time.perf_counter() - start
        with _gc_paused():
            record = run_loop(timed, probe, scenario.total_s, realtime=False,  # type: ignore[arg-type]
                              commands=scenario.command_steps(), pushes=scenario.loop_pushes())
    n = record.ticks
    tip = tool_points(spec, record.q) if scenario.tracks_tool_point else None
    objects = probe.object_pos[:n] if scenario.scene is not None else None
    return SimRun(simulator, record, probe.gyro[:n], timed.compute_s[:n], setup_s, tip, objects)


@dataclass
class GateResult:
    spec: RobotSpec
    task: str
    scenario: Scenario
    config: GateConfig
    scores: list[SimScore]
    runs: dict[str, SimRun]
    command: str  # the command line that reproduces this result
    policy: str | None = None
    contract: PolicyContract | None = None
    wall_s: float = 0.0

    @property
    def robot(self) -> str:
        return self.spec.name

    @property
    def passed(self) -> bool:
        return verdict(self.scores)


def evaluate(make_runtime: Callable[[], DeployRuntime], spec: RobotSpec, scenario: Scenario,
             simulators: Sequence[str], config: GateConfig, console: Console | None = None,
             ) -> tuple[list[SimScore], dict[str, SimRun]]:
    """Run and score every simulator. A run that raises fails its simulator (the error is reported)."""
    scores, runs = [], {}
    for simulator in simulators:
        if console is not None:
            console.print(f"[bold]{simulator}[/bold]: {scenario.total_s:g} s of '{scenario.name}' in lockstep …")
        try:
            run = run_simulator(make_runtime, spec, simulator, scenario)
        except Exception as exc:  # a gate reports a crashed simulator as a failure, it does not stop
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            scores.append(SimScore(simulator, error=text))
            if console is not None:
                console.print(f"  [red]run failed[/red]: {text}")
            continue
        runs[simulator] = run
        score = score_run(run, scenario, spec, config)
        if scenario.relayout is not None and config.object_goal_layouts > 1:
            score = over_layouts(score, make_runtime, spec, simulator, scenario, config)
        scores.append(score)
        if console is not None:
            t = score.timing
            console.print(f"  {t.simulated_s:.1f} s simulated in {t.wall_s:.2f} s ({t.realtime_factor:.0f}× real "
                          f"time), setup {t.setup_s:.2f} s — {'[green]PASS' if score.passed else '[red]FAIL'}")
    return scores, runs


def over_layouts(first: SimScore, make_runtime: Callable[[], DeployRuntime], spec: RobotSpec, simulator: str,
                 scenario: Scenario, config: GateConfig) -> SimScore:
    """An object-goal score over ``config.object_goal_layouts`` layouts: ``first`` (layout seed 0, the run the
    report plots) and a run for each further seed, combined by :func:`scoring.layouts_score`."""
    others = []
    for seed in range(1, config.object_goal_layouts):
        again = scenario.relayout(seed)
        try:
            others.append(score_run(run_simulator(make_runtime, spec, simulator, again), again, spec, config))
        except Exception as exc:  # scored as a layout off the goal, with an error
            others.append(SimScore(simulator, error="".join(traceback.format_exception_only(type(exc), exc))))
    return layouts_score(first, others, config)


def gate_spec(policy: str | Path, found: PolicyContract, robot: str | None) -> RobotSpec:
    """The spec the gate runs ``policy`` on: ``robot`` (a name, or a spec file — e.g. the one a policy was imported
    against with its own gains) or, by default, the shipped spec of the contract's robot. The spec must be the one
    the contract was written against (same robot name and spec hash); otherwise a one-line PolicyLoadError."""
    from robot_rl.policy.onnx_policy import PolicyLoadError

    spec = load_robot(robot or found.robot)  # ConfigError for an unknown name or a broken file
    if spec.name != found.robot:
        where = "" if robot == spec.name else f" ({robot})"
        raise PolicyLoadError(policy, f"it was exported for robot {found.robot!r}, not {spec.name!r}{where}")
    if spec.spec_hash != found.spec_hash:
        raise PolicyLoadError(policy, f"its contract was written against a {spec.name!r} spec with hash "
                                      f"{found.spec_hash}, {spec.source_file} has {spec.spec_hash}: give the spec file "
                                      "it was exported or imported against (--robot path/to/spec.yaml), or export "
                                      "it again for this one")
    return spec


def policy_gate(policy: str | Path, robot: str | None = None, simulators: Sequence[str] | None = None,
                config: GateConfig | None = None, time_scale: float = 1.0, command: str = "",
                console: Console | None = None) -> GateResult:
    """Load ``policy`` (contract checked) on the spec :func:`gate_spec` picks (``robot``: a name or a spec file),
    pick its task's scenario, run and score every simulator (default: :func:`default_simulators`)."""
    from robot_rl.policy.onnx_policy import PolicyLoadError, read_contract
    from robot_rl.tasks.registry import make_task

    started = time.perf_counter()
    if simulators is not None:
        unknown = [s for s in simulators if s not in SIMULATORS]
        if unknown or not simulators:
            raise ValueError(f"simulators must be a non-empty selection of {SIMULATORS}, got {tuple(simulators)}")
    found = read_contract(policy)  # PolicyLoadError for a missing or broken file
    if not found.provenance.task:
        raise PolicyLoadError(policy, "its contract names no training task (provenance.task): no scenario to run")
    spec = gate_spec(policy, found, robot)
    task = make_task(found.provenance.task)
    simulators = default_simulators(spec) if simulators is None else simulators
    spec_file = str(spec.source_file)  # the runtime loads this file, not the shipped spec of the same name
    DeployRuntime.load(spec_file, policy)  # refuse a contract mismatch before any simulator starts
    scenario = scenario_for(task.terms.gate, task.commands, spec, time_scale, task.terms.source, task.episode_length_s)
    config = config or GateConfig()
    scores, runs = evaluate(lambda: DeployRuntime.load(spec_file, policy), spec, scenario, simulators, config, console)
    return GateResult(spec, task.name, scenario, config, scores, runs, command, str(policy), found,
                      time.perf_counter() - started)


def print_summary(result: GateResult, console: Console) -> None:
    """One table: every check per simulator, then the verdict."""
    table = Table(title=f"sim2sim gate: {result.task} on {result.robot} — {result.scenario.total_s:g} s per simulator")
    table.add_column("check")
    table.add_column("limit", justify="right")
    for score in result.scores:
        table.add_column(score.simulator, justify="right")
    names: list[str] = []
    for score in result.scores:
        names += [c.name for c in score.checks if c.name not in names]
    for name in names:
        row, limit = [], ""
        for score in result.scores:
            check = next((c for c in score.checks if c.name == name), None)
            if check is None:
                row.append("—")
                continue
            limit = f"≤ {format_value(check.limit)} {check.unit}".strip()
            style = "green" if check.passed else "red"
            row.append(f"[{style}]{format_value(check.value)}[/{style}]")
        table.add_row(name, limit, *row)
    table.add_row("wall time (s)", "", *[f"{s.timing.wall_s + s.timing.setup_s:.2f}" if s.timing else "—"
                                         for s in result.scores])
    table.add_row("result", "", *["[green]PASS[/green]" if s.passed else f"[red]FAIL[/red] {s.error or ''}".strip()
                                  for s in result.scores])
    console.print(table)
    for score in result.scores:
        if score.fall.fell:
            console.print(f"{score.simulator}: fell at t = {score.fall.t_s:.2f} s ({score.fall.cause})")
    word = "[bold green]PASS[/bold green]" if result.passed else "[bold red]FAIL[/bold red]"
    console.print(f"verdict: {word}  (total {result.wall_s:.1f} s)")


def format_value(value: float) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"


def _no_nan(value):
    """JSON has no NaN: an unmeasured value becomes null."""
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def gate_summary(result: GateResult) -> dict:
    """Plain-types summary (``gate.json``): verdict, checks and timing per simulator."""
    return _no_nan({
        "passed": result.passed, "robot": result.robot, "task": result.task, "policy": result.policy,
        "command": result.command, "scenario": result.scenario.name, "config": asdict(result.config),
        "simulators": {
            s.simulator: {
                "passed": s.passed, "error": s.error,
                "checks": [{"name": c.name, "value": c.value, "limit": c.limit,
                            "unit": c.unit, "passed": c.passed, "note": c.note} for c in s.checks],
                "fall": asdict(s.fall), "interventions": s.interventions, "faults": s.faults,
                "timing": None if s.timing is None else asdict(s.timing),
            } for s in result.scores
        },
    })


def write_outputs(result: GateResult, out_dir: str | Path) -> list[Path]:
    """report.md, report.png and gate.json in ``out_dir``."""
    from robot_rl.evaluation.report import write_report

    out = Path(out_dir)
    paths = write_report(result, out)
    summary = out / "gate.json"
    summary.write_text(json.dumps(gate_summary(result), indent=2, allow_nan=False) + "\n")
    return [*paths, summary]


def _command_line(policy: str, robot: str | None, out_dir: str, simulators: Sequence[str], config: str | None,
                  time_scale: float, suite: str = "quick") -> str:
    parts = ["robot-rl", "sim2sim", "--policy", policy]
    parts += ["--robot", robot] if robot else []
    parts += ["--out-dir", out_dir] + (["--simulators", *simulators] if simulators else [])
    parts += ["--config", config] if config else []
    parts += ["--time-scale", f"{time_scale:g}"] if time_scale != 1.0 else []
    parts += ["--suite", suite] if suite != "quick" else []
    return shlex.join(parts)


def robustness_suite(policy: str, config: GateConfig, command: str, out_dir: str, console: Console,
                     robot: str | None = None) -> bool:
    """The robustness suite (``--suite full``) on 2 worker processes; writes ``robustness.md``; True: it passed."""
    import os

    from robot_rl.evaluation.robustness import run_suite
    from robot_rl.evaluation.robustness_report import write_suite

    console.print("[bold]robustness suite[/bold]: shoves, DR corners, contact settings, long walk …")
    result = run_suite(policy, config, workers=max(1, min(2, os.cpu_count() or 1)), robot=robot)
    path = write_suite(result, config, command, out_dir)
    failed = [r for r in result.results if not r.passed]
    for r in failed[:20]:
        c = r.condition
        console.print(f"  [red]FAIL[/red] {c.group}: {c.label} ({c.setting}) — {r.falls} falls in {r.runs} runs")
    if len(failed) > 20:
        console.print(f"  … and {len(failed) - 20} more")
    word = "[bold green]PASS[/bold green]" if result.passed else "[bold red]FAIL[/bold red]"
    console.print(f"robustness suite: {word}, {len(failed)} of {len(result.results)} conditions fail; {result.runs} "
                  f"runs in {result.wall_s:.0f} s — {path}")
    return result.passed


def sim2sim(
    policy: str,
    robot: str | None = None,
    out_dir: Annotated[str, tyro.conf.arg(aliases=("--out",))] = "reports/sim2sim",
    simulators: tuple[Simulator, ...] = (),
    config: str | None = None,
    time_scale: float = 1.0,
    suite: Literal["quick", "full"] = "quick",
) -> int:
    """Sim2sim gate: run an exported policy through the deploy runtime in MuJoCo and a second physics; 0 pass, 1 fail.

    Args:
        policy: the exported ONNX policy (its contract names the robot and the task).
        robot: the robot to run on, by name or spec file (default: the shipped spec of the contract's robot). A
            file is for a policy written against a spec other than the shipped one (an imported policy with its
            own gains, `import-policy --robot path/to/spec.yaml`); the policy is refused unless its contract
            names this robot and this spec's hash.
        out_dir: where report.md, report.png and gate.json go.
        simulators: which simulators to run, in order (default: MuJoCo and the robot's second physics: PyBullet
            for a URDF model, else mujoco-alt, MuJoCo's second integrator/contact configuration).
        config: YAML file overriding gate thresholds (see robot_rl/evaluation/gate_config.py).
        time_scale: stretch (> 1) or shrink (< 1) the scripted scenario; 1 is the gate's own.
        suite: quick: the gate's scripted run in each simulator (what `make demo` runs); full: that, then the
            robustness suite (shoves from 8 directions, the corners of the training randomization, both MuJoCo
            contact settings and PyBullet, a long walk; robot_rl/evaluation/robustness.py), ~5 min on 2 cores.
            The suite runs all its settings at its own script lengths (--simulators and --time-scale are the gate's).
    """
    positive(time_scale=time_scale)
    console = Console()
    gate_config = GateConfig.from_yaml(config) if config else GateConfig()
    command = _command_line(policy, robot, out_dir, simulators, config, time_scale, suite)
    result = policy_gate(policy, robot, simulators or None, gate_config, time_scale, command, console)
    print_summary(result, console)
    paths = write_outputs(result, out_dir)
    console.print("report: " + ", ".join(str(p) for p in paths))
    robust = robustness_suite(policy, gate_config, command, out_dir, console, robot) if suite == "full" else True
    return 0 if result.passed and robust else 1
