"""The finetune command end to end on the in-process sim (shifted), and its argument errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_rl.learn.residual.config import SAC_LR, ReplayCfg, ResidualCfg, SACCfg, finetune_lr
from robot_rl.learn.residual.finetune import parse_shift, policy_task, run_finetune
from robot_rl.learn.residual.settings import FinetuneCfg
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.tasks.registry import make_task
from robot_rl.typed_yaml import ConfigError

TINY = dict(residual=ResidualCfg(hidden=(32, 32)),
            sac=SACCfg(critic_hidden=(32, 32), batch_size=32, utd_ratio=1.0, warmup_transitions=50))


def test_parse_shift():
    assert parse_shift(None) is None and parse_shift("") is None
    assert parse_shift("kp=0.5, payload=2.5,latency=2") == RealityShift(kp_scale=0.5, payload_kg=2.5, latency_steps=2)
    with pytest.raises(ConfigError, match="KEY one of kp, kd, payload, latency, friction"):
        parse_shift("gain=0.5")
    with pytest.raises(ConfigError, match="'x' is not a number"):
        parse_shift("kp=x")
    with pytest.raises(ConfigError, match="must be > 0"):
        parse_shift("kp=0")


@pytest.mark.parametrize("bad", [
    ["--transitions", "-5"], ["--transitions", "0"], ["--eval-every", "-1"], ["--eval-episodes", "0"],
    ["--seed", "-1"], ["--fifo-priority", "0"], ["--fifo-priority", "100"],
    ["--fraction", "2"], ["--fraction", "0"], ["--fraction", "nan"], ["--utd", "0"], ["--utd", "nan"],
    ["--lr", "0"], ["--lr", "-1e-3"], ["--lr", "nan"], ["--lr", "inf"], ["--actor-warmup", "-1"],
    ["--anchor-penalty", "-1"], ["--anchor-penalty", "nan"], ["--calibrate-chain"]])
def test_bad_settings_on_the_command_line_get_one_line_errors(panda_base, tmp_path, capsys, bad):
    from robot_rl.cli import main

    assert main(["finetune", "--policy", str(panda_base), "--robot", "panda", "--run-dir", str(tmp_path), *bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    if bad[0] != "--calibrate-chain":
        assert bad[0] in err  # the message names the flag
    assert not any(tmp_path.iterdir())  # refused before anything started or was written


@pytest.mark.parametrize("field, value", [("transitions", -5), ("eval_every", -1), ("eval_episodes", 0),
                                          ("seed", -1), ("train_episode_s", 0.0), ("learner_threads", 0)])
def test_bad_run_settings_from_code_are_refused(panda_base, field, value):
    with pytest.raises(ValueError, match=f"--{field.replace('_', '-')} must be"):
        FinetuneCfg.of(panda_base, "panda", "sim", **{field: value})


def test_an_existing_run_dir_is_not_overwritten(panda_base, tmp_path, capsys):
    from robot_rl.cli import main

    (tmp_path / "buffer.npz").write_bytes(b"a previous run's robot transitions")
    assert main(["finetune", "--policy", str(panda_base), "--robot", "panda", "--run-dir", str(tmp_path),
                 "--transitions", "10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and f"--resume {tmp_path}" in err
    assert [p.name for p in tmp_path.iterdir()] == ["buffer.npz"]
    assert (tmp_path / "buffer.npz").read_bytes() == b"a previous run's robot transitions"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        run_finetune(FinetuneCfg.of(panda_base, "panda", "sim", transitions=10, run_dir=tmp_path / "file"))


def test_a_calibrated_start_with_resume_gets_a_one_line_error(panda_base, tmp_path, capsys):
    from robot_rl.cli import main

    args = ["finetune", "calibrated", "--policy", str(panda_base), "--robot", "panda", "--resume", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "not with resume" in err and err.count("\n") == 1 and not any(tmp_path.iterdir())


def test_the_default_learning_rate_is_the_policys_task_measured_one(panda_base):
    assert policy_task(panda_base).name == "panda-reach"
    assert finetune_lr(policy_task(panda_base)) == SAC_LR  # no measured rate: SAC's default
    assert finetune_lr(make_task("a1-flat")) == 1e-3  # the A1 benchmark's rate (benchmarks/results/RESULTS_residual.md)


def test_wrong_robot_and_dds_shift_are_refused(panda_base, tmp_path):
    with pytest.raises(ConfigError, match="trained for task 'panda-reach' on 'panda'"):
        run_finetune(FinetuneCfg.of(panda_base, "a1", "sim", transitions=10, run_dir=tmp_path))
    with pytest.raises(ConfigError, match=r"prior data .* does not exist"):
        run_finetune(FinetuneCfg.of(panda_base, "panda", "sim", transitions=10,
                                    replay=ReplayCfg(prior_path=str(tmp_path / "no.npz")), run_dir=tmp_path))
    with pytest.raises(ConfigError, match=r"no checkpoint\.pt there"):
        run_finetune(FinetuneCfg.of(panda_base, "panda", "sim", transitions=10, resume=str(tmp_path), run_dir=tmp_path))
    with pytest.raises(ConfigError, match=r"--init-from.*no checkpoint\.pt there"):
        run_finetune(FinetuneCfg.of(panda_base, "panda", "sim", transitions=10, init_from=str(tmp_path),
                                    run_dir=tmp_path))
    (tmp_path / "checkpoint.pt").write_bytes(b"x")
    with pytest.raises(ConfigError, match="not both"):
        run_finetune(FinetuneCfg.of(panda_base, "panda", "sim", transitions=10, resume=str(tmp_path),
                                    init_from=str(tmp_path), run_dir=tmp_path))
    with pytest.raises(ConfigError, match="in-process sim only"):
        run_finetune(FinetuneCfg.of(panda_base, "panda", "unitree-dds", transitions=10,
                                    shift=RealityShift(kp_scale=0.5), run_dir=tmp_path / "dds"), export=False)


@pytest.mark.timeout(240)
def test_finetune_runs_checkpoints_exports_and_resumes_with_prior_data(panda_base, tmp_path):
    shift = RealityShift(kp_scale=0.5, payload_kg=2.0, latency_steps=2)
    first = run_finetune(FinetuneCfg.of(panda_base, "panda", "sim", transitions=300, shift=shift,
                                        run_dir=tmp_path / "a", eval_every=200, eval_episodes=2, train_episode_s=0.3,
                                        **TINY), episode_length_s=0.5, log=False)
    assert first.transitions >= 300 and first.learner["state"] == "finished"
    assert first.learner["updates"] >= 0.9 * (first.transitions - 50)  # paced to the update-to-data ratio
    assert 0.9 <= first.utd_achieved <= 1.1  # … and reported as achieved (real time: what the learner kept up with)
    assert first.learner["lost"] == 0 and first.sync["syncs"] > 0
    assert first.evaluations[0]["transitions"] == 0 and first.evaluations[-1]["transitions"] == first.transitions
    assert first.evaluations[0]["weights_version"] > 0  # the first evaluation scores the learner's start, not the base
    assert first.learner["received"] == first.transitions
    lines = [json.loads(x) for x in (tmp_path / "a" / "progress.jsonl").read_text().splitlines()]
    assert sum(x["kind"] == "episode" for x in lines) == first.episodes
    assert first.transitions <= 14 * first.episodes  # 0.3 s training episodes (15 ticks at 50 Hz)
    assert all(e["ticks"] == 25 for e in first.evaluations)  # evaluation keeps the 0.5 s length
    assert {"checkpoint.pt", "buffer.npz", "policy_residual.onnx", "config.json"} <= {
        p.name for p in (tmp_path / "a").iterdir()}
    composed = load_policy(first.exported, read_contract(panda_base))
    assert composed.contract.provenance.notes["residual"]["transitions"] == first.transitions
    # The best-evaluated iterate is exported too, and says which evaluation it was.
    assert first.best == max(first.evaluations, key=lambda e: e["return"])
    best = load_policy(first.exported_best, read_contract(panda_base))
    assert best.contract.provenance.notes["residual"]["selected_at_transitions"] == first.best["transitions"]

    second = run_finetune(FinetuneCfg.of(panda_base, "panda", "sim", transitions=100, shift=shift,
                                         run_dir=tmp_path / "b", resume=str(tmp_path / "a"), eval_every=0,
                                         replay=ReplayCfg(prior_path=str(tmp_path / "a" / "buffer.npz")),
                                         **TINY), episode_length_s=0.5, log=False)
    assert second.learner["prior_transitions"] == first.learner["online_transitions"]
    assert second.learner["online_transitions"] >= first.learner["online_transitions"] + 100
    assert second.learner["updates"] > first.learner["updates"]
    assert np.isfinite(second.evaluations[-1]["return"])
    # Continued in place (--resume DIR --run-dir DIR): allowed, and its buffer carries every transition on.
    third = run_finetune(FinetuneCfg.of(panda_base, "panda", "sim", transitions=50, shift=shift,
                                        run_dir=tmp_path / "b", resume=str(tmp_path / "b" / "checkpoint.pt"),
                                        eval_every=0, **TINY), episode_length_s=0.5, log=False, export=False)
    assert third.learner["online_transitions"] >= second.learner["online_transitions"] + 50


def test_when_later_evaluations_fall_the_start_is_exported_as_the_best(panda_base, tmp_path, monkeypatch):
    """A run whose robot phase makes things worse (as SAC did after a calibrated push start) still ships its start.
    The evaluations are the real ones, their returns lowered by a stand-in in call order (the fall)."""
    import robot_rl.learn.residual.finetune as finetune

    real_evaluate, calls = finetune.evaluate, []

    def falling(loop, setups):
        score = real_evaluate(loop, setups)
        calls.append(score["return"])
        return score | {"return": score["return"] - 1000.0 * len(calls)}

    monkeypatch.setattr(finetune, "evaluate", falling)
    report = run_finetune(FinetuneCfg.of(panda_base, "panda", "sim", transitions=200, shift=RealityShift(kp_scale=0.5),
                                         run_dir=tmp_path, eval_every=100, eval_episodes=1, train_episode_s=0.3,
                                         **TINY), episode_length_s=0.4, log=False)
    assert len(report.evaluations) >= 3 and report.best is report.evaluations[0]
    assert report.best["transitions"] == 0
    obs = np.random.default_rng(1).normal(size=(8, read_contract(panda_base).obs_dim)).astype(np.float32)
    best = load_policy(report.exported_best, read_contract(panda_base))
    last = load_policy(report.exported, read_contract(panda_base))
    assert not np.allclose(best.act_batch(obs), last.act_batch(obs))  # the last iterate is not the one shipped


def test_push_is_refused_over_a_hardware_interface(push_base, tmp_path):
    with pytest.raises(ConfigError, match="in-process sim only"):
        run_finetune(FinetuneCfg.of(push_base, "panda", "unitree-dds", transitions=10, run_dir=tmp_path), export=False)


@pytest.mark.timeout(240)
def test_finetune_on_panda_push_runs_end_to_end(push_base, tmp_path):
    shift = RealityShift(kp_scale=0.5, latency_steps=2, object_friction_scale=1.5)
    report = run_finetune(FinetuneCfg.of(push_base, "panda", "sim", transitions=300, shift=shift, run_dir=tmp_path,
                                         eval_every=200, eval_episodes=2, train_episode_s=0.3,
                                         **TINY), episode_length_s=0.5, log=False)
    assert report.transitions >= 300 and report.learner["state"] == "finished"
    assert report.learner["received"] == report.transitions and report.learner["lost"] == 0
    assert report.reward_terms_dropped == ()  # the sim reports the cube: every push term is computed
    for evaluation in report.evaluations:
        assert evaluation["episodes"] == 2 and 0.0 <= evaluation["success"] <= 1.0
        assert 0.0 < evaluation["final_object_error_m"] < 1.0
    episodes = [json.loads(x) for x in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert sum(e["kind"] == "episode" for e in episodes) == report.episodes >= 12
    assert load_policy(report.exported, read_contract(push_base)).contract.provenance.task == "panda-push"


def test_a_base_that_predicts_action_chunks_is_refused(tmp_path):
    """The residual corrects one action per tick; an ensembled chunk is not that action."""
    import torch

    from robot_rl.policy import collect_provenance, contract_for_task, export_onnx
    from robot_rl.policy.contract import ChunkContract

    contract = contract_for_task(make_task("panda-reach"), provenance=collect_provenance("panda-reach"),
                                 chunk=ChunkContract(3))

    class Chunk(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(contract.obs_dim, 3 * contract.num_actions)

        def forward(self, obs):
            return self.linear(obs).reshape(-1, 3, contract.num_actions)

    export_onnx(Chunk(), None, contract, tmp_path / "chunked.onnx")
    with pytest.raises(ConfigError, match=r"predicts action chunks \(3 per tick\)"):
        run_finetune(FinetuneCfg.of(tmp_path / "chunked.onnx", "panda", "sim", transitions=10, run_dir=tmp_path / "r"))
