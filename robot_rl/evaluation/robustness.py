"""The sim2sim robustness suite (``robot-rl sim2sim --suite full``): the gate's single scripted run hides
fragility, so this runs a policy through the deploy runtime under many conditions and counts what breaks.

Settings: MuJoCo with the gate's stiff contact (elliptic cone, impratio 100), MuJoCo with the training env's
contact (pyramidal, impratio 1) and PyBullet. Conditions, all built from the task's own data:

- **nominal**: the gate's scenario; seed 0 as scripted, seeds 1.. with its shoves from random horizontal
  directions (same magnitudes). Its mean tracking error over the seeds is the reference of the tracking
  ratios. Every setting.
- **shove** (floating base): 8 horizontal directions × 2 magnitudes (half and all of the task's
  ``push_max_vel_m_s``) × standing / walking, each over ``SUITE_SEEDS`` seeds (the direction jittered
  within its 45° sector, the shove's time within half a second: another gait phase). Every setting.
- **DR corner**: each randomized quantity at each end of its training range, one at a time (payload, COM
  offset ±x / ±y, link masses, friction, kp, kd, motor strength; latency at its maximum; the training
  observation noise), then the **worst case**: per quantity the corner that did worst, all at once. Each
  over the nominal condition's seeds and scripts (seed s runs nominal seed s's scenario), in both MuJoCo
  contacts (PyBullet takes no model terms). One run is not a measurement of a corner: a walking policy's
  tracking error moves by up to 25 % between runs that differ by a 0.01 % gain change (its gait or turn
  settles into another mode), so a ratio of two single runs fails a robust policy at random
  (benchmarks/results/RESULTS_robustness.md, session 19). The ratio compares means over the same scripts.
- **steps** (tasks whose terrain has obstacles): a walk over fixed boxes up to the terrain's highest block.
- **long walk** (velocity tasks): 20 s straight ahead. Every setting.

A condition passes when its runs have at most ``max_falls`` falls in all, every run's safety interventions
per tick ≤ ``max_intervention_rate``, and — where it applies — tracking ratio ≥ ``robust_tracking_ratio_min``
(DR corners; nominal mean error / condition mean error) or the gate's tracking checks (nominal, long walk,
steps). Tracking error of a velocity run:
the sum of the mean vx, vy and yaw-rate errors (scored ticks, as the gate defines them); of a reach run, the
mean tool-point error over its targets. Runs go to ``workers`` processes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

import numpy as np

from robot_rl.control.deploy_loop import Push
from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.perturbed_robot import NoisyRuntime, Perturbation, PerturbedSimRobot
from robot_rl.evaluation.scenarios import Scenario, Segment, random_targets, rotated_pushes, scenario_for, steps_scene

SUITE_SEEDS = 10
SHOVE_DIRECTIONS = 8
WALK_SPEED_M_S = 0.5  # forward command of the walking shoves, the long walk and the steps (clamped to the task)
LONG_WALK_S = 20.0
# (setting, simulator, MuJoCo contact)
SETTINGS = {"mujoco": ("mujoco", "gate"), "mujoco training contact": ("mujoco", "training"),
            "pybullet": ("pybullet", "gate"), "mujoco-alt": ("mujoco-alt", "gate")}
TIMING_CHECK = "runtime.step p99"  # shared machines: the suite reports, never fails on, step time


@dataclass(frozen=True)
class Condition:
    group: str  # nominal | shove | DR corner | worst case | steps | long walk
    label: str
    setting: str  # a key of SETTINGS
    seeds: int = 1
    perturbation: Perturbation = dataclasses.field(default_factory=Perturbation)
    quantity: str = ""  # DR corners: which randomized quantity (the worst case picks one corner of each)
    shove_m_s: float = 0.0
    shove_dir_rad: float = 0.0
    walking: bool = False
    step_height_m: float = 0.0
    ratio: bool = False  # checked: tracking ratio to nominal
    gate_tracking: bool = False  # checked: the gate's own tracking checks

    @property
    def key(self) -> tuple[str, str, str]:
        return self.group, self.label, self.setting


@dataclass(frozen=True)
class RunOutcome:
    fell: bool
    tracking_error: float  # NaN: nothing scored
    intervention_rate: float
    gate_tracking_passed: bool
    wall_s: float
    error: str | None = None


@dataclass(frozen=True)
class ConditionResult:
    condition: Condition
    runs: int
    falls: int
    ratio: float  # nominal mean / condition mean tracking error over the same scripts; NaN where not measured
    intervention_rate: float  # worst run
    gate_tracking_failures: int
    errors: int
    passed: bool
    tracking_errors: tuple[float, ...] = ()  # each run's, in seed order

    @property
    def mean_error(self) -> float:
        """Mean tracking error over the runs: the ratio's denominator (NaN when a run scored none)."""
        return mean_of(self.tracking_errors)


# ---------------------------------------------------------------------------------------------------------
# Conditions


def _corner_pairs(rand, floating: bool) -> list[tuple[str, str, dict]]:
    """(quantity, label, Perturbation fields) of every end of every randomized range of ``rand``."""
    out: list[tuple[str, str, dict]] = []
    scalar = (("friction_scale", "friction", "friction_scale"), ("link_mass_scale", "link masses", "link_mass_scale"),
              ("kp_scale", "kp", "kp_scale"), ("kd_scale", "kd", "kd_scale"),
              ("motor_strength", "motor strength", "motor_strength"))
    if floating and rand.base_mass_add_kg is not None:
        for v in rand.base_mass_add_kg:
            out.append(("payload", f"payload {v:+g} kg", {"payload_kg": float(v)}))
    if floating and rand.com_offset_m > 0:
        c = rand.com_offset_m
        for label, off in (("+x", (c, 0, 0)), ("-x", (-c, 0, 0)), ("+y", (0, c, 0)), ("-y", (0, -c, 0))):
            out.append(("com", f"COM {label} {100 * c:g} cm", {"com_offset_m": tuple(float(o) for o in off)}))
    for key, name, field_name in scalar:
        r = getattr(rand, key)
        if r is not None and r[0] != r[1]:
            for v in r:
                out.append((key, f"{name} ×{v:g}", {field_name: float(v)}))
    if rand.action_latency_steps[1] > 0:
        out.append(("latency", f"latency {rand.action_latency_steps[1]} steps",
                    {"latency_steps": int(rand.action_latency_steps[1])}))
    if rand.observation_noise:
        out.append(("noise", "observation noise", {"obs_noise": True}))
    return out


def claimed_step_height(task) -> float:
    """The highest block the task's terrain trains on (0: no obstacles, a flat task)."""
    terrain = task.terrain
    return float(terrain.max_obstacle_m) if terrain is not None and "obstacles" in terrain.kinds else 0.0


def suite_settings(spec) -> tuple[str, ...]:
    """The suite's settings for ``spec``: MuJoCo in both contacts and the gate's second physics for this robot
    (PyBullet for a URDF model, else mujoco-alt)."""
    from robot_rl.evaluation.sim2sim import default_simulators  # sim2sim runs the suite: import when called

    return ("mujoco", "mujoco training contact", default_simulators(spec)[1])


def suite_conditions(task, spec, seeds: int = SUITE_SEEDS) -> list[Condition]:
    """Every condition of the suite for ``task`` (the worst case is added after the corners ran)."""
    gate = task.terms.gate
    if gate not in ("velocity_tracking", "reach"):
        raise ValueError(f"no robustness suite for gate {gate!r} (velocity_tracking and reach tasks only)")
    floating = spec.sim_model.floating_base
    settings = suite_settings(spec)
    label = "gate scenario" + (", random shove directions" if floating else ", random targets")
    out = [Condition("nominal", label, s, seeds, Perturbation(contact=SETTINGS[s][1]), gate_tracking=True)
           for s in settings]
    for setting in settings:
        contact = SETTINGS[setting][1]
        if SETTINGS[setting][0] != "mujoco":
            continue
        for quantity, label, fields in _corner_pairs(task.randomization, floating):
            p = Perturbation(contact=contact, **fields)
            out.append(Condition("DR corner", label, setting, seeds, p, quantity, ratio=True))
    if gate != "velocity_tracking":
        return out
    push = task.randomization.push_max_vel_m_s
    for setting in settings:
        contact = SETTINGS[setting][1]
        for walking in (False, True):
            for mag in (0.5 * push, push) if push > 0 else ():
                for k in range(SHOVE_DIRECTIONS):
                    angle = 2 * math.pi * k / SHOVE_DIRECTIONS
                    out.append(Condition("shove", f"{mag:g} m/s from {math.degrees(angle):.0f}°, "
                                         f"{'walking' if walking else 'standing'}", setting, seeds,
                                         Perturbation(contact=contact), shove_m_s=mag, shove_dir_rad=angle,
                                         walking=walking))
        out.append(Condition("long walk", f"{LONG_WALK_S:g} s straight at {WALK_SPEED_M_S:g} m/s", setting,
                             perturbation=Perturbation(contact=contact), gate_tracking=True))
        height = claimed_step_height(task)
        if height > 0:
            out.append(Condition("steps", f"random steps up to {100 * height:g} cm", setting, seeds,
                                 Perturbation(contact=contact), step_height_m=height, gate_tracking=True))
    return out


def worst_case(corners: list[ConditionResult], setting: str) -> Condition | None:
    """Every quantity at its worse corner (more falls, then the lower tracking ratio) in ``setting``."""
    picks: dict[str, tuple[Condition, tuple[int, float]]] = {}
    for r in corners:
        c = r.condition
        if c.group != "DR corner" or c.setting != setting:
            continue
        score = (r.falls + r.errors, -(r.ratio if not math.isnan(r.ratio) else 0.0))
        if c.quantity not in picks or score > picks[c.quantity][1]:
            picks[c.quantity] = (c, score)
    if not picks:
        return None
    fields: dict = {"contact": SETTINGS[setting][1]}
    for c, _ in picks.values():
        fields.update({f.name: getattr(c.perturbation, f.name) for f in dataclasses.fields(Perturbation)
                       if f.name != "contact" and getattr(c.perturbation, f.name) != getattr(Perturbation(), f.name)})
    labels = [c.label for c, _ in picks.values()]
    seeds = max(c.seeds for c, _ in picks.values())
    return Condition("worst case", " + ".join(labels), setting, seeds, Perturbation(**fields), ratio=True)


# ---------------------------------------------------------------------------------------------------------
# Scenarios


def condition_scenario(c: Condition, seed: int, task, spec) -> Scenario:
    lead_in = spec.safety.ramp_duration_s
    rng = np.random.default_rng([seed, 21])
    names = task.commands.names

    def command(vx: float) -> tuple[float, ...]:
        return tuple(float(v) for v in task.commands.clip(np.array([vx if n == "lin_vel_x" else 0.0 for n in names])))

    if c.group in ("nominal", "DR corner", "worst case"):  # the same script for the same seed: ratios compare them
        gate = scenario_for(task.terms.gate, task.commands, spec)
        if seed == 0:
            return gate
        if gate.gate == "reach":
            return random_targets(task.commands, lead_in, rng)
        return dataclasses.replace(gate, pushes=rotated_pushes(gate.pushes, rng))
    if c.group == "shove":
        a = c.shove_dir_rad + rng.uniform(-math.pi, math.pi) / SHOVE_DIRECTIONS
        t = 1.5 + rng.uniform(0.0, 0.5)
        seg = Segment("walk" if c.walking else "stand", 0.0, 5.0, command(WALK_SPEED_M_S if c.walking else 0.0))
        push = Push(t, (c.shove_m_s * math.cos(a), c.shove_m_s * math.sin(a), 0.0))
        return Scenario("shove", "velocity_tracking", names, (seg,), (push,), lead_in)
    if c.group == "long walk":
        seg = Segment("straight walk", 0.0, LONG_WALK_S, command(WALK_SPEED_M_S))
        return Scenario("long walk", "velocity_tracking", names, (seg,), (), lead_in)
    if c.group == "steps":
        seg = Segment("walk over steps", 0.0, 10.0, command(WALK_SPEED_M_S))
        return Scenario("steps", "velocity_tracking", names, (seg,), (), lead_in,
                        scene=steps_scene(c.step_height_m, rng))
    raise ValueError(f"unknown condition group {c.group!r}")


# ---------------------------------------------------------------------------------------------------------
# Running


def tracking_error(score) -> float:
    if score.reach:
        return float(np.mean([r.mean_m for r in score.reach]))
    return float(sum(score.tracking[ch].mean for ch in ("vx", "vy", "yaw_rate")))


@functools.cache
def _loaded(policy: str, robot: str | None = None):
    """(task, spec, policy) of ``policy`` on ``robot`` (a spec name or file; default: the contract's robot), once
    per process: reading the robot's YAML and opening the ONNX
    session cost more than a short run. Runs in sequence share it: each run gets a fresh controller and
    runtime (the observation history), and the controller zeroes a recurrent policy's state at every arm, so
    no run starts from another's memory."""
    from robot_rl.policy.contract import expected_for_task
    from robot_rl.policy.onnx_policy import load_policy, read_contract
    from robot_rl.robots.spec import load_robot
    from robot_rl.tasks.registry import make_task

    found = read_contract(policy)
    task, spec = make_task(found.provenance.task), load_robot(robot or found.robot)
    return task, spec, load_policy(policy, expected_for_task(found, spec, task))  # an imported policy's own


def run_condition(policy: str, c: Condition, seed: int, config: GateConfig, robot: str | None = None) -> RunOutcome:
    """One run of ``c`` with ``seed`` through the deploy runtime (``robot``: as for :func:`_loaded`); a crash is an
    outcome, not an exception."""
    from robot_rl.control.controller import PolicyController
    from robot_rl.control.runtime import DeployRuntime
    from robot_rl.evaluation.scoring import score_run
    from robot_rl.evaluation.sim2sim import run_simulator

    start = time.perf_counter()
    try:
        task, spec, onnx = _loaded(str(policy), robot)
        scenario = condition_scenario(c, seed, task, spec)
        simulator = SETTINGS[c.setting][0]

        def make_runtime():
            runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, onnx))
            return NoisyRuntime.for_task(runtime, task, seed) if c.perturbation.obs_noise else runtime

        run = run_simulator(make_runtime, spec, simulator, scenario,
                            lambda: PerturbedSimRobot(spec, simulator, c.perturbation, scene=scenario.scene))
        score = score_run(run, scenario, spec, config)
        gate_ok = all(ch.passed for ch in score.checks if ch.name not in (TIMING_CHECK, "falls")
                      and "interventions" not in ch.name)
        return RunOutcome(score.fall.fell, tracking_error(score), score.intervention_rate, gate_ok,
                          time.perf_counter() - start)
    except Exception as exc:  # reported per condition, like the gate reports a crashed simulator
        return RunOutcome(True, math.nan, math.nan, False, time.perf_counter() - start, f"{type(exc).__name__}: {exc}")


def _job(args: tuple[str, Condition, int, GateConfig, str | None]) -> RunOutcome:
    return run_condition(*args)


def _run_all(policy: str, conditions: list[Condition], config: GateConfig, pool: ProcessPoolExecutor | None,
             robot: str | None = None) -> dict[tuple, list[RunOutcome]]:
    jobs = [(policy, c, s, config, robot) for c in conditions for s in range(c.seeds)]
    outcomes = pool.map(_job, jobs, chunksize=4) if pool is not None else map(_job, jobs)
    grouped: dict[tuple, list[RunOutcome]] = {c.key: [] for c in conditions}
    for (_, c, _, _, _), outcome in zip(jobs, outcomes, strict=True):
        grouped[c.key].append(outcome)
    return grouped


def mean_of(errors: Iterable[float]) -> float:
    """Mean of the runs' tracking errors (NaN when any run scored nothing: a ratio over part of the scripts would
    compare different scripts)."""
    errors = list(errors)
    return float(np.mean(errors)) if errors and not any(math.isnan(e) for e in errors) else math.nan


def mean_tracking_error(runs: list[RunOutcome]) -> float:
    return mean_of(r.tracking_error for r in runs)


def summarize(c: Condition, runs: list[RunOutcome], nominal_error: float, config: GateConfig) -> ConditionResult:
    """``nominal_error``: the nominal condition's mean tracking error in the same setting, over the same
    seeds' scripts as ``runs`` (the ratio's reference)."""
    falls = sum(r.fell for r in runs)
    errors = sum(r.error is not None for r in runs)
    same_script = c.ratio or c.group == "nominal"
    tracking = tuple(r.tracking_error for r in runs)
    mean = mean_of(tracking)
    ratio = nominal_error / mean if same_script and mean > 0 else math.nan  # NaN compares False: no ratio, no pass
    rate = max((r.intervention_rate for r in runs), default=math.nan)
    gate_failures = sum(not r.gate_tracking_passed for r in runs)
    passed = (errors == 0 and falls <= config.max_falls and rate <= config.max_intervention_rate
              and (not c.ratio or ratio >= config.robust_tracking_ratio_min)
              and (not c.gate_tracking or gate_failures == 0))
    return ConditionResult(c, len(runs), falls, ratio, rate, gate_failures, errors, passed, tracking)


@dataclass
class SuiteResult:
    policy: str
    task: str
    robot: str
    results: list[ConditionResult]
    wall_s: float
    workers: int
    runs: int
    simulated_s: float
    errors: list[str]

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)


def run_suite(policy: str, config: GateConfig | None = None, workers: int = 2, seeds: int = SUITE_SEEDS,
              select: Callable[[Condition], bool] | None = None, robot: str | None = None) -> SuiteResult:
    """The whole suite for ``policy`` (``select``: only the conditions it accepts, e.g. for tests; ``robot``: a spec
    file other than the shipped spec of the contract's robot, as the gate's ``--robot``)."""
    start = time.perf_counter()
    config = config or GateConfig()
    task, spec, _ = _loaded(str(policy), robot)  # also refuses a policy whose contract does not match its task
    conditions = [c for c in suite_conditions(task, spec, seeds) if select is None or select(c)]
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn")) if workers > 1 else None
    try:
        # The slowest conditions first, so that the workers finish together.
        order = sorted(conditions, key=lambda c: -c.seeds * condition_scenario(c, 0, task, spec).total_s)
        outcomes = _run_all(policy, order, config, pool, robot)

        def result(c: Condition) -> ConditionResult:
            nominal = outcomes.get(("nominal", next((n.label for n in conditions if n.group == "nominal"), ""),
                                    c.setting))
            reference = mean_tracking_error(nominal[:c.seeds]) if nominal and len(nominal) >= c.seeds else math.nan
            return summarize(c, outcomes[c.key], reference, config)

        corners = [result(c) for c in conditions if c.group == "DR corner"]
        worst = [w for s in SETTINGS if (w := worst_case(corners, s)) is not None and (select is None or select(w))]
        if worst:
            outcomes.update(_run_all(policy, worst, config, pool, robot))
            conditions += worst
    finally:
        if pool is not None:
            pool.shutdown()
    results = [result(c) for c in conditions]
    all_runs = [o for c in conditions for o in outcomes[c.key]]
    simulated = sum(c.seeds * condition_scenario(c, 0, task, spec).total_s for c in conditions)
    errors = sorted({o.error for o in all_runs if o.error})
    return SuiteResult(str(policy), task.name, spec.name, results, time.perf_counter() - start, workers,
                       len(all_runs), simulated, errors)
