"""Run a trained checkpoint headless and report episode metrics: ``robot-rl play --task a1-flat --checkpoint …``.

Metrics: episodes, mean episode length, falls, mean velocity-tracking error (locomotion), success rate
and final distance (reach). With an offscreen GL backend (``MUJOCO_GL=egl`` or ``osmesa``) it can also
render env 0 to an animated GIF; without one it says the video was skipped and why.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro

from robot_rl.core.validate import ArgumentError, non_negative, positive
from robot_rl.learn.train import require_ppo_task, set_torch_threads
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task
from robot_rl.typed_yaml import ConfigError

OFFSCREEN_BACKENDS = ("egl", "osmesa")


@dataclass(frozen=True)
class PlayArgs:
    """Evaluate a checkpoint in the vectorized MuJoCo env."""

    checkpoint: Path
    task: str = "a1-flat"
    num_envs: int = 16
    episodes: int = 32  # stop after this many finished episodes
    randomize: bool = False  # evaluate under the task's domain randomization instead of the nominal robot
    seed: int = 1
    video: Path | None = None  # write env 0 to this GIF (needs MUJOCO_GL=egl or osmesa)
    video_seconds: float = 10.0
    command: tuple[float, ...] | None = None  # hold this command (e.g. 0.5 0 0: walk forward at 0.5 m/s)
    physics_threads: int | None = None


@dataclass
class PlayReport:
    task: str
    episodes: int
    mean_episode_length_s: float
    falls: int
    metrics: dict[str, float] = field(default_factory=dict)  # mean over episodes of each episode metric
    video: str | None = None
    video_skipped: str | None = None

    def lines(self) -> list[str]:
        out = [f"task {self.task}: {self.episodes} episodes, mean length {self.mean_episode_length_s:.2f} s, "
               f"falls {self.falls} ({self.falls / max(self.episodes, 1):.0%})"]
        names = {"Episode/lin_vel_error_m_s": "mean lin-vel tracking error, per step (m/s)",
                 "Episode/mean_vel_error_m_s": "error of the episode's mean velocity (m/s)",
                 "Episode/success": "success rate (tip within tolerance at the end)",
                 "Episode/final_distance_m": "mean final distance to target (m)"}
        for key, label in names.items():
            if key in self.metrics:
                out.append(f"  {label}: {self.metrics[key]:.3f}")
        out.append(f"  video: {self.video}" if self.video else f"  video skipped: {self.video_skipped}")
        return out


def offscreen_backend_problem() -> str | None:
    """Why a video cannot be rendered here, or None when it can."""
    backend = os.environ.get("MUJOCO_GL", "")
    if backend not in OFFSCREEN_BACKENDS:
        return f"MUJOCO_GL is {backend or 'unset'}; set MUJOCO_GL=egl (or osmesa) for offscreen rendering"
    return None


def play(args: PlayArgs) -> PlayReport:
    positive(num_envs=args.num_envs, episodes=args.episodes, video_seconds=args.video_seconds,
             physics_threads=args.physics_threads)
    non_negative(seed=args.seed)
    if args.command is not None and not np.all(np.isfinite(args.command)):
        raise ArgumentError(f"--command must be finite numbers, got {' '.join(f'{c:g}' for c in args.command)}")
    task = make_task(args.task)
    require_ppo_task(task)
    spec = load_robot(task.robot)
    if args.command is not None and len(args.command) != task.commands.size:
        raise ConfigError("--command", ", ".join(task.commands.names),
                          f"task {task.name!r} takes {task.commands.size} values, got {len(args.command)}")

    import torch

    from robot_rl.learn.ppo import RslRlVecEnv, TaskRunner, check_checkpoint
    from robot_rl.sim.mujoco_vec_env import MujocoVecEnv

    info = check_checkpoint(args.checkpoint, task, spec)
    set_torch_threads(None)
    torch.manual_seed(args.seed)
    env = MujocoVecEnv(task, args.num_envs, seed=args.seed, randomize=args.randomize,
                       nthread=args.physics_threads, fixed_command=args.command)
    vec = RslRlVecEnv(env)
    if info.get("algorithm") == "fasttd3":  # off-policy checkpoints hold their own actor (robot_rl.learn.offpolicy)
        from robot_rl.learn.offpolicy.fasttd3 import inference_policy

        actor = inference_policy(torch.load(args.checkpoint, weights_only=False, map_location="cpu"))

        def policy(obs):
            return actor(obs["policy"])
    else:
        runner = TaskRunner(vec, task, log_dir=None, ppo=dataclasses.replace(task.ppo, num_envs=args.num_envs))
        runner.load(str(args.checkpoint), load_cfg={"actor": True, "critic": True})
        policy = runner.get_inference_policy()

    skipped = offscreen_backend_problem() if args.video else "no --video path given"
    recorder = None
    if args.video and skipped is None:
        try:
            recorder = _Recorder(env, args.video_seconds)
        except Exception as exc:  # a GL backend that is named but cannot start (no EGL device, no OSMesa)
            skipped = f"offscreen rendering with MUJOCO_GL={os.environ.get('MUJOCO_GL')} failed: {exc}"
    finished: dict[str, list[np.ndarray]] = {}
    count = 0
    max_steps = (args.episodes // args.num_envs + 2) * env.max_episode_length
    obs = vec.get_observations()
    with torch.inference_mode():
        for _ in range(max_steps):
            obs, _, _, _ = vec.step(policy(obs))
            result_finished = env.last_finished
            for key, values in result_finished.items():
                finished.setdefault(key, []).append(values)
            count += len(next(iter(result_finished.values()))) if result_finished else 0
            if recorder is not None:
                recorder.capture()
            if count >= args.episodes and (recorder is None or recorder.full):
                break
    env.close()
    metrics = {k: float(np.mean(np.concatenate(v))) for k, v in finished.items()}
    report = PlayReport(
        task=task.name,
        episodes=count,
        mean_episode_length_s=metrics.get("Episode/length_s", float("nan")),
        falls=int(sum(np.sum(v) for v in finished.get("Episode/fell", []))),
        metrics=metrics,
        video_skipped=skipped,
    )
    if recorder is not None:
        report.video = str(recorder.save(args.video))
    return report


class _Recorder:
    """Renders env 0 with a camera tracking its base (visual meshes kept, in a model of its own)."""

    def __init__(self, env, seconds: float):
        import mujoco

        from robot_rl.sim.world import build_training_world, write_heightfield

        self.env = env
        self.world = build_training_world(env.spec, env.task.terrain, keep_visual=True)
        self.model = self.world.robot.model
        if env.task.terrain is not None:
            write_heightfield(self.model, self.world.hfield_id, env.heights[0])
        self.data = mujoco.MjData(self.model)
        self.renderer = mujoco.Renderer(self.model, 240, 320)
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        self.camera.trackbodyid = self.world.robot.base_body_id
        self.camera.distance, self.camera.elevation, self.camera.azimuth = 1.5, -20.0, 135.0
        self.frames: list[np.ndarray] = []
        self.limit = int(seconds / env.dt)

    @property
    def full(self) -> bool:
        return len(self.frames) >= self.limit

    def capture(self) -> None:
        import mujoco

        if self.full:
            return
        mujoco.mj_setState(self.model, self.data, self.env.state[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, self.camera)
        radius = self.env.task.terms.tool_target_m
        if radius is not None:  # show the tool-point target: a red sphere of the success radius
            scene = self.renderer.scene
            if scene.ngeom < scene.maxgeom:
                target = self.env._base_pos0 + self.env._base_rot0 @ self.env.commands[0]
                mujoco.mjv_initGeom(scene.geoms[scene.ngeom], mujoco.mjtGeom.mjGEOM_SPHERE,
                                    [radius, 0, 0], target, np.eye(3).ravel(),
                                    np.array([1.0, 0.1, 0.1, 0.6], dtype=np.float32))
                scene.ngeom += 1
        self.frames.append(self.renderer.render().copy())

    def save(self, path: Path) -> Path:
        from PIL import Image

        path = Path(path).with_suffix(".gif")
        path.parent.mkdir(parents=True, exist_ok=True)
        images = [Image.fromarray(f) for f in self.frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(self.env.dt * 1000), loop=0)
        self.renderer.close()
        return path


def play_command(args: Annotated[PlayArgs, tyro.conf.arg(name="")]) -> int:
    """Run a trained checkpoint headless and print episode metrics."""
    for line in play(args).lines():
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``sim/play.py``: errors in the user's input print one line, not a traceback."""
    from robot_rl.core.errors import RobotRLError

    try:
        return tyro.cli(play_command, args=argv)
    except RobotRLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
