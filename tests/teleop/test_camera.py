"""Camera frames: MuJoCo offscreen rendering when a GL platform exists, a clear message when it does not.

MuJoCo binds its GL platform at import, so the rendering checks run in a fresh interpreter with MUJOCO_GL
set (EGL, else OSMesa); they skip, saying why, on a machine with neither."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from robot_rl.teleop import camera as camera_module
from robot_rl.teleop.camera import GL_HELP, probe_rendering


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environ | env, capture_output=True,
                          text=True, timeout=120)


def test_a_failing_renderer_is_reported_with_what_to_set():
    def no_gl(model, height, width):
        raise RuntimeError("an OpenGL platform library has not been loaded")

    probe = probe_rendering(make_renderer=no_gl)
    assert not probe.available
    assert "an OpenGL platform library has not been loaded" in probe.reason and GL_HELP in probe.reason
    assert probe.message().startswith("camera frames unavailable, recording without them: ")


def test_without_a_display_glfw_rendering_is_reported_unavailable():
    result = _python("""
        from robot_rl.teleop.camera import probe_rendering
        probe = probe_rendering()
        print(probe.available, probe.message())
    """, MUJOCO_GL="glfw")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("False camera frames unavailable"), result.stdout
    assert "MUJOCO_GL=glfw" in result.stdout and "MUJOCO_GL=egl" in result.stdout


def test_prefer_headless_gl_picks_egl_only_when_nothing_chose(monkeypatch):
    for name in ("MUJOCO_GL", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "mujoco", raising=False)
    assert camera_module.prefer_headless_gl() == "egl"
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert camera_module.prefer_headless_gl() == "osmesa"
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.setenv("DISPLAY", ":0")
    assert camera_module.prefer_headless_gl() == ""  # a display: GLFW may work, leave MuJoCo's default


RENDER_AND_RECORD = """
    import io, json, sys
    import numpy as np
    from robot_rl.teleop.camera import MirrorCamera, probe_rendering
    probe = probe_rendering()
    if not probe.available:
        print(json.dumps({"skip": probe.reason})); sys.exit(0)
    from robot_rl.data.lerobot_dataset import LeRobotDataset
    from robot_rl.data.lerobot_validate import validate_dataset
    from robot_rl.core.types import RobotState
    from robot_rl.robots.spec import load_robot
    from robot_rl.teleop.command import RecorderButtons, TeleopCommand
    from robot_rl.teleop.session import TeleopSession

    spec = load_robot("panda")
    cam = MirrorCamera(spec)
    state = lambda q: RobotState(0.0, 0, q=q, dq=np.zeros(7), tau=np.zeros(7))
    home = cam.render(state(spec.default_positions))
    bent = cam.render(state(spec.default_positions + np.array([0.8, 0.3, 0, 0.4, 0, 0, 0])))
    cam.close()

    class Script:  # stands in for a person: start, move for a while, stop, quit
        def __init__(self): self.k = 0
        def poll(self):
            self.k += 1
            if self.k == 160: return TeleopCommand(buttons=RecorderButtons(start=True))
            if self.k == 180: return TeleopCommand(buttons=RecorderButtons(stop=True))
            if self.k == 182: return TeleopCommand(quit=True)
            return TeleopCommand(ee_delta=np.array([0, 1.0, 0, 0, 0, 0]))
        def close(self): pass

    session = TeleopSession(spec, Script(), sim="mujoco", fps=50, record=sys.argv[1], log=None, task=None,
                            camera=True, policy=None, seed=0, out=io.StringIO())
    try:
        session.run(duration_s=5.0, realtime=False)
    finally:
        session.close()
    frames = LeRobotDataset(sys.argv[1]).episode(0)["observation.images.front"]
    print(json.dumps({"shape": home.shape, "home_std": float(home.std()),
                      "pose_diff": float(np.abs(home.astype(int) - bent).mean()),
                      "problems": validate_dataset(sys.argv[1]), "frames": list(frames.shape),
                      "motion": float(np.abs(frames[-1].astype(int) - frames[0]).mean())}))
"""


@pytest.mark.parametrize("backend", ["egl", "osmesa"])
def test_rendered_frames_show_the_robot_and_are_recorded(tmp_path, backend):
    script = RENDER_AND_RECORD.replace("sys.argv[1]", repr(str(tmp_path / "ds")))
    result = _python(script, MUJOCO_GL=backend)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(f"no MuJoCo offscreen rendering with MUJOCO_GL={backend} here: {out['skip'][:300]}")
    assert out["shape"] == [96, 128, 3] and out["home_std"] > 5.0  # not a blank image
    assert out["pose_diff"] > 0.5  # another pose, another picture
    assert out["problems"] == [] and out["frames"] == [20, 96, 128, 3]
    assert out["motion"] > 0.2  # the arm moved sideways while recording
