"""Left ↔ right symmetry augmentation for PPO, as rsl_rl's ``Symmetry`` extension takes it.

rsl_rl calls ``data_augmentation_func(env=..., obs=..., actions=...)`` on every mini-batch: ``obs`` is the
batch's TensorDict of observation groups (here ``policy`` and ``critic``) or None, ``actions`` a (B, A) tensor or
None; it wants back ``[originals; mirrors]`` along the batch (2B rows, originals first: rsl_rl keeps the first B
rows' distribution for the KL and entropy, and repeats the old log-probs, values, advantages and returns for the
rest). The mirror itself is the task's (:class:`robot_rl.tasks.mirror.TaskMirror`) on the robot's joint mirror
(:func:`robot_rl.robots.joint_mirror.joint_mirror`, derived from the MuJoCo model's joint axes).

A state's mirror image is as likely as the state (the robot, its randomization and the command ranges are
symmetric), so the augmented batch is still the on-policy distribution, seen from both sides; the policy learns a
side shove once and answers it from either side.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from robot_rl.robots.joint_mirror import MirrorError, joint_mirror
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.mirror import TaskMirror, VectorMirror
from robot_rl.tasks.task import TaskCfg

ACTOR_GROUP, CRITIC_GROUP = "policy", "critic"  # robot_rl.learn.ppo's observation groups


def task_mirror(task: TaskCfg, spec: RobotSpec) -> TaskMirror:
    """The mirror of ``task`` on ``spec``: the policy's joints (the spec's policy_joints) and the task's terms."""
    joints = joint_mirror(spec).restricted(spec.policy_joint_names)
    return TaskMirror.build(task.name, task.actor_obs, task.critic_obs, task.commands, joints)


class _TorchMirror:
    def __init__(self, mirror: VectorMirror, device: str | torch.device):
        self.perm = torch.as_tensor(mirror.perm, dtype=torch.long, device=device)
        self.sign = torch.as_tensor(mirror.sign, dtype=torch.float32, device=device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., self.perm] * self.sign.to(x.dtype)


class SymmetryAugmentation:
    """rsl_rl's ``data_augmentation_func``: each batch followed by its mirror image."""

    def __init__(self, mirror: TaskMirror, device: str | torch.device = "cpu"):
        self.groups = {ACTOR_GROUP: _TorchMirror(mirror.actor, device),
                       CRITIC_GROUP: _TorchMirror(mirror.critic, device)}
        self.action = _TorchMirror(mirror.action, device)

    def mirror_obs(self, obs: TensorDict) -> TensorDict:
        unknown = [k for k in obs.keys() if k not in self.groups]  # noqa: SIM118 (a TensorDict iterates its rows)
        if unknown:
            raise MirrorError(f"symmetry augmentation: no mirror for observation group {unknown[0]!r}")
        return TensorDict({k: self.groups[k](v) for k, v in obs.items()}, batch_size=obs.batch_size,
                          device=obs.device)

    def __call__(self, env: Any = None, obs: TensorDict | None = None,
                 actions: torch.Tensor | None = None) -> tuple[TensorDict | None, torch.Tensor | None]:
        obs_aug = None if obs is None else torch.cat([obs, self.mirror_obs(obs)], dim=0)
        actions_aug = None if actions is None else torch.cat([actions, self.action(actions)], dim=0)
        return obs_aug, actions_aug


def symmetry_cfg(task: TaskCfg, spec: RobotSpec, device: str | torch.device) -> dict[str, Any]:
    """The ``algorithm.symmetry_cfg`` entry of rsl_rl's runner configuration (rsl_rl adds ``env``)."""
    return {"use_data_augmentation": True, "use_mirror_loss": False, "mirror_loss_coeff": 0.0,
            "data_augmentation_func": SymmetryAugmentation(task_mirror(task, spec), device)}
