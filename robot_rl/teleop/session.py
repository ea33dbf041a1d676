"""``robot-rl teleop``: drive a simulated robot from a keyboard, gamepad or SpaceMouse, and record demos.

    robot-rl teleop --robot panda --device keyboard --record demos/push_teleop
    robot-rl teleop --robot a1 --device gamepad

The robot is a ``SimRobot`` behind the deploy runtime (state machine + safety chain), as in every other
place a controller runs: it ramps to the default pose (the arm's ramp takes 3 s) and then follows the device.

- Arms: the device's ``ee_delta`` drives ``ArmTeleopController`` (differential IK, ``robot_rl.teleop.arm_ik``)
  under a task (default: ``panda-push``, with its table and cube). Recorded features are exactly what the
  scripted-expert demos and BC use (``robot_rl.tasks.task_observation``): ``observation.state`` = the task's
  actor observation, ``observation.environment_state`` = cube position and goal, ``action`` = the controller's
  action in the task's action space, plus ``teleop.command`` (the device command). After an episode is
  saved or discarded the scene resets (new cube and goal) and the arm ramps home again.
- Legged robots: the device's ``twist`` is scaled into the walking policy's command ranges
  (``policies/<robot>_flat/policy.onnx`` when present, or ``--policy``); without a policy the robot
  ramps to and holds its default pose. Recorded: joint positions, velocities, IMU, joint targets sent.

Timing: one tick per policy period on fixed deadlines (``RateLoop``, no spinning). The simulated robot
advances one period per tick (lockstep, paced to wall time), so a late tick delays the simulation rather
than leaving a robot unattended: missed deadlines are counted in the log, not turned into faults.
Frames are recorded on RUNNING ticks only, every ``policy rate / fps`` ticks.

Files: the dataset (LeRobotDataset v3.0) in ``--record DIR``; the raw session (state, commands before and
after the safety chain, safety events, loop timing, device commands, recorder events) in an MCAP file,
``DIR/raw/teleop-<time>.mcap`` unless ``--log`` says otherwise.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from robot_rl.core.errors import RobotRLError
from robot_rl.core.types import RobotState
from robot_rl.core.validate import non_negative, positive
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.teleop.command import TeleopCommand
from robot_rl.teleop.devices import Device, DeviceError, open_device

ARM_DEFAULT_TASK = {"panda": "panda-push"}
SIMULATORS = ("mujoco", "pybullet")
STATUS_PERIOD_S = 0.25


class TeleopError(RobotRLError, ValueError):
    """Bad teleop arguments (robot, task, fps, paths); the message names the argument."""


def scale_twist(twist: np.ndarray, ranges: tuple[tuple[float, float], ...]) -> np.ndarray:
    """Normalized twist (each in [−1, 1]) → command: +1 → the range's high end, −1 → its low end, 0 → 0
    (ranges around zero), or linearly onto [low, high] for a range that excludes zero."""
    out = np.zeros(len(ranges))
    for i, (low, high) in enumerate(ranges):
        value = float(np.clip(twist[i], -1.0, 1.0)) if i < len(twist) else 0.0
        if low <= 0.0 <= high:
            out[i] = value * (high if value >= 0 else -low)
        else:
            out[i] = low + (value + 1.0) * 0.5 * (high - low)
    return out


def _legged_policy(spec: RobotSpec, policy: str | None) -> Path | None:
    if policy is not None:
        if not Path(policy).is_file():
            raise TeleopError(f"--policy {policy}: no such file")
        return Path(policy)
    default = Path("policies") / f"{spec.name}_flat" / "policy.onnx"
    return default if default.is_file() else None


class TeleopSession:
    """One teleop run; see the module docstring. ``run()`` returns the exit code."""

    def __init__(self, spec: RobotSpec, device: Device, *, sim: str, fps: int, record: str | Path | None,
                 log: str | Path | None, task: str | None, camera: bool, policy: str | None, seed: int,
                 out=sys.stdout, overwrite: bool = False) -> None:
        self.spec, self.device, self.sim, self.out = spec, device, sim, out
        record, log = (None if p is None else Path(p) for p in (record, log))
        self.rng = np.random.default_rng(seed)
        self.rate = round(1.0 / spec.timing.policy_period_s)
        self.every = self.rate // fps
        self.is_arm = spec.kind == "arm"
        self.robot = self.runtime = self.camera = self.recorder = self.log = None
        self.stop_requested = threading.Event()  # set by SIGTERM / SIGHUP: end like a quit
        self.episode = None  # the task scene's layout (panda-push), when the task has one
        self._cube: np.ndarray | None = None  # the scene's object at the last read (the task's observation source)
        if self.is_arm:
            self._setup_arm(task)
        else:
            self._setup_legged(policy)
        if log is not None or record is not None:
            from robot_rl.teleop.recorder import TeleopLogWriter

            path = log or record / "raw" / f"teleop-{time.strftime('%Y%m%d-%H%M%S')}.mcap"
            self.log = TeleopLogWriter(path, metadata={"robot": spec.name, "device": type(device).__name__},
                                       overwrite=overwrite)
            self.say(f"raw session log: {path}")
        if record is not None:
            self._setup_recorder(record, fps, camera)
        elif camera:
            self.say("--camera has no effect without --record")
        self._new_robot()

    # -- setup ------------------------------------------------------------------------------------------
    def say(self, line: str) -> None:
        self.out.write(f"\r\x1b[K{line}\n")
        self.out.flush()

    def _setup_arm(self, task: str | None) -> None:
        from robot_rl.tasks.registry import make_task
        from robot_rl.teleop.arm_ik import ArmTeleopController

        name = task or ARM_DEFAULT_TASK.get(self.spec.name)
        if name is None:
            raise TeleopError(f"no default teleop task for arm {self.spec.name!r}: pass --task")
        self.task = make_task(name)
        if self.task.robot != self.spec.name:
            raise TeleopError(f"--task {name} is for robot {self.task.robot!r}, not {self.spec.name!r}")
        self.controller = ArmTeleopController(self.spec, self.task)

    def _setup_legged(self, policy: str | None) -> None:
        self.task = None
        self.policy_path = _legged_policy(self.spec, policy)
        if self.policy_path is None:
            self.say(f"no walking policy (policies/{self.spec.name}_flat/policy.onnx or --policy): the robot "
                     "ramps to its default pose and holds it; the device's twist is recorded but not followed")

    def _setup_recorder(self, record: Path, fps: int, camera: bool) -> None:
        from robot_rl.data.lerobot_dataset import Feature, LeRobotDatasetWriter
        from robot_rl.teleop.recorder import EpisodeRecorder, teleop_features

        names = self.spec.joint_names
        cameras: dict[str, tuple[int, int]] = {}
        if camera:
            from robot_rl.teleop.camera import CameraView, MirrorCamera, probe_rendering

            probe = probe_rendering()
            self.say(probe.message())
            if probe.available:
                view = CameraView(lookat_offset_m=(0.4, 0.0, 0.2)) if self.is_arm else CameraView()
                self.camera = MirrorCamera(self.spec, view)
                cameras["front"] = (view.height, view.width)
        if self.is_arm:
            from robot_rl.tasks.task_observation import TaskObservation, task_text

            self.observe = TaskObservation(self.task, self.spec)
            env_names = ("cube_x", "cube_y", "cube_z", *self.task.commands.names)
            features = teleop_features(self.observe.names, names, cameras=cameras, extra={
                "observation.environment_state": Feature("float32", (len(env_names),), env_names)})
            text = task_text(self.task)
        else:
            joint = {f"observation.{k}": Feature("float32", (n,), tuple(f"{k}.{j}" for j in jn)) for k, n, jn in
                     (("joint_vel", len(names), names), ("base_ang_vel", 3, "xyz"), ("base_quat", 4, "wxyz"))}
            features = teleop_features(names, names, cameras=cameras, extra=joint)
            text = f"walk the {self.spec.name} where the operator steers"
        writer = LeRobotDatasetWriter(record, fps=fps, features=features, robot_type=self.spec.name)
        self.recorder = EpisodeRecorder(writer, task=text, log=self.log)
        self.say(f"recording to {record} at {fps} fps ({writer.total_episodes} episodes there already)")

    def _new_robot(self) -> None:
        """A fresh simulated robot and runtime (arm tasks: a new cube and goal), armed."""
        from robot_rl.control.runtime import DeployRuntime
        from robot_rl.hardware.sim_robot import SimRobot

        if self.robot is not None:
            self.robot.close()
        scene, command = None, None
        if self.is_arm:
            if self.task.name == "panda-push":
                from robot_rl.tasks import panda_push

                self.episode = panda_push.sample_episode(self.rng)
                scene, command = panda_push.push_scene(self.episode.cube_xy), self.episode.command
            else:
                command = (np.asarray(self.task.commands.low) + np.asarray(self.task.commands.high)) / 2
            self.runtime = DeployRuntime(self.spec, self.controller)
        elif self.policy_path is not None:
            self.runtime = DeployRuntime.load(self.spec.name, self.policy_path)
        else:
            self.runtime = DeployRuntime(self.spec)
        self.robot = SimRobot(self.spec, self.sim, scene=scene)
        self.robot.connect()
        self.runtime.observe_objects(self.robot)  # a policy observing the task's object reads it from the scene
        if command is not None:
            self.runtime.set_command(command)
        self.runtime.arm()
        self.ready = False

    # -- per tick ---------------------------------------------------------------------------------------
    def _apply(self, command: TeleopCommand) -> None:
        if self.is_arm:
            self.controller.set_teleop(command)
        elif self.runtime.contract is not None:
            self.runtime.set_command(scale_twist(command.twist, self.runtime.contract.commands.ranges))

    def _frame(self, state: RobotState, result) -> dict[str, np.ndarray]:
        if self.is_arm:
            env = np.concatenate([self._cube if self._cube is not None else np.full(3, np.nan),
                                  self.controller.last_command])
            frame = {"observation.state": self.observe(state, self.controller.last_command, self._cube),
                     "observation.environment_state": np.nan_to_num(env).astype(np.float32),
                     "action": self.controller.last_raw_action.astype(np.float32)}
        else:
            frame = {"observation.state": state.q, "observation.joint_vel": state.dq,
                     "observation.base_ang_vel": state.base_ang_vel, "observation.base_quat": state.base_quat,
                     "action": result.command.q_target}
        frame = {k: np.asarray(v, dtype=np.float32) for k, v in frame.items()}
        if self.camera is not None:
            frame["observation.images.front"] = self.camera.submit(state)
        return frame

    def _status(self, state: RobotState, command: TeleopCommand) -> str:
        parts = [self.runtime.mode.value.upper()]
        if self.recorder is not None:
            rec = self.recorder
            parts.append(f"REC {rec.frames} frames" if rec.recording else "not recording")
            parts.append(f"saved {len(rec.saved)}")
        if self.is_arm:
            tool, _ = self.controller.ik.kin.tool_pose(state.q)
            parts.append("tool " + " ".join(f"{v:+.2f}" for v in tool))
            if self.episode is not None and self._cube is not None:
                from robot_rl.tasks import panda_push

                cube, goal = self._cube, self.episode.goal_xy
                parts.append(f"cube {cube[0]:+.2f} {cube[1]:+.2f} → goal {goal[0]:+.2f} {goal[1]:+.2f} "
                             f"({100 * panda_push.goal_distance(cube, goal):.1f} cm)")
        else:
            parts.append("twist " + " ".join(f"{v:+.1f}" for v in command.twist))
        return " | ".join(parts)

    def _handle_buttons(self, command: TeleopCommand, now: float) -> None:
        if command.buttons.estop:
            self.runtime.estop()
            self.say("E-STOP: the robot is damped; quit (Ctrl-C) and start again to continue")
        if self.recorder is None:
            return
        events = self.recorder.handle(command.buttons)
        for event in events:
            self.say(f"recorder: {event}")
            if event.kind == "started" and self.is_arm:
                self.observe.reset()  # observation history starts with the episode, as in a policy rollout
        if self.task is not None and any(e.kind in ("saved", "discarded", "too_short") for e in events):
            self._new_robot()
            self.say("scene reset: new cube and goal; the arm ramps home")

    def run(self, duration_s: float | None, realtime: bool = True) -> int:
        """Tick until quit or ``duration_s``. ``realtime=False``: no waiting, sim time as the clock (for a
        scripted device, and tests)."""
        from robot_rl.control.state_machine import ControllerMode
        from robot_rl.core.loop_timing import RateLoop

        period = self.spec.timing.policy_period_s
        loop = RateLoop(period, spin_s=0.0)
        loop.start()
        n_ticks = None if duration_s is None else max(1, round(duration_s / period))
        running_ticks, next_status, k = 0, 0.0, 0
        command = TeleopCommand()
        while n_ticks is None or k < n_ticks:
            tick = loop.wait_next() if realtime else None
            now = tick.deadline if tick is not None else self.robot.sim_time()
            command = self.device.poll()
            if command.quit or self.stop_requested.is_set():
                self.say("quit")
                break
            if self.log is not None:
                self.log.log_teleop(command, t=now)
            self._handle_buttons(command, now)
            self._apply(command)
            state = self.robot.read()
            self._cube = self.robot.object_position()  # the task's object as the state was read (its scene)
            result = self.runtime.step(state, now)  # lockstep sim: a late tick is not a fault (module doc)
            sent = self.robot.write(result.command)
            if self.log is not None:
                self.log.log_state(state)
                self.log.log_command(result.proposed, sent=False, t=now)
                self.log.log_command(sent, sent=True, t=now)
                for event in result.events:
                    self.log.log_event(event, t=now)
                if tick is not None:
                    self.log.log_timing(tick.index, tick.lateness, 0.0, tick.missed, t=now)
            if result.mode is ControllerMode.RUNNING:
                if not self.ready:
                    self.ready = True
                    self.say("RUNNING: the robot follows the device")
                if self.recorder is not None and self.recorder.recording and running_ticks % self.every == 0:
                    self.recorder.add_frame(self._frame(state, result), command)
                running_ticks += 1
            if now >= next_status:
                next_status = now + STATUS_PERIOD_S
                self.out.write("\r\x1b[K" + self._status(state, command))
                self.out.flush()
            k += 1
        return 0

    def close(self) -> None:
        try:
            if self.recorder is not None:
                event = self.recorder.close(keep_open_episode=True)
                if event is not None:
                    self.say(f"recorder: {event}")
                self.say(f"dataset {self.recorder.writer.root}: {self.recorder.writer.total_episodes} episodes, "
                         f"{self.recorder.writer.total_frames} frames")
        finally:
            for part in (self.camera, self.log, self.robot):
                if part is not None:
                    part.close()


@contextmanager
def _stop_on_signals(session_ref: list):
    """SIGTERM / SIGHUP (a closed terminal or tmux pane) end the session cleanly: the open episode is kept,
    the log finished, the terminal restored. Only the main thread may install handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.getsignal(sig) for sig in signals}

    def request_stop(signum, frame) -> None:
        if session_ref:
            session_ref[0].stop_requested.set()
        else:
            raise SystemExit(128 + signum)  # still starting: nothing to save yet

    for sig in signals:
        signal.signal(sig, request_stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def teleop(robot: str = "panda", device: str = "keyboard", record: str | None = None, sim: str = "mujoco",
           fps: float | None = None, duration_s: float | None = None, task: str | None = None, camera: bool = False,
           policy: str | None = None, log: str | None = None, overwrite: bool = False, seed: int = 0) -> int:
    """Drive a simulated robot from a keyboard, gamepad or SpaceMouse; optionally record LeRobot demos.

    Args:
        robot: robot name (hardware/robots/NAME.yaml).
        device: keyboard, gamepad[:/dev/input/jsN] or spacemouse[:/dev/hidrawN].
        record: dataset directory (LeRobotDataset v3.0; appended to if it exists). None: do not record.
        sim: simulator, mujoco or pybullet.
        fps: recording rate; must divide the robot's policy rate (default: the policy rate).
        duration_s: stop after this long (default: until Ctrl-C).
        task: arm task (default: panda-push for the Panda).
        camera: record a rendered camera view (needs MUJOCO_GL=egl or osmesa without a display).
        policy: walking policy for a legged robot (default: policies/ROBOT_flat/policy.onnx if present).
        log: MCAP file for the raw session (default with --record: DIR/raw/teleop-TIME.mcap). An existing
            file is refused, unless --overwrite.
        overwrite: replace an existing --log file (the dataset is never replaced: --record appends).
        seed: seed for the task's scene layouts.
    """
    if sim not in SIMULATORS:
        raise TeleopError(f"--sim {sim!r}: choose one of {', '.join(SIMULATORS)}")
    positive(duration_s=duration_s, fps=fps)
    non_negative(seed=seed)
    if log is not None and not overwrite and Path(log).exists():
        raise TeleopError(f"--log {log}: a file is already there; choose another path, or pass --overwrite to "
                          "replace it")
    if camera and record is not None:
        from robot_rl.teleop.camera import prefer_headless_gl

        prefer_headless_gl()  # before MuJoCo is imported
    spec = load_robot(robot)
    rate = round(1.0 / spec.timing.policy_period_s)
    fps_int = rate if fps is None else round(fps)
    if fps is not None and (abs(fps - fps_int) > 1e-9 or fps_int <= 0 or rate % fps_int):
        raise TeleopError(f"--fps {fps}: must be a whole number dividing {spec.name}'s policy rate of {rate} Hz "
                          f"(e.g. {', '.join(str(d) for d in range(rate, 0, -1) if rate % d == 0)})")
    dev = open_device(device)
    session_ref: list[TeleopSession] = []
    try:
        from robot_rl.teleop.keyboard import HELP

        print(f"teleop {spec.name} ({sim}) with {device}. {HELP}", flush=True)
        with _stop_on_signals(session_ref):
            session_ref.append(TeleopSession(spec, dev, sim=sim, fps=fps_int, record=record, log=log, task=task,
                                             camera=camera, policy=policy, seed=seed, overwrite=overwrite))
            return session_ref[0].run(duration_s)
    except DeviceError as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # SIGINT when the terminal is not in raw mode (no keyboard device)
        print("\nquit", flush=True)
        return 0
    finally:
        try:
            if session_ref:
                session_ref[0].close()
        finally:
            dev.close()


def main(argv: list[str] | None = None) -> int:
    import tyro

    try:
        return tyro.cli(teleop, args=argv)
    except RobotRLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
