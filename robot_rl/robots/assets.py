"""Find the file a robot's sim model lives in, from ``spec.sim_model`` (source + path).

Nothing here downloads. Models either ship with an installed package (``pybullet_data``), sit next to the
spec (``path``), or come from a MuJoCo Menagerie checkout the user made once (``menagerie``); a missing
checkout is an error that says how to get it.
"""

from __future__ import annotations

import os
from pathlib import Path

from robot_rl.core.errors import RobotRLError
from robot_rl.robots.spec import RobotSpec

MENAGERIE_ENV_VAR = "ROBOT_RL_MENAGERIE_DIR"
DEFAULT_MENAGERIE_DIR = Path("~/.cache/robot_rl/mujoco_menagerie")
MENAGERIE_URL = "https://github.com/google-deepmind/mujoco_menagerie"


class ModelSourceError(RobotRLError, FileNotFoundError):
    """A robot's sim model file cannot be found (or this simulator cannot load it). The message names the
    spec file, the ``sim_model`` keys and what to do."""


class ModelBuildError(RobotRLError, ValueError):
    """A model file does not fit its spec (a missing joint or body, a joint that cannot be locked)."""


def menagerie_dir() -> Path:
    """The MuJoCo Menagerie checkout: ``$ROBOT_RL_MENAGERIE_DIR`` or ~/.cache/robot_rl/mujoco_menagerie."""
    return Path(os.environ.get(MENAGERIE_ENV_VAR) or DEFAULT_MENAGERIE_DIR).expanduser()


def pybullet_data_dir() -> Path:
    try:
        import pybullet_data
    except ImportError:
        raise ModelSourceError(
            "sim_model.source 'pybullet_data' needs the pybullet package: pip install 'robot-rl[sim]'"
        ) from None
    return Path(pybullet_data.getDataPath())


def resolve_model_path(spec: RobotSpec) -> Path:
    """The model file (URDF or MJCF) of ``spec``; raises ModelSourceError if it is not on this machine."""
    sim = spec.sim_model
    where = f"{spec.source_file or spec.name}: sim_model"
    if sim.source == "pybullet_data":
        root = pybullet_data_dir()
    elif sim.source == "path":
        # Relative to the spec file, so a lab's spec directory can carry its own models.
        root = Path(spec.source_file).parent if spec.source_file else Path.cwd()
    else:
        root = menagerie_dir()
        if not root.is_dir():
            raise ModelSourceError(
                f"{where}: source 'menagerie' needs a local MuJoCo Menagerie checkout at {root} (not found). "
                f"Get it once with:  git clone --depth 1 {MENAGERIE_URL} {root}  "
                f"(or point {MENAGERIE_ENV_VAR} at an existing checkout). Models are never downloaded at run time."
            )
    path = (root / sim.path).resolve()
    if not path.is_file():
        hint = (
            f" The Menagerie checkout at {root} may be out of date: git -C {root} pull"
            if sim.source == "menagerie"
            else ""
        )
        raise ModelSourceError(f"{where}.path: {sim.path!r} not found (looked for {path}).{hint}")
    return path


def model_source_missing(spec: RobotSpec) -> str | None:
    """Why ``spec``'s model is not available here (for skipping), or None when it is."""
    try:
        resolve_model_path(spec)
    except ModelSourceError as exc:
        return str(exc)
    return None


__all__ = [
    "DEFAULT_MENAGERIE_DIR",
    "MENAGERIE_ENV_VAR",
    "ModelBuildError",
    "ModelSourceError",
    "menagerie_dir",
    "model_source_missing",
    "pybullet_data_dir",
    "resolve_model_path",
]
