"""unitree_rl_gym deploy configs (``deploy/deploy_mujoco/configs/<robot>.yaml``) and their TorchScript policies.

The config lists gains, default angles and scales in the order of the trained robot's joints, which it does
not name: the names come from the robot description it points at (``xml_path``, under
``{LEGGED_GYM_ROOT_DIR}``; that folder's ``<robot>_12dof.xml`` where ``scene.xml`` is absent), in document
order, as Isaac Gym orders the DOFs of that model.

The observation is unitree_rl_gym's deploy script's: gyro · ang_vel_scale, projected gravity, command ·
cmd_scale, (q − default) · dof_pos_scale, dq · dof_vel_scale, the last action, then sin and cos of a gait
phase with a fixed 0.8 s period (``deploy_mujoco.py``; not in the config). The gait phase is a clock the
exported graph keeps itself, as recurrent state, reset with the policy. Action: default + action_scale · a.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from robot_rl.policy.importers.description import ForeignPolicy, ForeignTerm, PolicyImportError, per_joint
from robot_rl.typed_yaml import ConfigError, read_yaml

GAIT_PERIOD_S = 0.8  # unitree_rl_gym deploy_mujoco.py / deploy_real.py: `period = 0.8`
UNCLIPPED = 1e6  # the deploy script clips neither observation nor action


def is_unitree_rl_gym(data: object) -> bool:
    return isinstance(data, dict) and {"kps", "default_angles", "num_obs", "cmd_scale"} <= data.keys()


def _joint_names(config_path: Path, xml_path: str) -> tuple[tuple[str, ...], Path]:
    root = config_path.resolve().parents[3]  # deploy/deploy_mujoco/configs/x.yaml → the repository root
    declared = Path(xml_path.replace("{LEGGED_GYM_ROOT_DIR}", str(root)))
    candidates = [declared, *sorted(declared.parent.glob("*_12dof.xml"))]
    for candidate in candidates:
        if candidate.is_file():
            try:
                tree = ET.parse(candidate)
            except ET.ParseError as exc:
                raise PolicyImportError(f"{candidate}: not readable XML ({exc})") from None
            names = tuple(j.get("name") for j in tree.iter("joint")
                          if j.get("type", "hinge") in ("hinge", "slide") and j.get("name"))
            return names, candidate
    raise PolicyImportError(f"{config_path}: the robot description {declared} (xml_path) is not there, nor a "
                            "*_12dof.xml beside it: it names the joints the config's lists are ordered by")


def read_unitree_rl_gym(config_path: Path, model_path: Path | None) -> ForeignPolicy:
    try:
        cfg = read_yaml(config_path)
    except ConfigError as exc:
        raise PolicyImportError(str(exc)) from None
    where = str(config_path)
    if not is_unitree_rl_gym(cfg):
        raise PolicyImportError(f"{where}: not a unitree_rl_gym deploy config (kps, default_angles, num_obs, "
                                "cmd_scale)")
    names, xml = _joint_names(config_path, str(cfg.get("xml_path", "")))
    n = int(cfg["num_actions"])
    if len(names) != n:
        raise PolicyImportError(f"{xml}: has {len(names)} joints, the config {n} actions")
    if model_path is None:
        root = config_path.resolve().parents[3]
        model_path = Path(str(cfg.get("policy_path", "")).replace("{LEGGED_GYM_ROOT_DIR}", str(root)))
    if not model_path.is_file():
        raise PolicyImportError(f"{where}: model {model_path} not found")
    terms = (
        ForeignTerm("base_ang_vel", "omega", (float(cfg["ang_vel_scale"]),)),
        ForeignTerm("projected_gravity", "gravity_orientation", (1.0,)),
        ForeignTerm("command", "cmd", tuple(float(v) for v in cfg["cmd_scale"])),
        ForeignTerm("joint_pos_rel", "qj", (float(cfg["dof_pos_scale"]),)),
        ForeignTerm("joint_vel", "dqj", (float(cfg["dof_vel_scale"]),)),
        ForeignTerm("last_action", "action", (1.0,)),
    )
    width = 9 + 3 * n + 2
    if int(cfg["num_obs"]) != width:
        raise PolicyImportError(f"{where}: num_obs {cfg['num_obs']} is not the deploy script's layout "
                                f"(3 + 3 + 3 + 3·{n} + 2 = {width})")
    return ForeignPolicy(
        trainer="unitree_rl_gym (legged_gym / Isaac Gym) deploy config",
        model_path=model_path,
        model_format="torchscript",
        joint_names=names,
        default_positions=per_joint(cfg["default_angles"], n, "default_angles", where),
        kp=per_joint(cfg["kps"], n, "kps", where),
        kd=per_joint(cfg["kds"], n, "kds", where),
        action_scale=per_joint(cfg["action_scale"], n, "action_scale", where),
        action_clip=((-UNCLIPPED, UNCLIPPED),) * n,
        terms=terms,
        policy_period_s=float(cfg["simulation_dt"]) * int(cfg["control_decimation"]),
        extra_inputs=("gait_phase",),
        gait_period_s=GAIT_PERIOD_S,
        sources={"model": model_path, "config": config_path, "robot_description": xml},
    )
