"""FastTD3's settings (Seo et al. 2025, "FastTD3: simple, fast, and capable RL for humanoid control").

The recipe's defaults are those of its MuJoCo Playground joystick configs (Go1: exploration noise per env
drawn in 0.2–0.8, target-policy noise 0.2, γ 0.97, value atoms over ±10) with IsaacLab's locomotion n-step
of 3. What differs is sized for a 2-core CPU, where the recipe's GPU sizes would make one update take seconds:

===============  ============  ==========  =====================================================================
setting          recipe (GPU)  here        why
===============  ============  ==========  =====================================================================
num_envs         1024          128         physics runs on the CPU: 128 A1 envs step in ≈ 5–10 ms
batch_size       32768         2048        an update's cost grows with the batch: 2048 × these critics takes
                                           ≈ 90 ms on one thread (4096 × the recipe's shape halved: 200–550 ms)
critic_hidden    1024-512-256  256-128-64  the critic's multiply-adds are the update's cost (≈ 14 critic passes
                                           per update: target, 2 critics forward + backward, the actor's pass)
actor_hidden     512-256-128   128-64-32   PPO's A1 actor: the same deployed network size as the PPO policy
num_updates      2 (Go1: 8)    2           replay ratio batch · updates / envs = 32 (recipe default 64)
buffer per env   10240         2048        ≈ 200 MB of float32 at 128 envs (this machine has 23 GB, shared)
compile / amp    on (bf16)     off         torch.compile costs minutes on 2 cores; bf16 matmuls are not faster
                                           than float32 on a CPU without AMX
===============  ============  ==========  =====================================================================

On a GPU (``--backend warp --device cuda:N``) a fresh run takes the recipe's sizes instead (``for_device``):
1024 envs, batch 32768, critics 1024-512-256, 10240 transitions per env (≈ 8 GB of replay on the device). The
actor stays 128-64-32, the deployed network PPO's A1 policy has, so the two algorithms' policies are the same
size at the gate. Checkpoints are saved every 1000 iterations there (an iteration is milliseconds on a GPU: 250
would write a few hundred checkpoints in a short race).

Even so the updates take most of an iteration on this machine (``profile.json`` of every run; the numbers:
``benchmarks/results/RESULTS_offpolicy_race.md``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FastTD3Cfg:
    num_envs: int = 128
    batch_size: int = 2048
    buffer_per_env: int = 2048  # transitions kept per env (a ring each; the oldest are overwritten)
    num_updates: int = 2  # critic updates per iteration (one env step of every env)
    policy_frequency: int = 2  # an actor update every this many critic updates (TD3's delayed policy)
    learning_starts: int = 10  # iterations of exploration before the first update
    gamma: float = 0.97
    n_step: int = 3
    tau: float = 0.1  # target critics' Polyak rate per update
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    weight_decay: float = 0.1  # AdamW, both networks
    num_atoms: int = 101
    v_min: float = -10.0
    v_max: float = 10.0
    std_min: float = 0.2  # exploration noise std per env, drawn in [std_min, std_max] at every episode start
    std_max: float = 0.8
    policy_noise: float = 0.2  # target-policy smoothing noise std …
    noise_clip: float = 0.5  # … clipped to ± this
    init_scale: float = 0.01  # std of the actor's last layer at init: a near-zero first action
    # The actor outputs bound · tanh(·) in the task's raw action units: 2.0 with the A1's scale 0.25 is ±0.5 rad
    # around the default pose (the Playground Go1's range); the task's clip (5) still applies after.
    action_bound: float = 2.0
    actor_hidden: tuple[int, ...] = (128, 64, 32)
    critic_hidden: tuple[int, ...] = (256, 128, 64)
    critic_norm: str = "none"  # the recipe's plain critics; "layernorm" as in the residual learner
    max_iterations: int = 1_000_000  # a bound, not a plan: runs are sized with --max-minutes
    save_interval: int = 250  # iterations between checkpoints (≈ 1 min on 2 shared cores: PPO saves about as often)
    log_interval: int = 50  # iterations between TensorBoard points

    def __post_init__(self) -> None:
        for name in ("num_envs", "batch_size", "buffer_per_env", "num_updates", "policy_frequency", "n_step",
                     "num_atoms", "max_iterations", "save_interval", "log_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"fasttd3 {name} must be ≥ 1, got {getattr(self, name)}")
        if not 0.0 < self.gamma < 1.0 or not 0.0 < self.tau <= 1.0:
            raise ValueError(f"fasttd3 gamma must be in (0, 1) and tau in (0, 1], got {self.gamma}, {self.tau}")
        if not self.v_min < self.v_max or self.num_atoms < 2:
            raise ValueError(f"fasttd3 needs v_min < v_max and ≥ 2 atoms, got {self.v_min}, {self.v_max}, "
                             f"{self.num_atoms}")
        if not 0.0 <= self.std_min <= self.std_max or self.action_bound <= 0:
            raise ValueError(f"fasttd3 needs 0 ≤ std_min ≤ std_max and a positive action_bound, got "
                             f"{self.std_min}, {self.std_max}, {self.action_bound}")

    @classmethod
    def for_device(cls, device: str) -> FastTD3Cfg:
        """The defaults for a learner on ``device``: the CPU sizes above, or the recipe's GPU sizes on cuda."""
        if not device.startswith("cuda"):
            return cls()
        return cls(num_envs=1024, batch_size=32768, buffer_per_env=10240, critic_hidden=(1024, 512, 256),
                   save_interval=1000)
