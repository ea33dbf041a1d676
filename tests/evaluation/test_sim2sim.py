"""The sim2sim gate end to end on real simulators through the real runtime: an untrained policy fails,
the runtime holding the default pose (positive control) passes, reach tasks are scored by tip distance,
and bad input gets a clear error."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pybullet as pb
import pytest
import tyro

from robot_rl.control.deploy_loop import Push
from robot_rl.control.runtime import DeployRuntime
from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.scenarios import Scenario, Segment, scenario_for
from robot_rl.evaluation.sim2sim import evaluate, policy_gate, sim2sim, tool_points
from robot_rl.policy.onnx_policy import PolicyLoadError
from robot_rl.robots.pybullet_model import build_pybullet_robot
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task

from .conftest import SHORT

A1 = load_robot("a1")


def test_untrained_policy_fails_the_gate_in_both_simulators(short_gate):
    result, _ = short_gate
    assert not result.passed
    assert [s.simulator for s in result.scores] == ["mujoco", "pybullet"]
    ticks = round(result.scenario.total_s / A1.timing.policy_period_s)
    for score in result.scores:
        assert score.error is None and not score.passed
        run = result.runs[score.simulator]
        assert run.record.ticks == ticks and run.record.mode[-1] in ("running", "damping")
        failed = {c.name for c in score.checks if not c.passed}
        # It does not walk: commanded 0.5 m/s forward, it stays (or falls) where it is.
        assert failed & {"falls", "vx, vy error mean, worst segment"}, failed
        assert score.timing.wall_s > 0 and score.timing.step_p99_ms > 0
        assert np.isfinite(run.base_ang_vel).all()  # the probe saw every state the loop read


def test_a_policy_that_folds_the_legs_falls_and_trips_the_safety_chain(folding_a1_policy):
    result = policy_gate(folding_a1_policy, time_scale=SHORT, config=GateConfig(settle_s=0.25))
    assert not result.passed
    for score in result.scores:
        assert score.fall.fell and "base height" in score.fall.cause, score.fall
        assert result.scenario.lead_in_s < score.fall.t_s < result.scenario.lead_in_s + 1.0  # soon after takeover
        failed = {c.name for c in score.checks if not c.passed}
        assert {"falls", "safety interventions per tick"} <= failed
        assert score.interventions.get("position_limit", 0) > 0  # the calf targets are past the soft limit


def test_holding_the_default_pose_through_a_push_passes_standing_checks():
    """Positive control: with no policy the runtime ramps and holds the default pose. Asked to stand and
    shoved at 0.5 m/s, that is a correct answer, so every check must pass in both simulators."""
    names = make_task("a1-flat").commands.names
    scenario = Scenario("stand with a shove", "velocity_tracking", names,
                        (Segment("stand", 0.0, 3.0, (0.0, 0.0, 0.0)),), (Push(1.0, (0.5, 0.0, 0.0)),),
                        A1.safety.ramp_duration_s)
    # Timing is not what this test is about (and a loaded CI machine can stretch a tick): no timing limit.
    config = GateConfig(max_step_compute_p99_fraction=1e9)
    scores, runs = evaluate(lambda: DeployRuntime(A1), A1, scenario, ("mujoco", "pybullet"), config)
    for score in scores:
        assert score.passed, (score.simulator, [c for c in score.checks if not c.passed])
        assert score.tracking["vx"].samples == 50  # 4–5 s: after the policy start (2 s) and the push (3 s) settle
        k = round(3.0 / A1.timing.policy_period_s) + 1
        assert runs[score.simulator].record.base_lin_vel[k, 0] > 0.25  # the shove happened


def test_a_crashing_simulator_run_fails_the_gate_with_its_error():
    scenario = scenario_for("velocity_tracking", make_task("a1-flat").commands, A1, time_scale=SHORT)

    def broken_runtime() -> DeployRuntime:
        raise RuntimeError("policy session died")

    scores, runs = evaluate(broken_runtime, A1, scenario, ("mujoco",), GateConfig())
    assert runs == {} and not scores[0].passed and "policy session died" in scores[0].error


def test_reach_policy_is_scored_by_tip_distance(untrained_panda_policy):
    result = policy_gate(untrained_panda_policy, simulators=("mujoco",), config=GateConfig(settle_s=0.3),
                         time_scale=1.0 / 3.0)
    score = result.scores[0]
    assert [r.label for r in score.reach] == ["target 1", "target 2", "target 3", "target 4"]
    assert all(r.samples > 0 for r in score.reach)
    names = [c.name for c in score.checks]
    assert "tip error final (worst target)" in names and not any("vx" in n for n in names)
    assert not result.passed  # an untrained arm does not reach 3 cm from four targets


def test_tool_point_kinematics_agree_with_pybullet(pybullet_client):
    panda = load_robot("panda")
    rng = np.random.default_rng(0)
    qs = panda.default_positions + rng.uniform(-0.3, 0.3, size=(3, panda.num_joints))
    ours = tool_points(panda, qs)
    robot = build_pybullet_robot(panda, pybullet_client)
    for q, tip in zip(qs, ours, strict=True):
        for index, value in zip(robot.joint_indices, q, strict=True):
            pb.resetJointState(robot.body_id, int(index), float(value), physicsClientId=pybullet_client)
        link = pb.getLinkState(robot.body_id, robot.end_effector_link, computeForwardKinematics=1,
                               physicsClientId=pybullet_client)
        np.testing.assert_allclose(tip, link[4], atol=1e-4)  # base at the origin: base frame = world frame


def test_bad_input_is_refused_with_a_clear_error(untrained_a1_policy, tmp_path):
    with pytest.raises(PolicyLoadError, match="exported for robot 'a1', not 'panda'"):
        policy_gate(untrained_a1_policy, robot="panda")
    with pytest.raises(PolicyLoadError, match=r"nope\.onnx"):
        policy_gate(tmp_path / "nope.onnx")
    with pytest.raises(ValueError, match="simulators must be"):
        policy_gate(untrained_a1_policy, simulators=("gazebo",))


def _a1_spec_copy(tmp_path, old: str = "", new: str = "") -> str:
    """The A1 spec as a user's own file (``old`` replaced by ``new``), named a1.yaml as a spec file must be."""
    text = Path(A1.source_file).read_text()
    assert old in text
    tmp_path.mkdir(parents=True)
    path = tmp_path / "a1.yaml"
    path.write_text(text.replace(old, new))
    return str(path)


def test_robot_may_be_a_spec_file_whose_hash_the_contract_must_name(untrained_a1_policy, tmp_path):
    """--robot takes a spec file as well as a name: the gate runs on that file when the contract was written
    against it (the same hash), and refuses it in one line otherwise."""
    same = _a1_spec_copy(tmp_path / "same", "soft_limit_margin_rad: 0.05", "soft_limit_margin_rad: 0.06")
    result = policy_gate(untrained_a1_policy, robot=same, simulators=("mujoco",), time_scale=SHORT,
                         config=GateConfig(settle_s=0.25))
    assert result.spec.source_file == same and result.spec.safety.soft_limit_margin_rad == 0.06
    assert result.scores[0].error is None and result.runs["mujoco"].record.ticks > 0
    stiffer = _a1_spec_copy(tmp_path / "stiffer", "kp: 20.0", "kp: 25.0")
    with pytest.raises(PolicyLoadError, match=rf"written against a 'a1' spec with hash {A1.spec_hash}, {stiffer} "
                                              r"has [0-9a-f]{16}: give the spec file .*\(--robot path/to/spec.yaml\), "
                                              r"or export it again for this one$"):
        policy_gate(untrained_a1_policy, robot=stiffer)
    with pytest.raises(PolicyLoadError, match=r"exported for robot 'a1', not 'go2' \(.*go2\.yaml\)"):
        policy_gate(untrained_a1_policy, robot=load_robot("go2").source_file)


def test_cli_function_with_tyro_writes_the_report_and_returns_1(untrained_a1_policy, tmp_path):
    config = tmp_path / "gate.yaml"
    config.write_text("settle_s: 0.25\n")
    out = tmp_path / "out"
    code = tyro.cli(sim2sim, args=["--policy", str(untrained_a1_policy), "--out", str(out), "--simulators",
                                   "mujoco", "--config", str(config), "--time-scale", "0.1667"])
    assert code == 1
    report = (out / "report.md").read_text()
    assert "--simulators mujoco" in report and f"--config {config}" in report and "pybullet" not in report.split(
        "## Policy contract")[0]
    assert (out / "report.png").stat().st_size > 10_000 and (out / "gate.json").is_file()


def test_object_goal_gate_scores_the_objects_final_distance_to_the_goal(tmp_path):
    """panda-push's gate: the cube's scene in each simulator, the policy observing it, over several layouts; a
    policy that holds the default pose leaves the cube where it is, 10 cm and more from the goal, on every
    layout: it fails that check only. With one layout the gate scores that layout's distance itself."""
    import torch

    from robot_rl.policy import collect_provenance, contract_for_task, export_onnx

    task = make_task("panda-push")
    contract = contract_for_task(task, provenance=collect_provenance("panda-push", seed=0))
    hold = torch.nn.Linear(contract.obs_dim, contract.num_actions)
    with torch.no_grad():
        hold.weight.zero_()
        hold.bias.zero_()  # action 0: the default pose
    export_onnx(hold, None, contract, tmp_path / "hold.onnx")
    result = policy_gate(tmp_path / "hold.onnx", time_scale=0.2, config=GateConfig(object_goal_layouts=3))
    for score in result.scores:
        checks = {c.name: c for c in score.checks}
        off = checks["layouts with the object off the goal (of 3)"]
        assert not off.passed and off.value == 1.0 and off.note.startswith("0/3 within 3 cm"), score
        assert checks["falls"].passed and checks["layouts with a fall, a safety fault or an error (of 3)"].passed
        assert checks["safety interventions per tick, mean of 3 layouts"].passed
        assert [c.name for c in score.checks if not c.passed] == [off.name]
    assert not result.passed
    one = policy_gate(tmp_path / "hold.onnx", simulators=("mujoco",), time_scale=0.2,
                      config=GateConfig(object_goal_layouts=1))
    checks = {c.name: c for c in one.scores[0].checks}
    final = checks["object distance to goal at the end"]
    assert not final.passed and final.value > 0.09  # the cube never moved towards the goal
    assert checks["safety interventions per tick"].passed
    for sim, run in result.runs.items():
        assert run.object_pos is not None and np.all(np.isfinite(run.object_pos)), sim


class _SleepyRuntime:
    """A runtime whose step waits (as a preempted one would) or computes."""

    def __init__(self, busy: bool):
        self.busy = busy

    def step(self, state, now, missed_deadlines=0):
        if self.busy:
            end = time.perf_counter() + 0.02
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(0.05)
        return "result"


def test_the_step_stopwatch_counts_cpu_time_not_time_spent_waiting():
    from robot_rl.evaluation.sim2sim import _TimedRuntime

    waiting = _TimedRuntime(_SleepyRuntime(busy=False), capacity=2)
    assert waiting.step(None, 0.0) == "result"
    assert waiting.compute_s[0] < 0.01  # 50 ms of wall time off the CPU: not the policy's cost
    working = _TimedRuntime(_SleepyRuntime(busy=True), capacity=2)
    working.step(None, 0.0)
    assert 0.0 < working.compute_s[0] <= 0.05  # at most the 20 ms it spun (plus clock granularity)
    assert working.busy  # other attributes pass through to the runtime
