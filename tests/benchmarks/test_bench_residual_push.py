"""The push benchmark's continued-PPO phase: the BC network trained on in the shifted vectorized env, scored by the
same harness as every other method, every transition counted (the critic warm-up's too)."""

from __future__ import annotations

import pytest

from robot_rl.learn.bc import train_bc
from robot_rl.learn.demos import collect_demos
from robot_rl.learn.residual.scenes import eval_setups
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.tasks.registry import make_task


@pytest.mark.timeout(300)
def test_continued_ppo_starts_at_the_base_and_counts_every_transition(benchmark_module, tmp_path):
    bench = benchmark_module("bench_residual_push")
    collect_demos("panda-push", episodes=2, out_dir=str(tmp_path / "demos"), seed=4, progress=False)
    train_bc(str(tmp_path / "demos"), out=str(tmp_path / "bc"), epochs=2, seed=0)
    base = tmp_path / "bc" / "policy.onnx"
    task, shift = make_task("panda-push"), RealityShift(kp_scale=0.5, latency_steps=1)
    setups = eval_setups(task, 2)
    per_iter = 4 * task.ppo.num_steps_per_env
    curve = bench.continued_bc_ppo(base, shift, setups, [2 * per_iter], nominal=0.5, real=0.0, init_std=0.05,
                                   critic_warmup=1, stop_at=1.0, budget_s=600, learning_rate=1e-4,
                                   schedule="fixed", export_dir=tmp_path / "ppo", seed=0, num_envs=4)
    start = bench.evaluate_base(base, shift, setups)
    assert [c["transitions"] for c in curve] == [0, 2 * per_iter]  # the warm-up iteration counted
    assert curve[0]["return"] == pytest.approx(start["return"], abs=1e-4)  # untrained: the base, same harness
    assert curve[0]["success"] == start["success"]
    for c in curve:
        policy = load_policy(c["onnx"], read_contract(base))  # each scored iterate ships with the BC's contract
        assert policy.contract.provenance.notes["transitions"] == c["transitions"]

    # The report draws the curve next to the base (a page redrawn from the results store).
    report = benchmark_module("residual_push_report")
    results = {"base_nominal": bench.evaluate_base(base, None, setups), "base_real": start, "eval_episodes": 2,
               "eval_seed": 0, "shift_text": shift.describe(), "ppo": curve,
               "ppo_run": {"num_envs": 4, "init_std": 0.05, "critic_warmup": 1, "learning_rate": 1e-4,
                           "schedule": "fixed", "seed": 0}}
    text = report.section(results, tmp_path / "push.png")
    assert f"| continued PPO on the full BC network, {2 * per_iter:,} transitions |" in text
    assert "Run `ppo`: rsl_rl PPO on the BC network's own weights" in text
    report.plot(results, tmp_path / "push.png")
    assert (tmp_path / "push.png").stat().st_size > 10_000
