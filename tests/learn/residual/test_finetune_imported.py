"""Residual fine-tuning of policies imported from other trainers (issue 23), on the upstream files in
../shared/external (never copied into the repository; skipped where absent):

- rl_sar's robot_lab Go2 policy (Isaac Lab; imported with ``--allow default-pose``, so its own previous action is
  recurrent state in the file) on the Menagerie Go2;
- Unitree's G1 ``motion.pt`` (LSTM state and a gait clock as recurrent state) on the 29-DoF G1, hung from the gantry
  while it ramps.

The base is loaded, observed and decoded from the file's contract (its terms, scales, history, action scale and
recurrent state), as deploy does; with the residual at zero the fine-tuning loop commands what the deploy loader's
controller does on the same states, and every episode starts the base's recurrent state from zero."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from robot_rl.control.controller import PolicyController
from robot_rl.control.runtime import DeployRuntime
from robot_rl.learn.residual.actor import ResidualPolicy, residual_bound
from robot_rl.learn.residual.config import ResidualCfg, SACCfg
from robot_rl.learn.residual.episodes import EpisodeCfg, EpisodeLoop
from robot_rl.learn.residual.finetune import load_base, make_robot, policy_task, run_finetune
from robot_rl.learn.residual.rewards import StateReward
from robot_rl.learn.residual.settings import FinetuneCfg
from robot_rl.policy.importers.convert import convert
from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.spec import load_robot
from robot_rl.typed_yaml import ConfigError

EXTERNAL = Path(__file__).resolve().parents[3].parent / "shared" / "external"
IMPORTS = {  # robot: (description, task, allowances)
    "go2": ("rl_sar/policy/go2/robot_lab/config.yaml", "go2-flat", ("default-pose",)),
    "g1": ("unitree_rl_gym/deploy/deploy_mujoco/configs/g1.yaml", "g1-flat", ()),
}
TINY = dict(residual=ResidualCfg(hidden=(32, 32)),
            sac=SACCfg(critic_hidden=(32, 32), batch_size=32, utd_ratio=1.0, warmup_transitions=50))


@pytest.fixture(scope="module", params=sorted(IMPORTS))
def imported(request, tmp_path_factory) -> tuple[str, Path]:
    """(robot, the imported file), converted as ``robot-rl import-policy`` does."""
    robot = request.param
    description, task, allow = IMPORTS[robot]
    if not (EXTERNAL / description).is_file():
        pytest.skip(f"upstream policy not present at {EXTERNAL / description} (../shared/external)")
    with pytest.MonkeyPatch.context() as mp:
        menagerie = EXTERNAL / "mujoco_menagerie"
        if robot == "go2" and (menagerie / "unitree_go2" / "go2.xml").is_file():
            mp.setenv("ROBOT_RL_MENAGERIE_DIR", str(menagerie))
        missing = model_source_missing(load_robot(robot))
        if missing:
            pytest.skip(f"model source not on this machine: {missing}")
        out = tmp_path_factory.mktemp(f"imported_{robot}") / f"{robot}.onnx"
        convert(EXTERNAL / description, None, robot, task, out, allow)
        yield robot, out


@pytest.fixture
def with_models(monkeypatch):
    """The robot models found as a user's checkout finds them (the Go2 through ROBOT_RL_MENAGERIE_DIR)."""
    monkeypatch.setenv("ROBOT_RL_MENAGERIE_DIR", str(EXTERNAL / "mujoco_menagerie"))


def test_an_imported_policy_loads_from_its_own_contract_and_is_recurrent(imported, with_models):
    robot, path = imported
    spec = load_robot(robot)
    task = policy_task(path)
    base = load_base(path, spec, task)
    assert base.contract.recurrent is not None  # the Go2's previous action, the G1's LSTM and gait clock
    # The controller builds the file's observation (the robot_lab Go2's 33 values, not go2-flat's 45).
    assert PolicyController.for_task(task, spec, base).obs_dim == base.contract.obs_dim
    # The bound is the task's in joint terms (0.1 × clip 5 × scale 0.25 = 0.125 rad), not a tenth of the file's clip,
    # which binds nothing (rl_sar's ±100, Unitree's none).
    alpha_rad = residual_bound(base.contract, 0.1) * base.contract.action.scale
    assert alpha_rad == pytest.approx(0.1 * task.action.clip * task.action.scale)
    assert base.contract.action.clip * base.contract.action.scale > 10 * alpha_rad / 0.1


def _zero_residual_loop(robot: str, path: Path):
    """The fine-tuning loop as ``run_finetune`` builds it, with a residual that is active and exactly zero."""
    spec = load_robot(robot)
    task = policy_task(path)
    policy = ResidualPolicy(load_base(path, spec, task), ResidualCfg(hidden=(32, 32)))
    policy.load_weights(np.zeros_like(policy.actor.flat))  # tanh(0) = 0: the residual runs, and adds nothing
    runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, policy))
    sim = make_robot(spec, "sim", None, None, None)
    loop = EpisodeLoop(runtime, sim, policy, StateReward(task, spec), EpisodeCfg(length_s=0.6, stand_s=0.2),
                       realtime=False)
    return loop, sim


@pytest.mark.timeout(240)
def test_a_zero_residual_commands_what_deploy_does_and_episodes_reset_the_recurrent_state(imported, with_models):
    robot, path = imported
    loop, sim = _zero_residual_loop(robot, path)
    policy, controller = loop.policy, loop.runtime.controller
    base = policy.base
    ticks = []  # per policy tick: the state, the command, the base's recurrent state before it, what it gave
    base_act = base.act

    def spy(obs):
        before = base.state
        out = base_act(obs)
        ticks.append({"before": before})
        return out

    base.act = spy

    class Recorder:
        def __call__(self, state, command):
            if ticks and "state" not in ticks[-1]:  # this runtime step ran the policy
                ticks[-1].update(state=copy.deepcopy(state), command=controller.last_command.copy(),
                                 first=controller.ticks == 1, obs=controller.last_obs.copy(),
                                 raw=controller.last_raw_action.copy(), active=policy.residual_active,
                                 hung=sim.gantry_engaged)

        def new_segment(self):
            pass

    loop.recorder = Recorder()
    sim.connect()
    try:
        for _ in range(2):
            result = loop.run_episode(np.array([0.5, 0.0, 0.0]), explore=False, learn=False)
            assert result.ended_by == "time_limit", result
    finally:
        sim.close()
    assert all(t["active"] for t in ticks)  # the residual ran on every tick (and added zero)

    starts = [i for i, t in enumerate(ticks) if t["first"]]
    assert len(starts) == 2 and starts[0] == 0  # one arm per episode
    for i in starts:  # every episode starts the base's recurrent state from zero …
        assert all(not s.any() for s in ticks[i]["before"]), i
    # … though the first left it far from zero (the LSTM, the gait clock, the previous action)
    assert any(np.abs(s).max() > 1e-3 for s in ticks[starts[1] - 1]["before"])
    # The G1 ramps on its gantry, hung back before every ramp, and is lowered once the policy drives; a Go2 has none.
    hangs = robot == "g1"
    assert [t["hung"] for t in ticks] == [hangs and t["first"] for t in ticks]

    # The deploy loader's controller, on the same states and commands, reset where deploy arms: the same observation
    # and the same action (the residual's zero added).
    deploy = DeployRuntime.load(robot, path).controller
    for i, t in enumerate(ticks):
        if t["first"]:
            deploy.reset()
        deploy.step(t["state"], t["command"])
        np.testing.assert_allclose(deploy.last_obs, t["obs"], rtol=0, atol=1e-6, err_msg=f"tick {i}")
        np.testing.assert_allclose(deploy.last_raw_action, t["raw"], rtol=1e-6, atol=1e-6, err_msg=f"tick {i}")


@pytest.mark.timeout(300)
def test_an_imported_policy_finetunes_and_writes_its_run(imported, with_models, tmp_path):
    robot, path = imported
    run_dir = tmp_path / "run"
    report = run_finetune(FinetuneCfg.of(path, robot, "sim", transitions=120, run_dir=run_dir, eval_every=0,
                                         eval_episodes=1, train_episode_s=0.6, **TINY),
                          episode_length_s=0.6, log=False)
    assert report.transitions >= 120 and report.learner["state"] == "finished"
    assert report.learner["received"] == report.transitions and report.learner["updates"] > 0
    assert {"checkpoint.pt", "buffer.npz", "policy_residual.onnx", "config.json", "progress.jsonl"} <= {
        p.name for p in run_dir.iterdir()}
    config = json.loads((run_dir / "config.json").read_text())
    assert config["task"] == IMPORTS[robot][1]
    lines = [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]
    assert sum(x["kind"] == "episode" for x in lines) == report.episodes
    assert np.isfinite(report.evaluations[-1]["return"])
    # The composed file keeps the base's contract, recurrent state included, and deploys as the base does.
    runtime = DeployRuntime.load(robot, report.exported)
    composed = runtime.controller.policy
    base = load_base(path, load_robot(robot), policy_task(path))
    assert composed.contract.recurrent == base.contract.recurrent
    assert composed.contract.observation == base.contract.observation
    note = composed.contract.provenance.notes["residual"]
    assert note["alpha_raw"] == pytest.approx(residual_bound(base.contract, 0.1))


def test_a_calibrated_start_of_an_imported_policy_is_refused(imported, with_models, tmp_path):
    """The calibrated start trains its sim residual in the task's vectorized env, which builds the task's
    observation, not the file's: refused with a one-line error before anything runs."""
    from robot_rl.learn.residual.settings import PRESETS

    robot, path = imported
    cfg = PRESETS["calibrated"][0].with_fields(policy=str(path), robot=robot, interface="sim", transitions=10,
                                               run_dir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match="calibrated start trains its sim residual"):
        run_finetune(cfg, export=False, log=False)
    assert not (tmp_path / "run").exists()
