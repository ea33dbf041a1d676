"""Isaac Lab / rsl_rl runs: the Go2 run fixture (data/isaac_lab_go2, env.yaml and agent.yaml written for these
tests in the form dump_yaml writes) with the real robot_lab Go2 network from ../shared/external imports to the
contract the rl_sar path gives, and walks on the Menagerie Go2; what env.yaml leaves open (the articulation's
order) is refused without the IO descriptors; bad patterns, unknown joints and conflicting gains are refused
in one line naming them."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_rl.policy.contract import IMPORTED_NOTE
from robot_rl.policy.importers import PolicyImportError, read_description
from robot_rl.policy.importers.convert import convert
from robot_rl.policy.importers.isaac_lab import read_run_yaml
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.robots.spec import load_robot

from .foreign_networks import BREADTH_FIRST_ORDER, robot_lab_in_order

RUN = Path(__file__).parent / "data" / "isaac_lab_go2"
ROBOT_LAB = "rl_sar/policy/go2/robot_lab"
GO2_JOINTS = load_robot("go2").joint_names


def _run_copy(tmp_path: Path, edit=None, io_descriptors: dict | None = None) -> Path:
    """The fixture run under tmp_path, its env.yaml edited (a function of the loaded dict), written back."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    if edit is not None:
        env = read_run_yaml(run / "params" / "env.yaml")
        edit(env)
        (run / "params" / "env.yaml").write_text(yaml.safe_dump(env, sort_keys=False))
    if io_descriptors is not None:
        (run / "isaac_velocity_flat_unitree_go2_v0_IO_descriptors.yaml").write_text(yaml.safe_dump(io_descriptors))
    return run


def _model(tmp_path: Path) -> Path:
    """A stand-in network file for the description errors, which are found before the network is read."""
    path = tmp_path / "policy.pt"
    path.write_bytes(b"")
    return path


def _contract_and_policy(path: Path):
    contract = read_contract(path)
    return contract, load_policy(path, contract)


def test_run_imports_to_the_contract_of_the_rl_sar_path(external, tmp_path):
    model = external / ROBOT_LAB / "policy.pt"
    ours = tmp_path / "isaac.onnx"
    convert(model, RUN, "go2", "go2-flat", ours, ("default-pose",))
    ref = tmp_path / "rl_sar.onnx"
    convert(external / ROBOT_LAB / "config.yaml", None, "go2", "go2-flat", ref, ("default-pose",))
    (a_contract, a), (b_contract, b) = _contract_and_policy(ours), _contract_and_policy(ref)
    assert a_contract.joint_names == b_contract.joint_names and a_contract.action == b_contract.action
    assert [(t.name, t.scale, t.history_length) for t in a_contract.observation.terms] == \
        [(t.name, t.scale, t.history_length) for t in b_contract.observation.terms]
    # Isaac Lab clips before it scales: ±100 rad/s on the gyro is ±25 after the 0.25 scale (rl_sar clips after).
    clips = {t.name: t.clip for t in a_contract.observation.terms}
    assert clips["base_ang_vel"] == pytest.approx(25.0) and clips["joint_vel"] == pytest.approx(5.0)
    obs = np.random.default_rng(3).normal(0.0, 1.0, (64, a.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(a.act_batch(obs), b.act_batch(obs), rtol=1e-4, atol=1e-4)
    note = a_contract.provenance.notes[IMPORTED_NOTE]
    assert note["trainer"] == "Isaac Lab / rsl_rl run unitree_go2_flat (ActorCritic)"
    env_yaml = RUN / "params" / "env.yaml"
    assert note["sources"]["env_yaml"]["sha256"] == hashlib.sha256(env_yaml.read_bytes()).hexdigest()
    assert set(note["sources"]) == {"model", "env_yaml", "agent_yaml"}
    assert note["policy_joint_order"] == list(GO2_JOINTS)  # robot_lab lists them in the SDK's order


def test_run_directory_names_its_exported_policy_and_walks(external, go2_model, tmp_path):
    """`robot-rl import-policy RUN`: the run's exported/policy.pt; on the Menagerie Go2, through the deploy
    runtime and its safety chain, it walks as the rl_sar-imported robot_lab policy does."""
    from robot_rl.control.runtime import DeployRuntime
    from robot_rl.evaluation.walk import walk

    run = _run_copy(tmp_path)
    (run / "exported").mkdir()
    shutil.copy(external / ROBOT_LAB / "policy.pt", run / "exported" / "policy.pt")
    path = tmp_path / "go2.onnx"
    convert(run, None, "go2", "go2-flat", path, ("default-pose",))
    assert read_contract(path).provenance.notes[IMPORTED_NOTE]["sources"]["model"]["file"] == "policy.pt"
    result = walk(DeployRuntime.load("go2", path), vx=0.5, walk_s=4.0)
    assert result.fell_at_s is None and not result.faulted, result
    assert result.distance_m > 1.4, result
    assert result.vx_error < 0.15, result


def _all_joints(env: dict) -> None:
    """Isaac Lab's stock form: every joint by '.*', in the articulation's order."""
    env["actions"]["joint_pos"].update(joint_names=[".*"], preserve_order=False)
    for term in ("joint_pos", "joint_vel"):
        env["observations"]["policy"][term]["params"]["asset_cfg"].update(joint_names=[".*"], preserve_order=False)


def _io_descriptors(order: tuple[str, ...]) -> dict:
    """The parts of Isaac Lab's IO descriptors the importer reads, for an articulation in ``order``."""
    return {"articulations": {"robot": {"joint_names": list(order)}},
            "actions": [{"name": "joint_position_action", "joint_names": list(order),
                         "full_path": "isaaclab.envs.mdp.actions.joint_actions.JointPositionAction"}],
            "observations": {"policy": [{"name": "joint_pos", "joint_names": list(order)},
                                        {"name": "joint_vel", "joint_names": list(order)}]},
            "scene": {"decimation": 4, "dt": 0.02, "physics_dt": 0.005}}


def test_articulation_order_is_refused_without_io_descriptors_and_read_from_them(external, tmp_path):
    network = robot_lab_in_order(external / ROBOT_LAB / "policy.pt", BREADTH_FIRST_ORDER, tmp_path / "bfs.onnx")
    run = _run_copy(tmp_path, _all_joints)
    with pytest.raises(PolicyImportError, match=r"actions\.joint_pos\.joint_names: joints \['\.\*'\] without "
                                                r"preserve_order are in the articulation's own order .* give the "
                                                r"run's IO descriptors"):
        read_description(network, run, GO2_JOINTS)
    run = _run_copy(tmp_path / "io", _all_joints, _io_descriptors(BREADTH_FIRST_ORDER))
    foreign = read_description(network, run, GO2_JOINTS)
    assert foreign.joint_names == BREADTH_FIRST_ORDER and "io_descriptors" in foreign.sources
    ours, ref = tmp_path / "bfs_imported.onnx", tmp_path / "rl_sar.onnx"
    convert(network, run, "go2", "go2-flat", ours, ("default-pose",))
    convert(external / ROBOT_LAB / "config.yaml", None, "go2", "go2-flat", ref, ("default-pose",))
    (_, a), (_, b) = _contract_and_policy(ours), _contract_and_policy(ref)
    obs = np.random.default_rng(4).normal(0.0, 1.0, (64, a.obs_dim)).astype(np.float32)
    # The network trained breadth-first, matched by name, drives the robot exactly as the SDK-ordered one.
    np.testing.assert_allclose(a.act_batch(obs), b.act_batch(obs), rtol=1e-4, atol=1e-4)


def test_io_descriptors_that_disagree_with_env_yaml_are_refused(tmp_path):
    bad = list(BREADTH_FIRST_ORDER)
    bad[0], bad[1] = bad[1], bad[0]
    io = _io_descriptors(BREADTH_FIRST_ORDER)
    io["actions"][0]["joint_names"] = bad
    run = _run_copy(tmp_path, _all_joints, io)
    with pytest.raises(PolicyImportError, match=r"actions\.joint_pos\.joint_names: env\.yaml resolves to "
                                                r"\['FL_hip_joint', 'FR_hip_joint'.*the IO descriptors' action "
                                                r"lists \['FR_hip_joint', 'FL_hip_joint'"):
        read_description(_model(tmp_path), run, GO2_JOINTS)


def _rename_first_joint(env: dict) -> None:
    names = env["actions"]["joint_pos"]["joint_names"]
    names[0] = "FR_hip_roll_joint"


def _unmatched_default(env: dict) -> None:
    env["scene"]["robot"]["init_state"]["joint_pos"]["M.*_thigh_joint"] = 0.8


def _second_actuator_group(env: dict) -> None:
    env["scene"]["robot"]["actuators"]["hips"] = {"joint_names_expr": [".*_hip_joint"], "stiffness": 25.0,
                                                  "damping": 0.5}


def _overlapping_scales(env: dict) -> None:
    env["actions"]["joint_pos"]["scale"] = {".*_hip_joint": 0.125, ".*": 0.25}


def _height_scan(env: dict) -> None:
    env["observations"]["policy"]["height_scan"] = {
        "func": "isaaclab.envs.mdp.observations:height_scan", "params": {"sensor_cfg": {"name": "height_scanner"}},
        "scale": 1.0, "clip": [-1.0, 1.0], "history_length": 0}


@pytest.mark.parametrize(("edit", "message"), [
    (_rename_first_joint, r"env\.yaml actions\.joint_pos\.joint_names: pattern 'FR_hip_roll_joint' matches no "
                          r"joint of the robot spec"),
    (_unmatched_default, r"scene\.robot\.init_state\.joint_pos: pattern 'M\.\*_thigh_joint' matches no joint"),
    (_second_actuator_group, r"conflicting gains for FR_hip_joint: actuator group 'GO2HV' gives stiffness 20, "
                             r"'hips' gives 25"),
    (_overlapping_scales, r"actions\.joint_pos\.scale: conflicting action scale for FR_hip_joint: '\.\*_hip_joint' "
                          r"gives 0\.125, '\.\*' gives 0\.25"),
    (_height_scan, r"observations\.policy\.height_scan: isaaclab\.envs\.mdp\.observations:height_scan has no "
                   r"counterpart"),
])
def test_a_bad_description_is_refused_in_one_line_naming_it(tmp_path, edit, message):
    run = _run_copy(tmp_path, edit)
    with pytest.raises(PolicyImportError, match=message) as info:
        read_description(_model(tmp_path), run, GO2_JOINTS)
    assert "\n" not in str(info.value)


def test_python_tags_are_read_as_data_and_never_run(tmp_path):
    run = _run_copy(tmp_path)
    env = run / "params" / "env.yaml"
    marker = tmp_path / "ran"
    env.write_text(f"probe: !!python/object/apply:os.system ['touch {marker}']\n" + env.read_text())
    data = read_run_yaml(env)
    assert data["probe"] is None and not marker.exists()
    assert data["scene"]["robot"]["init_state"]["pos"] == [0.0, 0.0, 0.38]  # a tagged tuple, read as a list
    assert read_description(_model(tmp_path), run, GO2_JOINTS).policy_period_s == pytest.approx(0.02)


def test_action_bounds_come_from_the_target_clip_and_clip_actions(tmp_path):
    def calf_clip(env: dict) -> None:  # Isaac Lab clips the joint target; the raw action's bound follows
        env["actions"]["joint_pos"]["clip"] = {".*_calf_joint": [-2.0, -1.0]}

    foreign = read_description(_model(tmp_path), _run_copy(tmp_path, calf_clip), GO2_JOINTS)
    bounds = dict(zip(foreign.joint_names, foreign.action_clip, strict=True))
    assert bounds["FR_calf_joint"] == pytest.approx((-2.0, 2.0))  # ((-2, -1) − default −1.5) / scale 0.25
    assert bounds["FR_hip_joint"] == (-100.0, 100.0)  # agent.yaml clip_actions


def test_a_model_from_another_run_is_refused(external, tmp_path):
    run = _run_copy(tmp_path)
    agent = run / "params" / "agent.yaml"
    agent.write_text(agent.read_text().replace("  - 512\n  - 256\n  - 128\n  critic", "  - 256\n  - 128\n  critic"))
    with pytest.raises(PolicyImportError, match=r"its actor's hidden layers are \[512, 256, 128\], the run's agent "
                                                r"config says \[256, 128\]"):
        convert(external / ROBOT_LAB / "policy.pt", run, "go2", "go2-flat", tmp_path / "p.onnx", ("default-pose",))


def test_missing_agent_yaml_and_exported_policy_are_named(tmp_path):
    run = _run_copy(tmp_path)
    with pytest.raises(PolicyImportError, match=r"no exported/policy\.pt or exported/policy\.onnx"):
        convert(run, None, "go2", "go2-flat", tmp_path / "p.onnx")
    (run / "params" / "agent.yaml").unlink()
    with pytest.raises(PolicyImportError, match=r"env\.yaml: no agent\.yaml beside it"):
        read_description(_model(tmp_path), run, GO2_JOINTS)
