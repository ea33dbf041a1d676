"""Teleop devices behind one interface: ``poll() -> TeleopCommand`` (never blocks) and ``close()``.

Implementations, each parsing raw bytes through pure functions (tested from recorded events):

- ``keyboard`` — a terminal in raw mode (:mod:`robot_rl.teleop.keyboard`): works over SSH, no X server;
- ``gamepad[:/dev/input/jsN]`` — the Linux joystick API (:mod:`robot_rl.teleop.gamepad`);
- ``spacemouse[:/dev/hidrawN]`` — 3Dconnexion HID reports through hidraw (:mod:`robot_rl.teleop.spacemouse`);
- the scripted expert (:mod:`robot_rl.teleop.scripted_expert`) has the same ``poll()``.

:class:`MergedDevice` drives the robot from one device and takes recorder buttons and quit from the
terminal too, so a gamepad or SpaceMouse user can still mark success or stop from the keyboard.
"""

from __future__ import annotations

import errno
import os
from typing import Protocol, runtime_checkable

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.teleop.command import RecorderButtons, TeleopCommand

DEVICE_NAMES = ("keyboard", "gamepad", "spacemouse")


class DeviceError(RobotRLError, RuntimeError):
    """A teleop device cannot be opened or was lost; the message says which and what to do."""


@runtime_checkable
class Device(Protocol):
    def poll(self) -> TeleopCommand: ...

    def close(self) -> None: ...


def open_nonblocking(path: str, what: str, hint: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise DeviceError(f"no {what} at {path} ({hint})") from None
    except PermissionError:
        raise DeviceError(f"no permission to read the {what} at {path}: add your user to the group owning it "
                          f"(ls -l {path}) or install a udev rule ({hint})") from None


def read_nonblocking(fd: int, path: str, what: str, size: int = 4096, once: bool = False) -> bytes:
    """Everything readable now (``once``: a single read — for hidraw, one report); b"" when nothing is."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, size)
        except BlockingIOError:
            break
        except OSError as exc:
            if exc.errno in (errno.ENODEV, errno.EIO, errno.ENXIO):
                raise DeviceError(f"the {what} at {path} was disconnected") from None
            raise
        if not chunk:
            break
        chunks.append(chunk)
        if once:
            break
    return b"".join(chunks)


def _merge_buttons(a: RecorderButtons, b: RecorderButtons) -> RecorderButtons:
    return RecorderButtons(start=a.start or b.start, stop=a.stop or b.stop, discard=a.discard or b.discard,
                           success=a.success or b.success, estop=a.estop or b.estop)


class MergedDevice:
    """Motion from ``motion``; buttons, E-stop and quit from both ``motion`` and ``buttons``."""

    def __init__(self, motion: Device, buttons: Device) -> None:
        self.motion, self.buttons = motion, buttons

    def poll(self) -> TeleopCommand:
        m, b = self.motion.poll(), self.buttons.poll()
        return TeleopCommand(twist=np.asarray(m.twist), ee_delta=np.asarray(m.ee_delta), gripper=m.gripper,
                             buttons=_merge_buttons(m.buttons, b.buttons), intervention=m.intervention,
                             quit=m.quit or b.quit)

    def close(self) -> None:
        try:
            self.motion.close()
        finally:
            self.buttons.close()


def open_device(spec: str, *, terminal_fd: int | None = None) -> Device:
    """``keyboard``, ``gamepad``, ``spacemouse``, optionally ``:PATH`` (e.g. ``gamepad:/dev/input/js1``).

    A gamepad or SpaceMouse is merged with the terminal's keys when the terminal is a TTY.
    """
    name, _, path = spec.partition(":")
    name = name.strip().lower()
    if name not in DEVICE_NAMES:
        raise DeviceError(f"unknown teleop device {spec!r} (known: {', '.join(DEVICE_NAMES)}; "
                          "gamepad and spacemouse accept :PATH)")
    from robot_rl.teleop.keyboard import KeyboardDevice

    if name == "keyboard":
        if path:
            raise DeviceError(f"the keyboard device takes no path, got {spec!r}")
        return KeyboardDevice(terminal_fd)
    if name == "gamepad":
        from robot_rl.teleop.gamepad import GamepadDevice

        device: Device = GamepadDevice(path or "/dev/input/js0")
    else:
        from robot_rl.teleop.spacemouse import SpaceMouseDevice

        device = SpaceMouseDevice(path or None)
    fd = 0 if terminal_fd is None else terminal_fd
    if os.isatty(fd):
        try:
            return MergedDevice(device, KeyboardDevice(fd))
        except BaseException:
            device.close()
            raise
    return device
