"""Fixtures shared across the test tree."""

from __future__ import annotations

import os

import pytest

from robot_rl.robots.assets import MENAGERIE, UNITREE_MUJOCO
from robot_rl.robots.spec import REPO_ROOT

# Upstream robot models that CI (and the developers' machines) hold next to the repository, never in it
# (../shared/external/README.md). A user's own checkout, named by the environment variable, wins.
SHARED_EXTERNAL = REPO_ROOT.parent / "shared" / "external"
SHARED_CHECKOUTS = {MENAGERIE: SHARED_EXTERNAL / "mujoco_menagerie", UNITREE_MUJOCO: SHARED_EXTERNAL / "unitree_mujoco"}


def pytest_configure(config) -> None:
    # Set for the whole session (subprocesses such as the bridge and deploy tests inherit it); tests that need a
    # model skip with the resolver's reason when it is absent.
    for source, directory in SHARED_CHECKOUTS.items():
        if directory.is_dir() and not os.environ.get(source.env_var):
            os.environ[source.env_var] = str(directory)


@pytest.fixture
def pybullet_client():
    """A fresh PyBullet DIRECT client (no GUI), disconnected after the test."""
    import pybullet as pb

    client = pb.connect(pb.DIRECT)
    yield client
    pb.disconnect(client)


@pytest.fixture(scope="session")
def spec_or_skip():
    """``spec_or_skip(name)``: the robot's spec, or skip the calling test where its model source (a Menagerie or
    unitree_mujoco checkout, ../shared/external in CI) is not on this machine."""
    from robot_rl.robots.assets import model_source_missing
    from robot_rl.robots.spec import RobotSpec, load_robot

    def load(name: str) -> RobotSpec:
        spec = load_robot(name)
        missing = model_source_missing(spec)
        if missing:
            pytest.skip(f"model source not on this machine: {missing}")
        return spec

    return load
