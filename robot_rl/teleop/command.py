"""What every teleop device produces: a normalized command plus the recorder's control buttons.

Devices (keyboard, gamepad, SpaceMouse, a scripted expert) differ only in how they fill this in. Legged
robots read ``twist`` (fed to the walking policy as its velocity command, scaled by the task's command
ranges); arms read ``ee_delta`` and ``gripper`` (turned into joint targets by differential IK).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class RecorderButtons:
    """Edges, not levels: True only in the sample where the key/button went down."""

    start: bool = False  # start recording an episode
    stop: bool = False  # end the episode and keep it
    discard: bool = False  # end the episode and throw it away
    success: bool = False  # mark the current episode successful
    estop: bool = False  # emergency stop: the runtime damps at once


@dataclass(frozen=True)
class TeleopCommand:
    # Legged: (forward, lateral, yaw) each in [-1, 1]; scaled to the policy's command ranges downstream.
    twist: np.ndarray = field(default_factory=lambda: np.zeros(3))
    # Arm: end-effector translation (x, y, z) and rotation (roll, pitch, yaw) rates, each in [-1, 1], base frame.
    ee_delta: np.ndarray = field(default_factory=lambda: np.zeros(6))
    gripper: float = 0.0  # 0 open … 1 closed
    buttons: RecorderButtons = field(default_factory=RecorderButtons)
    intervention: bool = False  # a person is overriding the policy right now (HIL-SERL style)
    quit: bool = False  # the person asked to end the session (Ctrl-C in a raw-mode terminal)
