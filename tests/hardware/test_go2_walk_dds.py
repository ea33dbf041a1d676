"""The Go2 walks over loopback DDS in two processes, as on the robot: ``robot-rl bridge --robot go2`` (the
Menagerie Go2 behind unitree_go, passive until the first command, so it sags onto the floor as a robot in
zero-torque mode does) and ``robot-rl deploy --robot go2 --interface unitree-dds`` with the robot_lab Go2 policy
(Isaac Lab, as rl_sar deploys it), imported into this test's tmp dir.

Checked on the bridge's side of the wire: every rt/lowcmd the bridge gets, decoded with the bridge's own decoder
(CRC, the 12 leg motors in servo mode); while the policy drives each carries the spec's gains on all 12 motors,
and the 8 slots of unitree_go's LowCmd that drive no motor stay as the SDK leaves them (servo mode, the stop
sentinels, kp = kd = tau = 0: passive). The bridge's status (sim ground truth the deploy never sees): at least
1 m forward in 10 s, without a fall. Needs ../shared/external (the Menagerie Go2 and rl_sar's policy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_rl.dds import unitree_go as go
from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.spec import load_robot

EXTERNAL = Path(__file__).resolve().parents[2].parent / "shared" / "external"
ROBOT_LAB_CONFIG = EXTERNAL / "rl_sar" / "policy" / "go2" / "robot_lab" / "config.yaml"
GO2 = load_robot("go2")
WALK_S = 10.0


def test_deploy_walks_the_go2_over_dds(walk_over_dds, tmp_path) -> None:
    if not ROBOT_LAB_CONFIG.is_file():
        pytest.skip(f"rl_sar's robot_lab Go2 policy not present under {EXTERNAL} (../shared/external)")
    missing = model_source_missing(GO2)
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")
    pytest.importorskip("torch")  # the importer reads the TorchScript archive
    from robot_rl.policy.importers.convert import convert

    policy = tmp_path / "go2_robot_lab.onnx"
    # Trained with the hips at 0 where the spec's default pose has ±0.1 (docs/import_policies.md).
    convert(ROBOT_LAB_CONFIG, None, "go2", "go2-flat", policy, ("default-pose",))
    run = walk_over_dds(GO2, policy, vx=0.5, walk_s=WALK_S)
    assert not run.first_status.command_active and not run.first_status.gantry_engaged, run.first_status
    assert run.returncode == 0, f"deploy exited {run.returncode}\n{run.out}\n{run.err}"
    assert run.tap.bad == 0

    ramp_s = GO2.safety.ramp_duration_s
    walking, _, last = run.policy_window(ramp_s)
    t, q, kp, kd, unused_modes, unused, _ = run.tap.columns()
    assert walking.sum() > 50 * WALK_S, f"{walking.sum()} LowCmds while the policy drove"
    np.testing.assert_array_equal(kp[walking], np.tile(GO2.kp.astype(np.float32), (walking.sum(), 1)))
    np.testing.assert_array_equal(kd[walking], np.tile(GO2.kd.astype(np.float32), (walking.sum(), 1)))
    moved = np.abs(q[walking] - GO2.default_positions).max()
    assert moved > 0.1, f"the legs never left their default pose ({moved:.3f} rad): no policy drove"
    # Every frame, not only the policy's: the 8 spare slots never drive anything.
    assert unused_modes.shape[1] == 8 and (unused_modes == go.MOTOR_MODE_SERVO).all()
    sentinels = np.array([go.POS_STOP_F, go.VEL_STOP_F], dtype=np.float32).astype(np.float64)[:, None]
    assert (unused[:, :2] == sentinels).all() and (unused[:, 2:] == 0.0).all()

    # Sim ground truth while the policy drove: no fall, and the base walked off along +x (it lay facing +x).
    assert run.statuses[-1].commands_rejected == 0 and run.statuses[-1].commands_bad_crc == 0, run.statuses[-1]
    driven = [s for s in run.statuses
              if s.command_active and t[walking][0] <= run.status_time(s) <= t[last]]
    assert len(driven) > 5 * WALK_S, f"{len(driven)} bridge statuses while the policy drove"
    assert min(s.base_height_m for s in driven) > 0.5 * GO2.sim_model.base_height, "the Go2 fell"
    forward = driven[-1].base_x_m - driven[0].base_x_m
    assert forward >= 1.0, f"walked {forward:.2f} m forward in {WALK_S:g} s"
