"""Deterministic evaluation episodes of a residual run: the fixed, seeded command sets and the summary of a set
of episodes (return, tracking errors, falls, success). Shared by ``robot-rl finetune`` and the benchmarks, so
every method is scored by one harness."""

from __future__ import annotations

import numpy as np

from robot_rl.learn.residual.episodes import EpisodeLoop, EpisodeResult
from robot_rl.learn.residual.scenes import EVAL_SEED, EpisodeSetup, eval_setups


def eval_commands(task, n: int, seed: int = EVAL_SEED) -> np.ndarray:
    """The commands of :func:`eval_setups`' fixed, seeded set, as one array (tasks without scenes)."""
    return np.array([setup.command for setup in eval_setups(task, n, seed)])


def summarize(results: list[EpisodeResult], dt: float = 0.02, success_m: float = 0.02) -> dict:
    """Means over episodes. ``dt``: policy period; ``success_m``: the reach task's tolerance."""
    out = {"episodes": len(results), "return": float(np.mean([r.episode_return for r in results])),
           "ticks": float(np.mean([r.ticks for r in results])),
           "ended_by": {k: sum(r.ended_by == k for r in results) for k in {r.ended_by for r in results}}}
    pushed = [r for r in results if r.final_object_error_m is not None]
    if pushed:  # push: the task's success criterion at the end, and how far off the cube ended
        out["success"] = float(np.mean([bool(r.success) for r in pushed]))
        out["final_object_error_m"] = float(np.mean([r.final_object_error_m for r in pushed]))
        out["safety_events"] = int(sum(r.safety_events for r in results))
    vel = [r.vel_error_m_s for r in results if r.vel_error_m_s is not None]
    if vel:
        out["vel_error_m_s"] = float(np.mean(vel))
        out["falls"] = sum(r.ended_by == "failure" for r in results)
    tails = [r.tail_tip_error_m for r in results if r.tail_tip_error_m is not None]
    if tails:
        out["tail_tip_error_m"] = float(np.mean(tails))
        out["final_tip_error_m"] = float(np.mean([r.final_tip_error_m for r in results]))
        # after the first second: how fast it gets there and how well it holds, not the distance it started at
        out["settled_tip_error_m"] = float(np.mean([np.mean(r.tip_errors[round(1.0 / dt):] or r.tip_errors)
                                                    for r in results]))
        out["success"] = float(np.mean([r.final_tip_error_m < success_m for r in results]))
    return out


def evaluate(loop: EpisodeLoop, episodes: np.ndarray | list[EpisodeSetup]) -> dict:
    """Deterministic episodes (no exploration, nothing sent to the learner) over ``episodes``: commands, or
    :class:`EpisodeSetup` (push tasks: with their scenes)."""
    setups = [e if isinstance(e, EpisodeSetup) else EpisodeSetup(np.asarray(e)) for e in episodes]
    return summarize([loop.run_episode(e.command, explore=False, learn=False, scene=e.scene) for e in setups],
                     loop.period, loop.reward.task.terms.tool_target_m or 0.0)


def selection_key(task, score: dict) -> tuple[float, ...]:
    """How evaluations of one run rank (larger is better): push tasks by the task's success rate, then return;
    the others by the episode return, the objective their base was trained on."""
    return (score["success"], score["return"]) if task.terms.state_success else (score["return"],)
