"""The robustness suite: its conditions come from the task's own data, the perturbed robot is the training
DR at a corner, and a fragile policy fails conditions the single gate run passes (real MuJoCo, the runtime)."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.evaluation import robustness as rb
from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.perturbed_robot import NoisyRuntime, Perturbation, PerturbedSimRobot
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task

POLICIES = Path(__file__).resolve().parents[2] / "policies"
FRAGILE = str(POLICIES / "a1_flat_v1" / "policy.onnx")


def _by_group(conditions):
    out: dict[str, list[rb.Condition]] = {}
    for c in conditions:
        out.setdefault(c.group, []).append(c)
    return out


def test_velocity_suite_covers_directions_magnitudes_gaits_seeds_and_every_setting():
    task, spec = make_task("a1-flat"), load_robot("a1")
    groups = _by_group(rb.suite_conditions(task, spec))
    shoves = groups["shove"]
    push = task.randomization.push_max_vel_m_s
    for setting in rb.suite_settings(spec):
        here = [c for c in shoves if c.setting == setting]
        assert len({c.shove_dir_rad for c in here}) >= 8
        assert {c.shove_m_s for c in here} == {0.5 * push, push}
        assert {c.walking for c in here} == {False, True}
        assert all(c.seeds >= 10 for c in here)
        assert any(c.setting == setting for c in groups["nominal"])
        assert any(c.setting == setting for c in groups["long walk"])
    assert "steps" not in groups  # a flat task claims no steps
    # Every randomized quantity at both ends, in both MuJoCo contacts; PyBullet takes no model terms.
    corners = groups["DR corner"]
    assert {c.setting for c in corners} == {"mujoco", "mujoco training contact"}
    labels = {c.label for c in corners if c.setting == "mujoco"}
    r = task.randomization
    assert {f"payload {v:+g} kg" for v in r.base_mass_add_kg} <= labels
    assert {f"kp ×{v:g}" for v in r.kp_scale} | {f"motor strength ×{v:g}" for v in r.motor_strength} <= labels
    assert {f"friction ×{v:g}" for v in r.friction_scale} <= labels
    assert f"latency {r.action_latency_steps[1]} steps" in labels and "observation noise" in labels
    assert len([c for c in corners if c.quantity == "com" and c.setting == "mujoco"]) == 4


def test_rough_task_gets_steps_as_high_as_its_terrain_claims():
    task, spec = make_task("a1-rough"), load_robot("a1")
    steps = _by_group(rb.suite_conditions(task, spec))["steps"]
    assert {c.step_height_m for c in steps} == {task.terrain.max_obstacle_m}
    scenario = rb.condition_scenario(steps[0], 3, task, spec)
    heights = [2 * b.half_size[2] for b in scenario.scene.boxes]
    assert max(heights) <= task.terrain.max_obstacle_m + 1e-12 and min(heights) > 0


def test_arm_suite_is_its_dr_corners_contacts_and_random_targets():
    task, spec = make_task("panda-reach"), load_robot("panda")
    groups = _by_group(rb.suite_conditions(task, spec))
    assert set(groups) == {"nominal", "DR corner"}
    assert {c.quantity for c in groups["DR corner"]} == {"link_mass_scale", "kp_scale", "kd_scale", "latency",
                                                         "noise"}
    nominal = groups["nominal"][0]
    gate, other = (rb.condition_scenario(nominal, s, task, spec) for s in (0, 1))
    assert gate.segments != other.segments  # seed ≥ 1: other targets
    for seg in other.segments:
        point = np.array(seg.command)
        assert np.all(point >= task.commands.low) and np.all(point <= task.commands.high)


def test_nominal_seeds_shove_from_random_directions_with_the_gate_magnitudes():
    task, spec = make_task("a1-flat"), load_robot("a1")
    nominal = rb.suite_conditions(task, spec)[0]
    gate = rb.condition_scenario(nominal, 0, task, spec)
    rotated = rb.condition_scenario(nominal, 4, task, spec)
    for a, b in zip(gate.pushes, rotated.pushes, strict=True):
        assert a.t_s == b.t_s and math.hypot(*a.velocity[:2]) == pytest.approx(math.hypot(*b.velocity[:2]))
        assert a.velocity != b.velocity


def test_corners_run_the_nominal_seeds_scripts_as_many_times():
    """A ratio compares means over the same scripts: corner seed s is nominal seed s's scenario."""
    task, spec = make_task("a1-flat"), load_robot("a1")
    conditions = rb.suite_conditions(task, spec)
    nominal = next(c for c in conditions if c.group == "nominal" and c.setting == "mujoco")
    corners = [c for c in conditions if c.group == "DR corner"]
    assert corners and all(c.seeds == nominal.seeds == rb.SUITE_SEEDS for c in corners)
    for seed in (0, 3):
        assert rb.condition_scenario(corners[0], seed, task, spec) == rb.condition_scenario(nominal, seed, task, spec)
    assert rb.condition_scenario(corners[0], 0, task, spec) != rb.condition_scenario(corners[0], 3, task, spec)


def _outcome(error, fell=False):
    return rb.RunOutcome(fell, error, 0.0, True, 0.1)


def test_tracking_ratio_is_nominal_mean_over_condition_mean():
    corner = rb.Condition("DR corner", "kp ×0.9", "mujoco", 3, Perturbation(kp_scale=0.9), "kp_scale", ratio=True)
    config = GateConfig()
    # One run at twice the nominal error does not sink a corner whose other runs track as well as nominal ...
    r = rb.summarize(corner, [_outcome(0.2), _outcome(0.4), _outcome(0.2)], 0.25, config)
    assert r.ratio == pytest.approx(0.25 / (0.8 / 3)) and r.passed and r.tracking_errors == (0.2, 0.4, 0.2)
    # ... but a corner that tracks worse on average fails, whatever its best run.
    r = rb.summarize(corner, [_outcome(0.2), _outcome(0.4), _outcome(0.4)], 0.25, config)
    assert r.ratio == pytest.approx(0.25 / (1.0 / 3)) and not r.passed
    # A run that scored nothing leaves the means over different scripts: no ratio, no pass.
    r = rb.summarize(corner, [_outcome(0.2), _outcome(math.nan), _outcome(0.2)], 0.25, config)
    assert math.isnan(r.ratio) and not r.passed
    assert math.isnan(rb.mean_tracking_error([])) and rb.mean_tracking_error([_outcome(0.1), _outcome(0.3)]) == 0.2
    # Shoves run their own scripts: no ratio, and none is required.
    shove = rb.Condition("shove", "1 m/s from 0°, walking", "mujoco", 2, shove_m_s=1.0, walking=True)
    r = rb.summarize(shove, [_outcome(0.9), _outcome(0.9)], 0.25, config)
    assert math.isnan(r.ratio) and r.passed


def test_worst_case_takes_the_worse_corner_of_each_quantity():
    def result(label, quantity, falls, ratio, **fields):
        c = rb.Condition("DR corner", label, "mujoco", 4, Perturbation(**fields), quantity, ratio=True)
        return rb.ConditionResult(c, 4, falls, ratio, 0.0, 0, 0, falls == 0)

    corners = [result("payload -1", "payload", 0, 0.95, payload_kg=-1.0),
               result("payload +3", "payload", 1, 0.5, payload_kg=3.0),
               result("kp 0.9", "kp_scale", 0, 0.7, kp_scale=0.9),
               result("kp 1.1", "kp_scale", 0, 0.97, kp_scale=1.1)]
    worst = rb.worst_case(corners, "mujoco")
    assert worst.perturbation == Perturbation(payload_kg=3.0, kp_scale=0.9)
    assert worst.ratio and worst.seeds == 4 and rb.worst_case(corners, "pybullet") is None


def test_perturbed_robot_is_the_training_dr_at_the_corner():
    spec = load_robot("a1")
    p = Perturbation(payload_kg=2.0, kp_scale=0.8, motor_strength=0.9, latency_steps=1, contact="training")
    with PerturbedSimRobot(spec, "mujoco", p) as robot, PerturbedSimRobot(spec, "mujoco", Perturbation()) as ref:
        model, nominal = robot._backend.robot.model, ref._backend.robot.model
        base = robot._backend.robot.base_body_id
        assert model.body_mass[base] == pytest.approx(nominal.body_mass[base] + 2.0)
        assert model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL and nominal.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
        assert np.allclose(robot.read().q, spec.default_positions)  # not the model's zero pose
        hold = JointCommand.hold(spec.default_positions, spec.kp, spec.kd)
        data = robot._backend.data
        robot.write(hold)  # one step of latency: the power-up (passive) command
        assert np.all(data.ctrl == 0.0)
        robot.write(hold)
        assert np.allclose(data.ctrl[robot._backend.robot.kp_ctrl], spec.kp * 0.8 * 0.9)
    with pytest.raises(ValueError, match="MuJoCo only"):
        PerturbedSimRobot(spec, "pybullet", Perturbation(payload_kg=1.0))


def test_noisy_runtime_adds_the_task_noise_and_nothing_else():
    task = make_task("a1-flat")
    seen = []

    class Recorder:
        def step(self, state, now, missed_deadlines=0):
            seen.append(state)

    noise = {t.name: t.noise for t in task.actor_obs.terms if t.noise > 0}
    noisy = NoisyRuntime.for_task(Recorder(), task, seed=0)
    state = RobotState(timestamp=0.0, tick=0, q=np.zeros(12), dq=np.zeros(12), tau=np.zeros(12),
                       base_lin_vel=np.array([0.3, 0.0, 0.0]))
    for _ in range(50):
        noisy.step(state, 0.0)
    q = np.array([s.q for s in seen])
    dq = np.array([s.dq for s in seen])
    assert 0 < np.abs(q).max() <= noise["joint_pos_rel"] and 0 < np.abs(dq).max() <= noise["joint_vel"]
    tilt = [np.arccos(np.clip(1 - 2 * (s.base_quat[1] ** 2 + s.base_quat[2] ** 2), -1, 1)) for s in seen]
    assert 0 < max(tilt) <= noise["projected_gravity"] + 1e-9
    assert all(np.array_equal(s.base_lin_vel, state.base_lin_vel) for s in seen)  # not an actor observation
    assert np.all(state.q == 0.0)  # the loop's own state (what the record keeps) is untouched


def test_suite_runs_in_worker_processes_and_scores_ratios_against_nominal():
    result = rb.run_suite(FRAGILE, workers=2, seeds=1, select=lambda c: c.setting == "mujoco" and (
        c.group == "nominal" or c.label in ("kp ×1.1", "payload +3 kg") or c.group == "worst case"))
    rows = {r.condition.label: r for r in result.results}
    assert rows["gate scenario, random shove directions"].ratio == pytest.approx(1.0)
    assert rows["payload +3 kg"].falls == 1 and not rows["payload +3 kg"].passed
    assert rows["kp ×1.1"].ratio > 0 and not math.isnan(rows["kp ×1.1"].ratio)
    worst = [r for r in result.results if r.condition.group == "worst case"]
    assert len(worst) == 1 and worst[0].condition.perturbation.payload_kg == 3.0
    assert result.runs == 4 and not result.errors and not result.passed


@pytest.mark.parametrize("simulator", ["mujoco", "pybullet"])
def test_steps_scene_builds_in_both_simulators_and_the_robot_stands_clear_of_it(simulator):
    """No rough policy exists yet: the steps condition is checked to build and hold the robot in each simulator."""
    task, spec = make_task("a1-rough"), load_robot("a1")
    steps = next(c for c in rb.suite_conditions(task, spec) if c.group == "steps" and c.setting == simulator)
    scenario = rb.condition_scenario(steps, 0, task, spec)
    with PerturbedSimRobot(spec, simulator, steps.perturbation, scene=scenario.scene) as robot:
        hold = JointCommand.hold(spec.default_positions, spec.kp, spec.kd)
        for _ in range(25):
            robot.write(hold)
        state = robot.read()
    assert abs(state.base_pos[2] - spec.sim_model.base_height) < 0.08  # on the floor, not on a block
    first = min(b.pos[0] - b.half_size[0] for b in scenario.scene.boxes)
    assert first > 0.3  # the first step is ahead of the feet


def test_the_suite_runs_on_the_spec_file_it_is_given(untrained_a1_policy, tmp_path):
    """`sim2sim --robot path/to/a1.yaml --suite full`: every run loads that file, not the shipped spec."""
    spec_file = tmp_path / "a1.yaml"
    text = Path(load_robot("a1").source_file).read_text()
    spec_file.write_text(text.replace("soft_limit_margin_rad: 0.05", "soft_limit_margin_rad: 0.06"))
    _, spec, _ = rb._loaded(str(untrained_a1_policy), str(spec_file))
    assert spec.source_file == str(spec_file) and spec.safety.soft_limit_margin_rad == 0.06
    conditions = rb.suite_conditions(make_task("a1-flat"), spec, 1)
    nominal = next(c for c in conditions if c.group == "nominal" and c.setting == "mujoco")
    outcome = rb.run_condition(str(untrained_a1_policy), nominal, 0, GateConfig(), str(spec_file))
    assert outcome.error is None and outcome.wall_s > 0
