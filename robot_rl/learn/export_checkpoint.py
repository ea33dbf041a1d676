"""``robot-rl export``: a training checkpoint → ONNX with the policy contract in its metadata.

The actor is rebuilt exactly as the trainer built it (hidden sizes and activation are recorded in the
checkpoint), its weights and observation normalizer are loaded, and the exporter bakes the normalizer into
the graph, writes the contract (robot, spec hash, joints, gains, action, observation layout, commands,
period, provenance) and verifies the file by loading it back against the task's expected contract.
"""

from __future__ import annotations

import math
from pathlib import Path

from robot_rl.learn.errors import CheckpointError


def export_checkpoint(
    checkpoint: str,
    out: str,
    task: str | None = None,
    metrics: tuple[str, ...] = (),
    note: tuple[str, ...] = (),
) -> int:
    """Export a training checkpoint (PPO or FastTD3) to ONNX with the policy contract (normalizer baked in)."""
    metric_values = dict(_pairs(metrics, "--metrics", _finite))  # before anything loads: a bad one is a one-line error
    notes = dict(_pairs(note, "--note", str))
    import torch
    from rsl_rl.models.mlp_model import MLPModel
    from tensordict import TensorDict

    from robot_rl.learn.ppo import check_checkpoint, read_checkpoint_info
    from robot_rl.policy import contract_for_task, export_rsl_rl_policy
    from robot_rl.policy.export import collect_provenance
    from robot_rl.robots.spec import load_robot
    from robot_rl.tasks.registry import make_task

    info = read_checkpoint_info(checkpoint)
    task_cfg = make_task(task or info["task"])
    spec = load_robot(task_cfg.robot)
    check_checkpoint(checkpoint, task_cfg, spec)
    data = torch.load(checkpoint, weights_only=False, map_location="cpu")

    provenance = collect_provenance(
        task_cfg.name,
        seed=info.get("seed"),
        iterations=info.get("iteration"),
        env_steps=info.get("env_steps"),
        metrics=metric_values,
        notes={"checkpoint": str(Path(checkpoint).name), "algorithm": info.get("algorithm", "ppo"), **notes},
    )
    contract = contract_for_task(task_cfg, spec, provenance=provenance)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    if info.get("algorithm") == "fasttd3":  # off-policy (robot_rl.learn.offpolicy): its own actor, same contract
        from robot_rl.learn.offpolicy.fasttd3 import policy_parts
        from robot_rl.policy.export import export_onnx

        normalizer, actor = policy_parts(data)
        export_onnx(actor, normalizer, contract, out)
        print(f"exported {checkpoint} → {out} (task {task_cfg.name}, robot {spec.name}, spec {spec.spec_hash})")
        return 0
    dummy = TensorDict({"policy": torch.zeros(2, contract.obs_dim)}, batch_size=[2])
    hidden = info.get("actor_hidden_dims", list(task_cfg.ppo.actor_hidden_dims))
    model, extra = MLPModel, {}
    if task_cfg.ppo.chain_projected_actor:
        from robot_rl.learn.chain_projected import ChainProjectedMLP, projection_settings

        model, extra = ChainProjectedMLP, {"projection": projection_settings(task_cfg, spec)}
    actor = model(
        dummy,
        {"actor": ["policy"]},
        "actor",
        contract.num_actions,
        hidden_dims=list(hidden),
        activation=info.get("activation", task_cfg.ppo.activation),
        obs_normalization=True,
        distribution_cfg={"class_name": "rsl_rl.modules.distribution:GaussianDistribution", "init_std": 1.0},
        **extra,
    )
    missing, unexpected = actor.load_state_dict(data["actor_state_dict"], strict=False)
    weights_missing = [k for k in missing if not k.startswith("distribution")]
    if weights_missing or unexpected:
        raise CheckpointError(
            f"{checkpoint}: the actor in the checkpoint does not match the task's network "
            f"(missing {weights_missing[:3]}, unexpected {list(unexpected)[:3]})"
        )
    export_rsl_rl_policy(actor, contract, out)
    print(f"exported {checkpoint} → {out} (task {task_cfg.name}, robot {spec.name}, spec {spec.spec_hash})")
    return 0


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # a metric is a result: NaN or infinity is none, and JSON cannot hold it
        raise ValueError(text)
    return value


def _pairs(items: tuple[str, ...], flag: str, cast) -> list[tuple[str, object]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise CheckpointError(f"{flag} takes KEY=VALUE, got {item!r}")
        try:
            pairs.append((key, cast(value)))
        except ValueError:
            raise CheckpointError(f"{flag} {key}: {value!r} is not a finite number") from None
    return pairs
