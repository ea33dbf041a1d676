"""The gate's outputs: report.md (verdict, checks per simulator, contract, thresholds, the command),
report.png (a real image), gate.json (plain, parseable)."""

from __future__ import annotations

import dataclasses
import json

import matplotlib.image as mpimg

from robot_rl.control.runtime import DeployRuntime
from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.report import markdown, write_report
from robot_rl.evaluation.scenarios import Scenario, Segment
from robot_rl.evaluation.sim2sim import GateResult, evaluate
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task


def test_report_files_are_written(short_gate):
    _, paths = short_gate
    assert sorted(p.name for p in paths) == ["gate.json", "report.md", "report.png"]
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)


def test_png_is_a_valid_image(short_gate):
    _, paths = short_gate
    png = next(p for p in paths if p.suffix == ".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = mpimg.imread(png)
    height, width = image.shape[:2]
    assert height > 400 and width > 800
    assert image[..., :3].std() > 0.05  # not a blank canvas: curves, axes and text were drawn


def test_markdown_has_verdict_checks_contract_thresholds_and_command(short_gate):
    result, paths = short_gate
    text = next(p for p in paths if p.suffix == ".md").read_text()
    assert text.startswith("# sim2sim gate: **FAIL**")
    assert "| check | limit | mujoco | pybullet |" in text and "| **result** | | **FAIL** | **FAIL** |" in text
    assert "### mujoco" in text and "### pybullet" in text and "| forward |" in text
    assert f"`{result.contract.spec_hash}`" in text and "| task | a1-flat |" in text
    assert "| training seed | 0 |" in text and "| iterations | 0 |" in text
    assert "robot-rl sim2sim --policy a1_untrained.onnx" in text
    for name, *_ in GateConfig().describe():
        assert f"| `{name}` |" in text
    assert "\\|commanded − measured\\|" in text  # pipes escaped inside table cells
    assert "![commanded vs measured, per simulator](report.png)" in text


def test_markdown_marks_failed_values(short_gate):
    result, _ = short_gate
    failing_rows = [line for line in markdown(result).splitlines() if line.startswith("| vx, vy error mean, worst")]
    assert failing_rows and "✗" in failing_rows[0]
    nothing_ran = dataclasses.replace(result, scores=[])
    assert markdown(nothing_ran).startswith("# sim2sim gate: **FAIL**")


def test_a_passing_run_reports_pass_and_says_there_was_no_policy(tmp_path):
    spec = load_robot("a1")
    names = make_task("a1-flat").commands.names
    scenario = Scenario("stand", "velocity_tracking", names, (Segment("stand", 0.0, 1.5, (0.0, 0.0, 0.0)),), (),
                        spec.safety.ramp_duration_s)
    config = GateConfig(settle_s=0.5, max_step_compute_p99_fraction=1e9)  # no timing limit in a test
    scores, runs = evaluate(lambda: DeployRuntime(spec), spec, scenario, ("mujoco",), config)
    result = GateResult(spec, "hold default pose", scenario, config, scores, runs, command="")
    md, png = write_report(result, tmp_path)
    text = md.read_text()
    assert text.startswith("# sim2sim gate: **PASS**") and "No policy: the runtime holds" in text
    assert "(called from Python)" in text and png.is_file()


def test_gate_json_is_plain_and_matches_the_result(short_gate):
    result, paths = short_gate
    data = json.loads(next(p for p in paths if p.suffix == ".json").read_text())
    assert data["passed"] is False and data["task"] == "a1-flat"
    assert set(data["simulators"]) == {"mujoco", "pybullet"}
    for score in result.scores:
        entry = data["simulators"][score.simulator]
        assert [c["name"] for c in entry["checks"]] == [c.name for c in score.checks]
        assert entry["timing"]["ticks"] == score.timing.ticks
