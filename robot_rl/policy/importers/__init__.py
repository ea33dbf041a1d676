"""Import policies trained elsewhere (Isaac Lab via rl_sar, legged_gym / unitree_rl_gym, …) into the contract.

``robot-rl import-policy`` reads a foreign policy and its deployment description, matches its joints to a
robot spec **by name**, maps its observation terms onto this project's (scales, clips, history layout), and
writes an ONNX file with this project's contract, which then runs through ``sim2sim``, ``deploy`` and the
safety chain like any policy exported here. One module per source format:

- :mod:`.rl_sar`: rl_sar's ``config.yaml`` + ``base.yaml`` (robot_lab / Isaac Lab, HIMLoco, robomimic …).
- :mod:`.unitree_rl_gym`: unitree_rl_gym's ``deploy_mujoco/configs/*.yaml`` + its TorchScript policy.
- :mod:`.isaac_lab`: an Isaac Lab / rsl_rl run (``params/env.yaml``, ``agent.yaml``, ``exported/policy.*``,
  optionally the IO descriptors).
- :mod:`.mjlab`: an mjlab ONNX, described by the metadata mjlab's exporter writes into it.

A plain ONNX file carries no description of its observation, joints or action: it is refused alone, and
accepted with the description it was deployed with (an rl_sar config, an Isaac Lab run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from robot_rl.policy.importers.description import ForeignPolicy, PolicyImportError

Allowance = Literal["default-pose", "gains", "hold-missing"]

__all__ = ["PolicyImportError", "import_policy", "read_description"]


def read_description(model: Path, description: Path | None, robot_joints: tuple[str, ...] = ()) -> ForeignPolicy:
    """The foreign policy as its description says; refuses a model without one, naming what to give.

    ``robot_joints``: the spec's joint names, which Isaac Lab's joint patterns are resolved against where the
    run's IO descriptors do not list the articulation's joints."""
    from robot_rl.policy.importers.isaac_lab import is_isaac_lab_env, read_isaac_lab, read_run_yaml
    from robot_rl.policy.importers.mjlab import mjlab_metadata, read_mjlab
    from robot_rl.policy.importers.rl_sar import is_rl_sar, read_rl_sar
    from robot_rl.policy.importers.unitree_rl_gym import is_unitree_rl_gym, read_unitree_rl_gym
    from robot_rl.typed_yaml import ConfigError, read_yaml

    if description is None and (model.is_dir() or model.suffix in (".yaml", ".yml")):
        model, description = None, model  # the config (or the run) names its model
    if model is not None and not model.is_file():
        raise PolicyImportError(f"{model}: no such file")
    if description is None and model.suffix == ".onnx" and mjlab_metadata(model) is not None:
        return read_mjlab(model)
    if description is None:
        kind = "an ONNX file" if model.suffix == ".onnx" else "a TorchScript file"
        raise PolicyImportError(
            f"{model}: {kind} says nothing about its joint order, observation terms, scales, history or action "
            "scale; give the description it was deployed with (--description): an rl_sar config.yaml "
            "(policy/<robot>/<name>/config.yaml, with base.yaml above it), a unitree_rl_gym deploy config or an "
            "Isaac Lab run directory (params/env.yaml, agent.yaml)")
    if description.is_dir():
        return read_isaac_lab(description, model, robot_joints)
    try:
        data = read_yaml(description)
    except ConfigError as exc:
        if "python/" not in str(exc):
            raise PolicyImportError(str(exc)) from None
        data = read_run_yaml(description)  # Isaac Lab's dump_yaml tags tuples
    if is_rl_sar(data):
        return read_rl_sar(description, model)
    if is_unitree_rl_gym(data):
        return read_unitree_rl_gym(description, model)
    if is_isaac_lab_env(data):
        return read_isaac_lab(description, model, robot_joints)
    raise PolicyImportError(f"{description}: not a description format the importer knows (an rl_sar config.yaml, "
                            "a unitree_rl_gym deploy config or an Isaac Lab params/env.yaml)")


def import_policy(
    model: str,
    /,
    robot: str,
    task: str,
    out: str,
    description: str | None = None,
    allow: tuple[Allowance, ...] = (),
    overwrite: bool = False,
) -> int:
    """Import a policy trained elsewhere and write it as an ONNX file with this project's contract.

    Joints are matched by name; a joint the spec lacks, a spec joint the policy does not drive, or a gain or
    default-pose disagreement is refused, naming it, unless --allow covers it. The source files' SHA-256s,
    the trainer and every mapping are recorded in the contract's provenance.

    Args:
        model: the policy (TorchScript .pt, or .onnx; an mjlab ONNX carries its own description), or a
            description that names its model (rl_sar config.yaml, unitree_rl_gym deploy config, an Isaac Lab run
            directory whose exported/ holds policy.pt or policy.onnx).
        robot: robot name (hardware/robots/NAME.yaml) or path to a spec file.
        task: the task whose commands the policy follows and whose scenario the sim2sim gate runs (e.g. go2-flat).
        out: where to write the ONNX file.
        description: the policy's deployment description, when MODEL is the network itself (an rl_sar config,
            a unitree_rl_gym deploy config, an Isaac Lab run directory or its params/env.yaml).
        allow: accept a disagreement with the spec: default-pose (the spec's pose is ramped to and held; the
            graph still gives the policy its own), gains (run with the spec's gains), hold-missing (spec joints
            the policy does not drive are held at the default pose).
        overwrite: replace an existing OUT file.
    """
    from robot_rl.policy.importers.convert import convert

    result = convert(Path(model), Path(description) if description else None, robot, task, Path(out),
                     tuple(allow), overwrite)
    print(result)
    return 0
