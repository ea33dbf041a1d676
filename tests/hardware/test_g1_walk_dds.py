"""The G1 walks over loopback DDS in two processes, as on the robot: ``robot-rl bridge --robot g1`` (Unitree's
29-DoF model behind unitree_hg, hanging from its gantry until the policy takes over) and ``robot-rl deploy --robot
g1 --interface unitree-dds`` with Unitree's pretrained legs-only G1 policy, imported into this test's tmp dir.

Checked on the bridge's side of the wire: this process reads every rt/lowcmd the bridge gets and decodes it with
the bridge's own decoder (CRC, the 29 motors); every one echoes the mode_machine the bridge reports (5, as the
29-DoF G1) with mode_pr 0 and leaves the 6 slots that drive no motor disabled, and while the policy drives every
one holds the 17 waist and arm motors at their default pose with their spec gains.
The bridge's status (sim ground truth the deploy never sees) says the gantry let go and how far the pelvis went:
at least 1 m forward in 10 s, without a fall. The spec's own gains (Unitree's deploy values, waist kp 300) are
used: the policy needs no stiffer waist to walk (docs/deploy.md, "Humanoids: the gantry").
Needs ../shared/external (Unitree's model and policy); skipped where absent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_rl.dds import unitree_hg as hg
from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.spec import load_robot

EXTERNAL = Path(__file__).resolve().parents[2].parent / "shared" / "external"
UNITREE_CONFIG = EXTERNAL / "unitree_rl_gym" / "deploy" / "deploy_mujoco" / "configs" / "g1.yaml"
G1 = load_robot("g1")
WALK_S = 10.0
MODE_MACHINE = 5  # the 29-DoF G1's variant code: the bridge drops a command that does not echo it


def test_deploy_walks_the_g1_over_dds_with_every_non_policy_motor_held(walk_over_dds, tmp_path) -> None:
    if not UNITREE_CONFIG.is_file():
        pytest.skip(f"Unitree's G1 policy not present under {EXTERNAL} (../shared/external)")
    missing = model_source_missing(G1)
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")
    pytest.importorskip("torch")  # the importer reads the TorchScript archive
    from robot_rl.policy.importers.convert import convert

    policy = tmp_path / "unitree_g1.onnx"
    convert(UNITREE_CONFIG, None, "g1", "g1-flat", policy, ())
    run = walk_over_dds(G1, policy, vx=0.5, walk_s=WALK_S, bridge_args=("--mode-machine", str(MODE_MACHINE)))
    assert run.first_status.gantry_engaged == 1 and not run.first_status.command_active, run.first_status
    assert run.returncode == 0, f"deploy exited {run.returncode}\n{run.out}\n{run.err}"
    assert run.tap.bad == 0

    # The policy's window, on the wire: every LowCmd holds the 17 non-policy motors and drives the 12 legs.
    ramp_s = G1.safety.ramp_duration_s
    walking, armed, last = run.policy_window(ramp_s)
    t, q, kp, kd, unused_modes, _, modes = run.tap.columns()
    assert (modes == (MODE_MACHINE, hg.MODE_PR)).all(), np.unique(modes, axis=0)
    assert walking.sum() > 50 * WALK_S, f"{walking.sum()} LowCmds while the policy drove"
    held = np.flatnonzero(~np.isin(G1.joint_names, G1.policy_joints))
    assert held.size == 17 and (held == np.arange(12, 29)).all(), held
    np.testing.assert_array_equal(q[walking][:, held], np.tile(G1.default_positions[held].astype(np.float32),
                                                               (walking.sum(), 1)))
    np.testing.assert_array_equal(kp[walking], np.tile(G1.kp.astype(np.float32), (walking.sum(), 1)))
    np.testing.assert_array_equal(kd[walking], np.tile(G1.kd.astype(np.float32), (walking.sum(), 1)))
    assert unused_modes.shape[1] == 6 and (unused_modes == hg.MOTOR_DISABLE).all()  # slots 29–34 drive nothing
    legs_moved = np.abs(q[walking][:, :12] - G1.default_positions[:12]).max()
    assert legs_moved > 0.1, f"the legs never left their default pose ({legs_moved:.3f} rad): no policy drove"

    # Sim ground truth: the gantry let go at the handover, then the pelvis walked off without falling.
    assert run.statuses[-1].commands_rejected == 0 and run.statuses[-1].commands_bad_crc == 0, run.statuses[-1]
    released = [s for s in run.statuses if s.command_active and not s.gantry_engaged]
    assert released, "the gantry was never released"
    assert abs(run.status_time(released[0]) - (armed + ramp_s)) < 0.3, (run.status_time(released[0]) - armed, ramp_s)
    free = [s for s in released if run.status_time(s) <= t[last]]
    assert min(s.base_height_m for s in free) > 0.6 * G1.sim_model.base_height, "the G1 fell"
    forward = free[-1].base_x_m - free[0].base_x_m  # the gantry held it facing +x until the handover
    assert forward >= 1.0, f"walked {forward:.2f} m forward in {WALK_S:g} s"
