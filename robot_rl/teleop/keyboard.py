"""Keyboard teleop from a plain terminal (works over SSH and in tmux; no X server, no key-up events).

Bytes → keys (:func:`parse_keys`, pure): printable characters, Enter (``\\r``/``\\n``), Backspace
(``\\x7f``/``\\x08``), Ctrl-C (``\\x03``: raw mode delivers it as a byte, not SIGINT), and ANSI escape
sequences: arrows as CSI (``ESC [ A``) or SS3 (``ESC O A``, application cursor mode); other CSI sequences
(function keys, Ctrl-arrows ``ESC [ 1 ; 5 A``) are consumed and ignored. An incomplete sequence at the end
of a read is kept for the next one; a lone ESC still alone on the next poll is the Escape key.

Keys → command (:class:`KeyboardState`, pure, time passed in). A terminal reports key *presses* and, while
a key is held, the terminal's auto-repeat — never releases. So a motion key is taken as held until its
bytes stop arriving:

- after a first press, for ``initial_hold_s`` (0.55 s) — longer than the usual auto-repeat delay (250–500 ms
  on Linux consoles, GNOME and macOS; X11's default is 660 ms, and there the gap shows as a brief dip);
- after a repeat, for ``repeat_hold_s`` (0.12 s) — several repeat periods (25–33 Hz), enough for SSH jitter;
- then the value ramps to zero over ``decay_s`` (0.15 s) instead of stepping (a softer stop).

So a tap moves for about half a second, and a held key moves until about 0.2 s after it is released.
Pressing the opposite key of an axis takes over that axis at once.

Layout (both meanings at once; legged robots read ``twist``, arms ``ee_delta``; the same keys as
``robot_rl.ros.teleop`` for w/s/a/d/q/e and x):

=========  ==============================  ==========================
key        twist (legged)                  ee_delta (arm)
=========  ==============================  ==========================
w / ↑      forward                         +x (away from the base)
s / ↓      back                            −x
a / d      left / right (strafe)           +y / −y
q / ←      turn left                       +yaw
e / →      turn right                      −yaw
r / f      —                               +z / −z (up / down)
g          gripper: toggle open / closed
Enter      start an episode                y  mark the episode successful
Space      stop the episode and keep it    Backspace  stop and discard it
x          E-STOP                          Ctrl-C  quit
=========  ==============================  ==========================
"""

from __future__ import annotations

import os
import select
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robot_rl.ros.teleop import KEY_ESTOP, KEY_STEPS
from robot_rl.teleop.command import RecorderButtons, TeleopCommand
from robot_rl.teleop.devices import DeviceError

ESC = 0x1B
_SIMPLE = {b"\r": "enter", b"\n": "enter", b" ": "space", b"\x7f": "backspace", b"\x08": "backspace",
           b"\x03": "ctrl-c", b"\t": "tab"}
_CURSOR = {"A": "up", "B": "down", "C": "right", "D": "left", "H": "home", "F": "end"}

# key → (twist field, ee_delta field, sign); None: the key has no meaning in that vector.
MOTION_KEYS: dict[str, tuple[int | None, int | None, int]] = {
    **{key: (field, {0: 0, 1: 1, 2: 5}[field], sign) for key, (field, sign) in KEY_STEPS.items()},
    "up": (0, 0, +1), "down": (0, 0, -1), "left": (2, 5, +1), "right": (2, 5, -1),
    "r": (None, 2, +1), "f": (None, 2, -1),
}
BUTTON_KEYS = {"enter": "start", "space": "stop", "backspace": "discard", "y": "success", KEY_ESTOP: "estop"}
GRIPPER_KEY, QUIT_KEY = "g", "ctrl-c"
HELP = ("w/s a/d q/e (arrows): move  r/f: up/down (arm)  g: gripper  Enter: start episode  y: success  "
        "Space: stop+keep  Backspace: discard  x: E-STOP  Ctrl-C: quit")


def parse_keys(data: bytes) -> tuple[list[str], bytes]:
    """Key names in ``data`` and the unparsed tail (an escape sequence cut off at the end of a read)."""
    keys: list[str] = []
    i, n = 0, len(data)
    while i < n:
        byte = data[i]
        if byte != ESC:
            char = data[i : i + 1]
            if char in _SIMPLE:
                keys.append(_SIMPLE[char])
            elif 0x20 < byte < 0x7F:
                keys.append(char.decode().lower())
            i += 1  # other control bytes are ignored
            continue
        if i + 1 >= n:
            return keys, data[i:]
        kind = data[i + 1]
        if kind == ord("O"):  # SS3: ESC O <final>
            if i + 2 >= n:
                return keys, data[i:]
            keys.append(_CURSOR.get(chr(data[i + 2]), "unknown"))
            i += 3
        elif kind == ord("["):  # CSI: ESC [ <parameters 0x30–0x3F>* <intermediates 0x20–0x2F>* <final 0x40–0x7E>
            j = i + 2
            while j < n and 0x20 <= data[j] <= 0x3F:
                j += 1
            if j >= n:
                return keys, data[i:]
            final = chr(data[j])
            keys.append(_CURSOR.get(final, "unknown") if j == i + 2 else "unknown")
            i = j + 1
        else:  # ESC then an ordinary key: Escape, followed by that key
            keys.append("escape")
            i += 1
    return keys, b""


@dataclass(frozen=True)
class KeyHoldTiming:
    initial_hold_s: float = 0.55
    repeat_hold_s: float = 0.12
    decay_s: float = 0.15


@dataclass
class _Held:
    key: str
    sign: int
    last_s: float
    repeating: bool


class KeyboardState:
    """Held motion keys (per axis), the gripper toggle, and this poll's button edges."""

    def __init__(self, timing: KeyHoldTiming = KeyHoldTiming()) -> None:
        self.timing = timing
        self._twist: dict[int, _Held] = {}
        self._ee: dict[int, _Held] = {}
        self.gripper = 0.0
        self._buttons: set[str] = set()
        self._quit = False

    def press(self, key: str, now: float) -> None:
        if key in MOTION_KEYS:
            twist_field, ee_field, sign = MOTION_KEYS[key]
            for axes, field in ((self._twist, twist_field), (self._ee, ee_field)):
                if field is None:
                    continue
                held = axes.get(field)
                repeat = held is not None and held.key == key and self._value(held, now) > 0.0
                axes[field] = _Held(key, sign, now, repeat)
        elif key in BUTTON_KEYS:
            self._buttons.add(BUTTON_KEYS[key])
        elif key == GRIPPER_KEY:
            self.gripper = 1.0 - self.gripper
        elif key == QUIT_KEY:
            self._quit = True

    def _value(self, held: _Held, now: float) -> float:
        """Magnitude in [0, 1]: 1 while the key counts as held, then a linear ramp down."""
        hold = self.timing.repeat_hold_s if held.repeating else self.timing.initial_hold_s
        late = now - held.last_s - hold
        if late <= 0.0:
            return 1.0
        return max(0.0, 1.0 - late / self.timing.decay_s) if self.timing.decay_s > 0 else 0.0

    def command(self, now: float) -> TeleopCommand:
        """The command at ``now``; button edges and quit are consumed (reported once)."""
        twist, ee = np.zeros(3), np.zeros(6)
        for axes, out in ((self._twist, twist), (self._ee, ee)):
            for field, held in list(axes.items()):
                value = self._value(held, now)
                if value == 0.0:
                    del axes[field]
                out[field] = held.sign * value
        b = self._buttons
        buttons = RecorderButtons(start="start" in b, stop="stop" in b, discard="discard" in b,
                                  success="success" in b, estop="estop" in b)
        command = TeleopCommand(twist=twist, ee_delta=ee, gripper=self.gripper, buttons=buttons,
                                intervention=bool(np.any(twist) or np.any(ee)), quit=self._quit)
        self._buttons = set()
        self._quit = False
        return command


class KeyboardDevice:
    """Reads a terminal (stdin by default) in raw mode; ``close()`` restores the terminal.

    Raw mode here: no line buffering, no echo, no signals from Ctrl-C/Ctrl-Z (they arrive as bytes), no
    XON/XOFF, CR not turned into NL; output processing stays on, so status lines print normally.
    """

    def __init__(self, fd: int | None = None, timing: KeyHoldTiming = KeyHoldTiming(),
                 clock: Callable[[], float] = time.monotonic) -> None:
        import sys

        self.fd = sys.stdin.fileno() if fd is None else fd
        if not os.isatty(self.fd):
            raise DeviceError("keyboard teleop needs a terminal, and stdin is not one: run it in a terminal "
                              "(or tmux / an SSH session), or pick --device gamepad / spacemouse")
        self.state = KeyboardState(timing)
        self.clock = clock
        self._pending = b""
        self._saved = termios.tcgetattr(self.fd)
        attrs = termios.tcgetattr(self.fd)
        attrs[0] &= ~(termios.IXON | termios.ICRNL | termios.INLCR | termios.IGNCR | termios.BRKINT)
        attrs[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN)
        attrs[6][termios.VMIN], attrs[6][termios.VTIME] = 0, 0
        termios.tcsetattr(self.fd, termios.TCSANOW, attrs)

    def _read_available(self) -> bytes:
        chunks = []
        while select.select([self.fd], [], [], 0.0)[0]:
            chunk = os.read(self.fd, 1024)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def poll(self) -> TeleopCommand:
        data = self._read_available()
        now = self.clock()
        if not data and self._pending == b"\x1b":
            self._pending = b""  # still alone a poll later: the Escape key
            self.state.press("escape", now)
        keys, self._pending = parse_keys(self._pending + data)
        for key in keys:
            self.state.press(key, now)
        return self.state.command(now)

    def close(self) -> None:
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None
