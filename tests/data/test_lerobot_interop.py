"""Hugging Face LeRobot (0.4, format v3.0) reads what we write, and the round trip through its writer.

LeRobot pins a torch this project's environment must not have, so it usually lives in another interpreter:
these tests run LeRobot in-process when it is importable, else in ``ROBOT_RL_LEROBOT_PYTHON`` (a python with
lerobot installed) through a subprocess, and skip, saying so, when neither is there (CI's venv).
"""

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from robot_rl.data.lerobot_dataset import Feature, LeRobotDataset, LeRobotDatasetWriter

REPO = Path(__file__).resolve().parents[2]
LEROBOT_PYTHON = os.environ.get("ROBOT_RL_LEROBOT_PYTHON")
IN_PROCESS = find_spec("lerobot") is not None
NO_LEROBOT = ("lerobot is not importable here and ROBOT_RL_LEROBOT_PYTHON is not set (LeRobot pins another torch; "
              "see benchmarks/results/RESULTS_lerobot_roundtrip.md for a venv that has it)")

# Loads the dataset with LeRobot's own class and dumps every frame as LeRobotDataset.__getitem__ returns it.
LOAD_WITH_LEROBOT = """
import json, sys
import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset
root, out = sys.argv[1], sys.argv[2]
ds = LeRobotDataset("local/test", root=root)
frames = [ds[i] for i in range(len(ds))]
dump = {}
for key in ds.meta.features:
    values = [np.asarray(f[key]) for f in frames]
    if ds.meta.features[key]["dtype"] == "image":  # float CHW in [0, 1] → uint8 HWC
        values = [np.round(v * 255).astype(np.uint8).transpose(1, 2, 0) for v in values]
    dump[key] = np.stack(values)
np.savez(out, **dump)
print(json.dumps({"episodes": ds.num_episodes, "frames": ds.num_frames, "tasks": [f["task"] for f in frames[:1]],
                  "quantiles": sorted(k for k in ds.meta.stats["action"] if k.startswith("q"))}))
"""


def _lerobot_python() -> str:
    if IN_PROCESS:
        return sys.executable
    if LEROBOT_PYTHON:
        return LEROBOT_PYTHON
    pytest.skip(NO_LEROBOT)


def _offline_env() -> dict:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}  # nothing may download
    env.pop("PYTHONPATH", None)
    return env


def test_lerobot_loads_a_dataset_we_wrote_with_every_value_equal(tmp_path):
    python = _lerobot_python()
    rng = np.random.default_rng(0)
    features = {"observation.state": Feature("float32", (5,), tuple("abcde")), "action": Feature("float32", (3,)),
                "observation.images.front": Feature("image", (12, 16, 3)), "gripper.closed": Feature("bool", (1,)),
                "grasp.count": Feature("int64", (1,))}
    writer = LeRobotDatasetWriter(tmp_path / "ds", fps=30, features=features, robot_type="panda")
    for length, success in ((7, 4), (5, None)):
        writer.add_episode({"observation.state": rng.standard_normal((length, 5)).astype(np.float32),
                            "action": rng.standard_normal((length, 3)).astype(np.float32),
                            "observation.images.front": rng.integers(0, 256, (length, 12, 16, 3), dtype=np.uint8),
                            "gripper.closed": rng.random(length) > 0.5, "grasp.count": rng.integers(0, 9, length)},
                           "pick the cube", success_frame=success)
    done = subprocess.run([python, "-c", LOAD_WITH_LEROBOT, str(tmp_path / "ds"), str(tmp_path / "dump.npz")],
                          env=_offline_env(), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["episodes"], report["frames"], report["tasks"]) == (2, 12, ["pick the cube"])
    assert report["quantiles"] == ["q01", "q10", "q50", "q90", "q99"]  # quantile normalization (pi0.5) needs them
    dump = np.load(tmp_path / "dump.npz")
    ds = LeRobotDataset(tmp_path / "ds")
    for key in ds.features:  # images (PNG in the Parquet file), bool and int features included
        mine = np.concatenate([ds.episode(e)[key] for e in range(ds.num_episodes)])
        np.testing.assert_array_equal(dump[key].reshape(mine.shape), mine, err_msg=key)


@pytest.mark.skipif(not LEROBOT_PYTHON, reason="set ROBOT_RL_LEROBOT_PYTHON to a python with lerobot 0.4 to run the "
                                               "round trip (LeRobot appends, both reopen)")
def test_round_trip_lerobot_appends_and_both_reopen_with_equal_values(tmp_path):
    """benchmarks/lerobot_roundtrip.py with two demos: every check of it must pass."""
    env = os.environ | {"PYTHONPATH": str(REPO), "ROBOT_RL_LEROBOT_PYTHON": LEROBOT_PYTHON}
    done = subprocess.run([sys.executable, str(REPO / "benchmarks/lerobot_roundtrip.py"), "--episodes", "2",
                           "--work-dir", str(tmp_path)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FAIL" not in done.stdout and "checks passed" in done.stdout
