"""Upstream policies and models from ../shared/external (never copied into the repository); skipped where absent."""

from __future__ import annotations

from pathlib import Path

import pytest

EXTERNAL = Path(__file__).resolve().parents[3].parent / "shared" / "external"


@pytest.fixture
def external() -> Path:
    if not (EXTERNAL / "rl_sar").is_dir():
        pytest.skip(f"upstream policies not present at {EXTERNAL} (../shared/external)")
    return EXTERNAL


@pytest.fixture
def go2_model(external: Path, monkeypatch) -> Path:
    """The Menagerie Go2, found through ROBOT_RL_MENAGERIE_DIR as a user's checkout would be."""
    menagerie = external / "mujoco_menagerie"
    if not (menagerie / "unitree_go2" / "go2.xml").is_file():
        pytest.skip(f"MuJoCo Menagerie Go2 not present under {menagerie}")
    monkeypatch.setenv("ROBOT_RL_MENAGERIE_DIR", str(menagerie))
    return menagerie
