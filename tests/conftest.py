"""Fixtures shared across the test tree."""

from __future__ import annotations

import pytest


@pytest.fixture
def pybullet_client():
    """A fresh PyBullet DIRECT client (no GUI), disconnected after the test."""
    import pybullet as pb

    client = pb.connect(pb.DIRECT)
    yield client
    pb.disconnect(client)
