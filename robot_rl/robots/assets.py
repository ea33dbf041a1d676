"""Find the file a robot's sim model lives in, from ``spec.sim_model`` (source + path).

Nothing here downloads. Models either ship with an installed package (``pybullet_data``), sit next to the
spec (``path``), or come from an upstream checkout the user made once: MuJoCo Menagerie (``menagerie``, the
Go2) or Unitree's own simulator, unitree_mujoco (``unitree_mujoco``, the 29-DoF G1). Each checkout is found
through its own environment variable, else under ~/.cache/robot_rl/; a missing checkout is an error that
says how to get it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from robot_rl.core.errors import RobotRLError
from robot_rl.robots.spec import RobotSpec


@dataclass(frozen=True)
class CheckoutSource:
    """An upstream repository of robot models that users clone once; ``sim_model.path`` is relative to it."""

    name: str  # the spec's sim_model.source
    env_var: str
    default_dir: Path
    url: str

    def directory(self) -> Path:
        return Path(os.environ.get(self.env_var) or self.default_dir).expanduser()


MENAGERIE = CheckoutSource("menagerie", "ROBOT_RL_MENAGERIE_DIR", Path("~/.cache/robot_rl/mujoco_menagerie"),
                           "https://github.com/google-deepmind/mujoco_menagerie")
UNITREE_MUJOCO = CheckoutSource("unitree_mujoco", "ROBOT_RL_UNITREE_MUJOCO_DIR",
                                Path("~/.cache/robot_rl/unitree_mujoco"),
                                "https://github.com/unitreerobotics/unitree_mujoco")
CHECKOUT_SOURCES = {s.name: s for s in (MENAGERIE, UNITREE_MUJOCO)}

# Kept for callers of the Menagerie-only API.
MENAGERIE_ENV_VAR = MENAGERIE.env_var
DEFAULT_MENAGERIE_DIR = MENAGERIE.default_dir
MENAGERIE_URL = MENAGERIE.url


class ModelSourceError(RobotRLError, FileNotFoundError):
    """A robot's sim model file cannot be found (or this simulator cannot load it). The message names the
    spec file, the ``sim_model`` keys and what to do."""


class ModelBuildError(RobotRLError, ValueError):
    """A model file does not fit its spec (a missing joint or body, a joint that cannot be locked)."""


def menagerie_dir() -> Path:
    """The MuJoCo Menagerie checkout: ``$ROBOT_RL_MENAGERIE_DIR`` or ~/.cache/robot_rl/mujoco_menagerie."""
    return MENAGERIE.directory()


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
    checkout = CHECKOUT_SOURCES.get(sim.source)
    if sim.source == "pybullet_data":
        root = pybullet_data_dir()
    elif sim.source == "path":
        # Relative to the spec file, so a lab's spec directory can carry its own models.
        root = Path(spec.source_file).parent if spec.source_file else Path.cwd()
    else:
        assert checkout is not None, sim.source  # the spec's Literal type admits no other source
        root = checkout.directory()
        if not root.is_dir():
            raise ModelSourceError(
                f"{where}: source {sim.source!r} needs a local {checkout.url.rsplit('/', 1)[1]} checkout at {root} "
                f"(not found). Get it once with:  git clone --depth 1 {checkout.url} {root}  "
                f"(or point {checkout.env_var} at an existing checkout). Models are never downloaded at run time."
            )
    path = (root / sim.path).resolve()
    if not path.is_file():
        hint = f" The checkout at {root} may be out of date: git -C {root} pull" if checkout is not None else ""
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
    "CHECKOUT_SOURCES",
    "DEFAULT_MENAGERIE_DIR",
    "MENAGERIE",
    "MENAGERIE_ENV_VAR",
    "UNITREE_MUJOCO",
    "CheckoutSource",
    "ModelBuildError",
    "ModelSourceError",
    "menagerie_dir",
    "model_source_missing",
    "pybullet_data_dir",
    "resolve_model_path",
]
