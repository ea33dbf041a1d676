"""The in-loop actor: base policy + bounded residual, as a ``Policy`` the unchanged controller runs.

    obs ──► base.act ──► a_b ──┐
     └──────────────┬──────────┴──► residual actor (numpy) ──► r = α · tanh(μ [+ σ·ε])  (|r| ≤ α, NaN → 0)
                    └──────────────────────────────────────────► a = a_b + r

:class:`ResidualPolicy` has the base policy's contract and ``act(obs) -> raw action``, so
:class:`~robot_rl.control.controller.PolicyController` decodes the *sum* (clip, scale, default pose) and the
runtime's safety chain checks and limits it like any policy output: the residual is always upstream of the
safety chain, and the observation's ``last_action`` term sees the action the robot was actually sent (an imported
policy that carries its previous action as recurrent state, :func:`robot_rl.policy.importers.build.state_names`,
sees its own previous output instead: the same in fine-tuning and in the composed file). A recurrent base's state is
the base's own (:meth:`OnnxPolicy.reset <robot_rl.policy.onnx_policy.OnnxPolicy.reset>` at every arm, through
:meth:`ResidualPolicy.reset`); the residual observes the contract's observation and the base's action, not that state.

Bound: α = ``fraction`` × the contract's action clip (an imported policy: see :func:`residual_bound`), per joint,
in raw action units. It holds whatever the
residual network outputs — huge, ±inf or NaN weights included: tanh bounds finite values, a non-finite
residual is replaced by 0 (the base alone) and counted.

Weights: every ``sync_every`` ticks the actor polls the learner's :class:`WeightBoard` (a version read and,
when newer, one ≈ 100–300 kB copy; a torn copy is dropped and retried at the next poll), never waiting. It
also checks the learner's heartbeat: a learner silent for ``learner_timeout_s`` (crashed, killed, stalled)
switches the residual off (the base alone drives) until a fresh heartbeat and new weights arrive.

Interventions (HIL-SERL): when a person overrides, :attr:`override` holds their raw action; ``act`` returns it
instead of the sum, and the transition records the residual that would have produced it,
clip((a_human − a_b)/α, −1, 1) — the part of the correction the residual can express.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from robot_rl.learn.residual.config import ResidualCfg
from robot_rl.learn.residual.networks import NumpyActor
from robot_rl.learn.residual.shared import LearnerStatus, WeightBoard
from robot_rl.policy.contract import IMPORTED_NOTE, PolicyContract
from robot_rl.policy.onnx_policy import Policy


def residual_bound(contract: PolicyContract, fraction: float) -> float:
    """α in raw action units: ``fraction`` of the contract's action clip.

    A policy imported from another trainer (its contract's provenance says so) usually has no clip that binds:
    rl_sar's ±100, Unitree's none (the contract then holds a huge one), so a fraction of it would let the residual
    throw the joints anywhere. Its α is the joint-space bound a policy trained here on the same task gets:
    ``fraction`` × the task's clip × the task's scale (rad), in the file's raw units (÷ its scale), and never
    more than ``fraction`` of the file's own clip."""
    if IMPORTED_NOTE not in contract.provenance.notes or not contract.provenance.task:
        return float(fraction) * float(contract.action.clip)
    from robot_rl.tasks.registry import make_task

    task_action = make_task(contract.provenance.task).action
    joint_range = float(task_action.clip) * float(task_action.scale) / float(contract.action.scale)
    return float(fraction) * min(float(contract.action.clip), joint_range)


class ResidualPolicy:
    """A ``Policy``: the base's contract, ``act`` = base + bounded residual (or a person's override)."""

    def __init__(self, base: Policy, cfg: ResidualCfg, board: WeightBoard | None = None,
                 status: LearnerStatus | None = None, *, explore: bool = False, seed: int = 0):
        self.base = base
        self.contract: PolicyContract = base.contract
        self.cfg = cfg
        self.alpha = residual_bound(self.contract, cfg.fraction)
        j, o = self.contract.num_actions, self.contract.obs_dim
        self.state_dim, self.action_dim = cfg.state_dim(o, j), j
        self.actor = NumpyActor(self.state_dim, j, cfg.hidden)
        self.board, self.status = board, status
        self.explore = explore
        self._rng = np.random.default_rng(seed)
        self._noise = np.zeros(j)
        self._incoming = np.zeros_like(self.actor.flat)
        self.weights_version = 0  # 0: no weights yet → the residual is off
        self.enabled = True  # False: the base alone (e.g. to evaluate the base through the same path)
        self.override: np.ndarray | None = None  # a person's raw action this tick (set by the loop)

        # What the last act() did, for the transition the loop builds (all owned, overwritten per tick).
        # The residual's input: this tick's observation ‖ base action.
        self.state = np.zeros(self.state_dim, np.float32)
        self.base_action = self.state[o : o + j]
        self.unit_residual = np.zeros(j, np.float32)  # in [−1, 1]: the learner's action
        self.action = np.zeros(j, np.float32)  # what act() returned
        self.residual_active = False
        self.intervened = False

        self.ticks = 0
        self.stats = {"syncs": 0, "torn_reads": 0, "fallback_ticks": 0, "nonfinite_residuals": 0,
                      "sync_max_s": 0.0, "sync_total_s": 0.0, "polls": 0}
        self._learner_ok = status is None  # no learner attached: weights are loaded by hand (export, eval)
        self._hold = False  # holding_weights(): no syncs (one iterate is being scored)

    # -- weights -----------------------------------------------------------------------------------------
    def load_weights(self, flat: np.ndarray, version: int = 1) -> None:
        """Set the residual's weights directly (evaluation, export): no learner needed."""
        self.actor.load(np.asarray(flat, dtype=np.float32))
        self.weights_version = version

    def detach(self, flat: np.ndarray, version: int) -> None:
        """Stop following a learner; keep ``flat`` as the residual (final evaluation, export)."""
        self.board, self.status = None, None
        self._learner_ok = True
        self.load_weights(flat, version)

    @contextlib.contextmanager
    def holding_weights(self):
        """Sync to the learner's latest weights, then none inside: an evaluation scores that one iterate (before a
        policy tick the actor may not have polled yet, e.g. the first evaluation scoring a run's start). The
        learner's health is still watched every ``sync_every`` ticks: a dead learner still turns the residual off."""
        self._poll()
        self._hold = True
        try:
            yield
        finally:
            self._hold = False

    def _poll(self) -> None:
        t0 = time.perf_counter()
        self.stats["polls"] += 1
        if self.status is not None:
            fresh = self.status.heartbeat_age() <= self.cfg.learner_timeout_s
            self._learner_ok = fresh and self.status.state in (LearnerStatus.STARTING, LearnerStatus.RUNNING)
        if self.board is not None and self._learner_ok and not self._hold:
            version = self.board.poll(self.weights_version, self._incoming)
            if version is not None:
                self.actor.load(self._incoming)
                self.weights_version = version
                self.stats["syncs"] += 1
            elif self.board.version not in (self.weights_version, 0) and self.board.version % 2 == 0:
                self.stats["torn_reads"] += 1
        dt = time.perf_counter() - t0
        self.stats["sync_total_s"] += dt
        self.stats["sync_max_s"] = max(self.stats["sync_max_s"], dt)

    # -- Policy ------------------------------------------------------------------------------------------
    def reset(self) -> None:
        """The controller calls it whenever the policy starts driving (every arm, so every episode): the base's
        recurrent state, if it has one, starts from zero as in deploy and as the base was trained."""
        reset_base = getattr(self.base, "reset", None)
        if reset_base is not None:
            reset_base()

    def act(self, obs: np.ndarray) -> np.ndarray:
        base = self.base.act(obs)
        self.state[: self.contract.obs_dim] = obs[0]
        self.base_action[:] = base
        if self.ticks % self.cfg.sync_every == 0:
            self._poll()
        self.ticks += 1

        self.residual_active = self.enabled and self._learner_ok and self.weights_version > 0
        if self.residual_active:
            self.actor.forward(self.state)
            pre = self.actor.mean
            if self.explore:
                self._rng.standard_normal(out=self._noise)
                pre = pre + np.exp(self.actor.log_std) * self._noise
            np.tanh(pre, out=self.unit_residual)
            if not np.isfinite(self.unit_residual).all():
                self.stats["nonfinite_residuals"] += 1
                self.unit_residual[~np.isfinite(self.unit_residual)] = 0.0
            np.clip(self.unit_residual, -1.0, 1.0, out=self.unit_residual)  # tanh can round to ±1, never past
        else:
            self.unit_residual.fill(0.0)
            if self.enabled and self.weights_version > 0:
                self.stats["fallback_ticks"] += 1

        self.intervened = self.override is not None
        if self.intervened:
            human = np.asarray(self.override, dtype=np.float32)
            self.action[:] = human
            np.clip((human - self.base_action) / self.alpha, -1.0, 1.0, out=self.unit_residual)
            self.unit_residual[~np.isfinite(self.unit_residual)] = 0.0
        else:
            np.multiply(self.unit_residual, self.alpha, out=self.action)
            self.action += self.base_action
        return self.action

    def act_batch(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic base + residual for (N, obs_dim) observations (evaluation; no sync, no override)."""
        base = np.asarray(self.base.act_batch(obs), dtype=np.float32)
        out = np.empty_like(base)
        for i in range(len(obs)):
            self.actor.forward(np.concatenate([obs[i], base[i]]))
            r = np.tanh(self.actor.mean) if self.weights_version > 0 and self.enabled else np.zeros(self.action_dim)
            out[i] = base[i] + self.alpha * np.nan_to_num(r, nan=0.0, posinf=0.0, neginf=0.0)
        return out

    def sync_summary(self) -> dict[str, float]:
        s = dict(self.stats)
        s["sync_mean_s"] = s["sync_total_s"] / max(s["polls"], 1)
        s["weights_version"] = self.weights_version
        return s
