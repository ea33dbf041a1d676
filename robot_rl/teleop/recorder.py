"""Episode recorder for demonstrations: frames in while an episode is open, driven by RecorderButtons.

    writer = LeRobotDatasetWriter(root, fps=50, robot_type="panda",
                                  features=teleop_features(state_names=joints, action_names=joints))
    recorder = EpisodeRecorder(writer, task="push the cube onto the target")
    every tick:  recorder.handle(command.buttons)          # start / success / stop / discard
                 recorder.add_frame({"observation.state": q, "action": q_target}, command)
    at the end:  recorder.close()                          # an open episode is kept (or discarded)

Button semantics, applied in this order within one poll: ``success`` marks the open episode successful
from the current frame on (``next.success`` True from there; the episode's ``success`` column True);
``discard`` ends it and throws it away; ``stop`` ends it and writes it; ``start`` opens a new one when none
is open. An episode is written only when it has at least ``min_frames`` frames (a stray double press
does not make a one-frame episode). ``estop`` is not the recorder's business (the session damps the
robot); an E-stop does not end the episode, the person decides whether to keep it.

Frames are buffered in memory (a teleop episode is minutes at most) and written by the dataset writer when
the episode ends, so a discarded episode never touches the disk. Camera frames may arrive as Futures
(rendered on another thread, see :mod:`robot_rl.teleop.camera`). ``teleop.command`` — the normalized
device command (twist, ee_delta, gripper) — is filled from the TeleopCommand when the features declare it.

MCAP: with a :class:`TeleopLogWriter` (the deploy log writer plus a ``/teleop/command`` channel), every
device command goes to ``/teleop/command`` and every recorder event to ``/safety/events`` as a note, next
to the state and commands the session logs: the raw session, whether or not an episode was open.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_rl.data.lerobot_dataset import Feature, LeRobotDatasetWriter
from robot_rl.data.mcap_log import DeployLogWriter
from robot_rl.teleop.command import RecorderButtons, TeleopCommand

TELEOP_COMMAND = "/teleop/command"
COMMAND_FEATURE = "teleop.command"
COMMAND_NAMES = ("twist.forward", "twist.lateral", "twist.yaw", "ee.x", "ee.y", "ee.z", "ee.roll", "ee.pitch",
                 "ee.yaw", "gripper")
_NUMBERS = {"type": "array", "items": {"type": "number"}}
TELEOP_SCHEMA = {"type": "object", "title": "robot_rl/TeleopCommand", "properties": {
    "t": {"type": "number", "description": "time.monotonic() of the session, s"}, "twist": _NUMBERS,
    "ee_delta": _NUMBERS, "gripper": {"type": "number"}, "intervention": {"type": "boolean"},
    "buttons": {"type": "array", "items": {"type": "string"}}}}


def command_vector(command: TeleopCommand) -> np.ndarray:
    """(10,) float32 in COMMAND_NAMES order."""
    twist = np.asarray(command.twist, dtype=np.float64).reshape(3)
    ee = np.asarray(command.ee_delta, dtype=np.float64).reshape(6)
    return np.concatenate([twist, ee, [command.gripper]]).astype(np.float32)


def pressed(buttons: RecorderButtons) -> list[str]:
    return [name for name in ("start", "stop", "discard", "success", "estop") if getattr(buttons, name)]


def teleop_features(state_names: Sequence[str], action_names: Sequence[str], *, cameras: Mapping[str, tuple[int, int]]
                    | None = None, camera_dtype: str = "image", extra: Mapping[str, Feature] | None = None,
                    with_command: bool = True) -> dict[str, Feature]:
    """The usual demo features: ``observation.state``, ``action``, ``teleop.command``, cameras as
    ``observation.images.<name>`` (``camera_dtype`` "image" or "video"), plus ``extra``."""
    features = {"observation.state": Feature("float32", (len(state_names),), tuple(state_names)),
                "action": Feature("float32", (len(action_names),), tuple(action_names))}
    if with_command:
        features[COMMAND_FEATURE] = Feature("float32", (len(COMMAND_NAMES),), COMMAND_NAMES)
    for name, (height, width) in (cameras or {}).items():
        features[f"observation.images.{name}"] = Feature(camera_dtype, (height, width, 3))
    return features | dict(extra or {})


class TeleopLogWriter(DeployLogWriter):
    """The deploy log (MCAP) plus a ``/teleop/command`` channel for the device's commands."""

    def __init__(self, path: str | Path, **kwargs) -> None:
        super().__init__(path, **kwargs)
        # Registered before anything is queued, so the writer thread has not touched the MCAP writer yet.
        schema_id = self._writer.register_schema(name=TELEOP_SCHEMA["title"], encoding="jsonschema",
                                                 data=json.dumps(TELEOP_SCHEMA, sort_keys=True).encode())
        self._channels[TELEOP_COMMAND] = self._writer.register_channel(topic=TELEOP_COMMAND, message_encoding="json",
                                                                       schema_id=schema_id)
        self._sequence[TELEOP_COMMAND] = 0

    def log_teleop(self, command: TeleopCommand, t: float | None = None) -> bool:
        return self._put(TELEOP_COMMAND, (time.monotonic() if t is None else t, command_vector(command),
                                          bool(command.intervention), tuple(pressed(command.buttons))))

    @staticmethod
    def _message(topic: str, p: tuple) -> dict:
        if topic == TELEOP_COMMAND:
            v = [float(x) for x in p[1]]
            return {"t": p[0], "twist": v[:3], "ee_delta": v[3:9], "gripper": v[9], "intervention": p[2],
                    "buttons": list(p[3])}
        return DeployLogWriter._message(topic, p)


@dataclass(frozen=True)
class RecorderEvent:
    kind: str  # "started", "success", "saved", "discarded", "too_short"
    episode: int | None  # dataset episode index once saved
    frames: int

    def __str__(self) -> str:
        where = f"episode {self.episode}" if self.episode is not None else "episode"
        return f"{where} {self.kind} ({self.frames} frames)"


class EpisodeRecorder:
    """Buffers frames of the open episode; writes kept episodes through a LeRobotDatasetWriter."""

    def __init__(self, writer: LeRobotDatasetWriter, task: str, *, log: DeployLogWriter | None = None,
                 min_frames: int = 2) -> None:
        self.writer, self.task, self.log, self.min_frames = writer, task, log, max(1, int(min_frames))
        self.features = writer.user_features
        self.recording = False
        self.success_frame: int | None = None
        self.saved: list[int] = []
        self.discarded = 0
        self._buffer: dict[str, list[np.ndarray]] = {}

    @property
    def frames(self) -> int:
        return len(next(iter(self._buffer.values()), ()))

    def _event(self, kind: str, episode: int | None = None) -> RecorderEvent:
        event = RecorderEvent(kind, episode, self.frames)
        if self.log is not None:
            self.log.log_event(f"recorder: {event}")
        return event

    def start(self) -> RecorderEvent | None:
        if self.recording:
            return None
        self.recording, self.success_frame = True, None
        self._buffer = {key: [] for key in self.features}
        return self._event("started")

    def mark_success(self) -> RecorderEvent | None:
        if not self.recording or self.success_frame is not None:
            return None
        self.success_frame = max(0, self.frames - 1)
        return self._event("success")

    def discard(self) -> RecorderEvent | None:
        if not self.recording:
            return None
        event = self._event("discarded")
        self.recording, self._buffer = False, {}
        self.discarded += 1
        return event

    def stop(self) -> RecorderEvent | None:
        """End the open episode and write it (unless shorter than ``min_frames``)."""
        if not self.recording:
            return None
        if self.frames < self.min_frames:
            event = self._event("too_short")
            self.recording, self._buffer = False, {}
            self.discarded += 1
            return event
        data = {key: np.stack([v.result() if isinstance(v, Future) else v for v in values])
                for key, values in self._buffer.items()}
        index = self.writer.add_episode(data, self.task, success_frame=self.success_frame)
        self.saved.append(index)
        event = self._event("saved", index)
        self.recording, self._buffer = False, {}
        return event

    def handle(self, buttons: RecorderButtons) -> list[RecorderEvent]:
        """Apply one poll's button edges (success, then discard / stop, then start)."""
        events = []
        if buttons.success:
            events.append(self.mark_success())
        if buttons.discard:
            events.append(self.discard())
        elif buttons.stop:
            events.append(self.stop())
        if buttons.start:
            events.append(self.start())
        return [e for e in events if e is not None]

    def add_frame(self, frame: Mapping[str, np.ndarray], command: TeleopCommand | None = None) -> bool:
        """Append one frame to the open episode (False when none is open). ``frame`` holds every declared
        feature except ``teleop.command``, which comes from ``command``. A value may be a ``Future`` (a
        camera frame still rendering): it is waited for when the episode is written."""
        if not self.recording:
            return False
        values = dict(frame)
        if COMMAND_FEATURE in self.features and COMMAND_FEATURE not in values:
            values[COMMAND_FEATURE] = command_vector(command if command is not None else TeleopCommand())
        missing = set(self.features) - set(values)
        unknown = set(values) - set(self.features)
        if missing or unknown:
            raise ValueError(f"recorder frame: missing {sorted(missing)}, undeclared {sorted(unknown)}")
        for key, value in values.items():
            self._buffer[key].append(value if isinstance(value, Future) else np.array(value, copy=True))
        return True

    def close(self, keep_open_episode: bool = True) -> RecorderEvent | None:
        """End the session: an open episode is written (``keep_open_episode``) or discarded."""
        return self.stop() if keep_open_episode else self.discard()
