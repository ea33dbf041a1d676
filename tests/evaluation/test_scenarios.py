"""Scripted scenarios: the velocity script covers every command kind with pushes, fits the trained
ranges, and lines up with run_loop's clock; the reach script stays in the trained box."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.control.deploy_loop import _command_at
from robot_rl.evaluation.scenarios import Scenario, Segment, scenario_for, velocity_scenario
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.registry import make_task

A1 = load_robot("a1")


def test_velocity_scenario_for_the_a1():
    task = make_task("a1-flat")
    sc = scenario_for(task.terms.gate, task.commands, A1)
    assert sc.lead_in_s == A1.safety.ramp_duration_s
    assert [s.label for s in sc.segments] == ["stand", "forward", "turn", "lateral", "backwards", "stop"]
    assert sc.total_s == pytest.approx(20.0)
    by_label = {s.label: s.command for s in sc.segments}
    assert by_label["forward"] == (0.5, 0.0, 0.0) and by_label["backwards"][0] < 0
    assert by_label["turn"][2] > 0 and by_label["lateral"][1] > 0 and by_label["stop"] == (0.0, 0.0, 0.0)
    speeds = [float(np.linalg.norm(p.velocity)) for p in sc.pushes]
    assert len(speeds) == 2 and all(0.5 <= s <= 1.0 for s in speeds)
    low, high = task.commands.low, task.commands.high
    assert all(np.all(low <= s.command) and np.all(np.asarray(s.command) <= high) for s in sc.segments)


def test_commands_line_up_with_run_loop_clock():
    task = make_task("a1-flat")
    sc = scenario_for(task.terms.gate, task.commands, A1)
    steps = sc.command_steps()
    zero = np.zeros(3)
    assert np.all(_command_at(steps, 0.0, zero) == 0.0)  # stand through the ramp
    assert _command_at(steps, sc.lead_in_s + 2.0, zero)[0] == 0.5  # forward from 2 s into the script
    assert _command_at(steps, sc.lead_in_s + 2.0 - 0.02, zero)[0] == 0.0
    np.testing.assert_allclose(sc.push_times(), [sc.lead_in_s + 4.0, sc.lead_in_s + 16.0])


def test_commands_are_clamped_into_narrow_trained_ranges_and_time_scales():
    narrow = CommandSpec(("lin_vel_x", "lin_vel_y", "ang_vel_z"), ((0.0, 0.3), (-0.1, 0.1), (-0.2, 0.2)))
    sc = velocity_scenario(narrow, lead_in_s=1.0, time_scale=0.5)
    by_label = {s.label: s.command for s in sc.segments}
    assert by_label["forward"] == (0.3, 0.0, 0.0) and by_label["backwards"] == (0.0, 0.0, 0.0)
    assert by_label["turn"] == (0.0, 0.0, 0.2)
    assert sc.script_s == pytest.approx(9.0) and sc.pushes[0].t_s == pytest.approx(2.0)


def test_reach_scenario_for_the_panda_has_targets_in_the_box_and_no_pushes():
    task = make_task("panda-reach")
    panda = load_robot("panda")
    sc = scenario_for(task.terms.gate, task.commands, panda)
    assert sc.gate == "reach" and sc.pushes == () and len(sc.segments) == 4
    targets = np.array([s.command for s in sc.segments])
    assert np.all(targets >= task.commands.low) and np.all(targets <= task.commands.high)
    assert len({tuple(t) for t in targets}) == 4
    assert np.all(_command_at(sc.command_steps(), 0.0, np.zeros(3)) == targets[0])  # no (0,0,0) target


def test_bad_scenarios_are_refused():
    names = ("lin_vel_x", "lin_vel_y", "ang_vel_z")
    with pytest.raises(ValueError, match="back to back"):
        gap = (Segment("a", 0.0, 1.0, (0, 0, 0)), Segment("b", 2.0, 1.0, (0, 0, 0)))
        Scenario("gap", "velocity_tracking", names, gap, (), 1.0)
    with pytest.raises(ValueError, match="2 command values"):
        Scenario("short", "velocity_tracking", names, (Segment("a", 0.0, 1.0, (0, 0)),), (), 1.0)
    with pytest.raises(ValueError, match="no sim2sim scenario"):
        scenario_for("dance", make_task("a1-flat").commands, A1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="target_x"):
        scenario_for("reach", make_task("a1-flat").commands, A1)


def test_object_goal_scenario_for_panda_push_lays_out_the_cube_and_commands_its_goal():
    task = make_task("panda-push")
    panda = load_robot("panda")
    sc = scenario_for(task.terms.gate, task.commands, panda, source=task.terms.source,
                      episode_s=task.episode_length_s)
    layout = task.terms.source.sample_episode(np.random.default_rng(0))
    assert sc.gate == "object_goal" and sc.pushes == () and len(sc.segments) == 1
    assert sc.script_s == pytest.approx(task.episode_length_s)
    np.testing.assert_allclose(sc.segments[0].command, layout.command)
    assert sc.scene is not None and sc.scene.tracked is not None
    assert sc.goal_distance(np.r_[layout.command, 0.0], layout.command) == 0.0
    again = sc.relayout(3)  # the same scenario, the cube where layout seed 3 puts it
    layout3 = task.terms.source.sample_episode(np.random.default_rng(3))
    np.testing.assert_allclose(again.segments[0].command, layout3.command)
    assert again.name == "object to goal: layout seed 3" and again.script_s == sc.script_s
    assert not np.allclose(again.segments[0].command, layout.command)
    with pytest.raises(ValueError, match="needs the task's observation source"):
        scenario_for("object_goal", task.commands, panda)
