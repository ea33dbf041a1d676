"""Camera frames for demonstrations: MuJoCo offscreen rendering of the robot at its measured state.

MuJoCo picks its OpenGL platform from ``MUJOCO_GL`` when ``mujoco`` is first imported: ``egl`` (GPU, or
Mesa's software EGL) and ``osmesa`` (software) need no display; the default, GLFW, needs an X server. So
:func:`prefer_headless_gl` sets ``MUJOCO_GL=egl`` when nothing chose a backend, there is no display, and
MuJoCo is not imported yet; :func:`probe_rendering` then tries one tiny render and, when that fails,
says why and what to set, so a session can go on without frames instead of failing.

:class:`MirrorCamera` renders a copy of the robot's model (with its visual meshes) posed at the measured
joint positions (and base pose) from a fixed viewpoint, so it works for any robot interface, and never
touches the simulator's own data. Rendering a frame with software GL can take longer than a 50 Hz tick
(tens of ms on a busy CPU), so frames are rendered on a worker thread that owns the GL context,
and :meth:`MirrorCamera.submit` returns a ``Future`` the episode recorder resolves when the episode ends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_rl.core.types import RobotState
from robot_rl.robots.spec import RobotSpec

GL_HELP = ("set MUJOCO_GL=egl (a GPU, or Mesa's software EGL) or MUJOCO_GL=osmesa (software) before starting, "
           "e.g. MUJOCO_GL=egl robot-rl teleop ...")


@dataclass(frozen=True)
class RenderProbe:
    available: bool
    backend: str  # MUJOCO_GL as MuJoCo saw it ("" = its default, GLFW)
    reason: str  # empty when available

    def message(self) -> str:
        if self.available:
            return f"camera: MuJoCo offscreen rendering works (MUJOCO_GL={self.backend or 'glfw'})"
        return f"camera frames unavailable, recording without them: {self.reason}"


def prefer_headless_gl() -> str:
    """Choose EGL when nothing chose a backend and no display exists (before ``import mujoco``)."""
    has_display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if "MUJOCO_GL" not in os.environ and "mujoco" not in sys.modules and not has_display:
        os.environ["MUJOCO_GL"] = "egl"
    return os.environ.get("MUJOCO_GL", "")


def probe_rendering(make_renderer: Callable[[Any, int, int], Any] | None = None) -> RenderProbe:
    """Render one small frame; a failure (no GL platform, no display, missing library) is reported."""
    backend = os.environ.get("MUJOCO_GL", "")
    try:
        import mujoco

        model = mujoco.MjModel.from_xml_string(
            "<mujoco><worldbody><light pos='0 0 2'/><geom type='sphere' size='0.1'/></worldbody></mujoco>")
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        renderer = (make_renderer or mujoco.Renderer)(model, 16, 16)
        try:
            renderer.update_scene(data)
            frame = renderer.render()
        finally:
            renderer.close()
        if np.asarray(frame).shape != (16, 16, 3):
            raise RuntimeError(f"the renderer returned an array of shape {np.shape(frame)}")
    except Exception as exc:  # any failure means: no frames; say why
        which = f"MUJOCO_GL={backend}" if backend else "MUJOCO_GL unset, so GLFW, which needs an X display"
        return RenderProbe(False, backend, f"MuJoCo offscreen rendering failed ({which}): "
                                           f"{type(exc).__name__}: {exc}. To record camera frames, {GL_HELP}")
    return RenderProbe(True, backend, "")


@dataclass(frozen=True)
class CameraView:
    height: int = 96
    width: int = 128
    distance_m: float = 1.6
    azimuth_deg: float = 150.0
    elevation_deg: float = -25.0
    lookat_offset_m: tuple[float, float, float] = (0.0, 0.0, 0.0)  # from the base body


class MirrorCamera:
    """Renders the robot at a given state on a worker thread (see the module docstring)."""

    def __init__(self, spec: RobotSpec, view: CameraView = CameraView()) -> None:
        self.spec, self.view = spec, view
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="camera")
        self._ctx: dict[str, Any] = {}
        self._pool.submit(self._setup).result()  # build model and GL context in the worker; errors surface here

    def _setup(self) -> None:
        import mujoco

        from robot_rl.robots.mujoco_model import build_mujoco_model

        robot = build_mujoco_model(self.spec, keep_visual=True)
        data = robot.make_data()
        renderer = mujoco.Renderer(robot.model, self.view.height, self.view.width)
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
            renderer.scene.flags[flag] = False  # a third of the software-GL render time, little information
        camera = mujoco.MjvCamera()
        camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        camera.distance, camera.azimuth, camera.elevation = (self.view.distance_m, self.view.azimuth_deg,
                                                             self.view.elevation_deg)
        self._ctx = {"mujoco": mujoco, "robot": robot, "data": data, "renderer": renderer, "camera": camera}

    def _render(self, q: np.ndarray, base_pos: np.ndarray | None, base_quat: np.ndarray) -> np.ndarray:
        c = self._ctx
        robot, data = c["robot"], c["data"]
        data.qpos[robot.qpos_adr] = q
        if robot.free_qpos_adr is not None:
            adr = robot.free_qpos_adr
            if base_pos is not None:
                data.qpos[adr : adr + 3] = base_pos
            data.qpos[adr + 3 : adr + 7] = base_quat
        c["mujoco"].mj_kinematics(robot.model, data)
        c["camera"].lookat[:] = data.xpos[robot.base_body_id] + np.asarray(self.view.lookat_offset_m)
        c["renderer"].update_scene(data, c["camera"])
        return c["renderer"].render().copy()

    def submit(self, state: RobotState) -> Future:
        """A Future of the (H, W, 3) uint8 frame of ``state`` (copied now: the state may change later)."""
        base_pos = None if state.base_pos is None else np.array(state.base_pos, dtype=np.float64)
        return self._pool.submit(self._render, np.array(state.q, dtype=np.float64), base_pos,
                                 np.array(state.base_quat, dtype=np.float64))

    def render(self, state: RobotState) -> np.ndarray:
        return self.submit(state).result()

    def close(self) -> None:
        def release() -> None:
            if "renderer" in self._ctx:
                self._ctx.pop("renderer").close()

        if self._pool is not None:
            self._pool.submit(release).result()
            self._pool.shutdown(wait=True)
            self._pool = None
