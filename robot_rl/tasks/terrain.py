"""Rough terrain: one heightfield patch per env, and a terrain-level curriculum.

Each env owns its MuJoCo model copy (for per-env randomization), so each env also owns its terrain patch,
generated at its own difficulty level and regenerated when the curriculum moves it. The patch sits on the
floor plane with heights ≥ 0 and a flat border, so a robot that walks off its patch keeps walking on flat
ground instead of falling off the world.

Grid layout is MuJoCo's: ``heights[row, col]`` is at x = −half + col·res, y = −half + row·res.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

TerrainKind = Literal["rough", "slope", "obstacles"]


@dataclass(frozen=True)
class TerrainCfg:
    size_m: float = 8.0  # side of the square patch, centered on the spawn point
    resolution_m: float = 0.1
    border_m: float = 0.5  # flat strip at the edge, level with the floor
    spawn_pad_m: float = 0.3  # flat square around the spawn point, so resets are well defined
    num_levels: int = 10
    max_roughness_m: float = 0.07  # uniform bump height at the top level
    max_slope: float = 0.35  # rise over run of the pyramid at the top level
    max_obstacle_m: float = 0.12  # block height at the top level
    kinds: tuple[TerrainKind, ...] = ("rough", "slope", "obstacles")
    initial_max_level: int = 2  # envs start on levels 0..this
    promote_fraction: float = 0.5  # walked more than this × half the patch → level up
    demote_fraction: float = 0.5  # walked less than this × the commanded distance → level down

    def __post_init__(self) -> None:
        if self.num_levels < 1:
            raise ValueError(f"terrain num_levels must be ≥ 1, got {self.num_levels}")
        if not 0 <= self.initial_max_level < self.num_levels:
            raise ValueError(f"terrain initial_max_level {self.initial_max_level} outside 0..{self.num_levels - 1}")
        if self.size_m <= 2 * (self.border_m + self.spawn_pad_m):
            raise ValueError(f"terrain size_m {self.size_m} leaves no room between border and spawn pad")

    @property
    def grid_points(self) -> int:
        return round(self.size_m / self.resolution_m) + 1

    @property
    def max_height_m(self) -> float:
        """Upper bound of any generated height (the heightfield's elevation range)."""
        pyramid = self.max_slope * (self.size_m / 2 - self.border_m)
        return max(pyramid + self.max_roughness_m * 0.5, self.max_roughness_m, self.max_obstacle_m, 1e-3)


def difficulty(cfg: TerrainCfg, level: int) -> float:
    """0 at level 0, 1 at the top level."""
    return level / max(cfg.num_levels - 1, 1)


def _coords(cfg: TerrainCfg) -> tuple[np.ndarray, np.ndarray]:
    n = cfg.grid_points
    axis = np.linspace(-cfg.size_m / 2, cfg.size_m / 2, n)
    return np.meshgrid(axis, axis)  # x varies along columns, y along rows


def generate(cfg: TerrainCfg, kind: TerrainKind, level: int, rng: np.random.Generator) -> np.ndarray:
    """Heights (grid_points × grid_points) in metres, ≥ 0, for one patch."""
    d = difficulty(cfg, level)
    x, y = _coords(cfg)
    n = cfg.grid_points
    if kind == "rough":
        # Bumps on a 0.2 m lattice, upsampled: sharper than that is not something feet meet outdoors.
        coarse = max(2, round(cfg.size_m / 0.2) + 1)
        bumps = rng.uniform(0.0, d * cfg.max_roughness_m, size=(coarse, coarse))
        h = _upsample(bumps, n)
    elif kind == "slope":
        half = cfg.size_m / 2 - cfg.border_m
        dist_from_edge = np.clip(half - np.maximum(np.abs(x), np.abs(y)), 0.0, None)
        h = d * cfg.max_slope * dist_from_edge
        h = h + rng.uniform(0.0, 0.3 * d * cfg.max_roughness_m, size=h.shape)
    elif kind == "obstacles":
        h = np.zeros((n, n))
        res = cfg.resolution_m
        for _ in range(int(cfg.size_m**2 / 2)):  # blocks may overlap: a later one sits on top
            w, d_y = rng.uniform(0.3, 1.0, size=2) / res
            c, r = rng.uniform(0, n - 1, size=2)
            h[int(max(r - d_y / 2, 0)) : int(r + d_y / 2) + 1, int(max(c - w / 2, 0)) : int(c + w / 2) + 1] = (
                rng.uniform(0.2, 1.0) * d * cfg.max_obstacle_m
            )
    else:
        raise ValueError(f"unknown terrain kind {kind!r} (known: rough, slope, obstacles)")
    border = (np.abs(x) > cfg.size_m / 2 - cfg.border_m) | (np.abs(y) > cfg.size_m / 2 - cfg.border_m)
    h[border] = 0.0
    pad = (np.abs(x) < cfg.spawn_pad_m) & (np.abs(y) < cfg.spawn_pad_m)
    if kind != "slope":
        h[pad] = 0.0
    else:  # the pyramid's top: flatten to the pad's mean so the spawn stays at the summit
        h[pad] = h[pad].mean()
    return np.clip(h, 0.0, cfg.max_height_m)


def _upsample(coarse: np.ndarray, n: int) -> np.ndarray:
    """Bilinear resampling of a square grid to n × n."""
    src = np.linspace(0, coarse.shape[0] - 1, n)
    i0 = np.clip(np.floor(src).astype(int), 0, coarse.shape[0] - 2)
    f = src - i0
    rows = coarse[i0] * (1 - f)[:, None] + coarse[i0 + 1] * f[:, None]
    return rows[:, i0] * (1 - f)[None, :] + rows[:, i0 + 1] * f[None, :]


def height_at(cfg: TerrainCfg, heights: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """Bilinear terrain height under (N, 2) points, one patch per env (``heights`` is (N, n, n)).
    Points off the patch are on the floor (0)."""
    n = cfg.grid_points
    u = (xy[:, 0] + cfg.size_m / 2) / cfg.resolution_m  # column coordinate
    v = (xy[:, 1] + cfg.size_m / 2) / cfg.resolution_m  # row coordinate
    inside = (u >= 0) & (u <= n - 1) & (v >= 0) & (v <= n - 1)
    u = np.clip(u, 0, n - 1 - 1e-9)
    v = np.clip(v, 0, n - 1 - 1e-9)
    c0 = np.floor(u).astype(int)
    r0 = np.floor(v).astype(int)
    fu, fv = u - c0, v - r0
    envs = np.arange(len(xy))
    h00 = heights[envs, r0, c0]
    h01 = heights[envs, r0, c0 + 1]
    h10 = heights[envs, r0 + 1, c0]
    h11 = heights[envs, r0 + 1, c0 + 1]
    h = (h00 * (1 - fu) + h01 * fu) * (1 - fv) + (h10 * (1 - fu) + h11 * fu) * fv
    return np.where(inside, h, 0.0)


def update_levels(
    cfg: TerrainCfg,
    levels: np.ndarray,
    distance_walked: np.ndarray,
    commanded_distance: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """New levels of the envs that finished an episode (the legged_gym game-inspired curriculum).

    Far enough → harder; much less than commanded → easier; past the top level → a random level, so the
    hardest terrains never crowd out the rest.
    """
    up = distance_walked > cfg.promote_fraction * cfg.size_m / 2
    down = (distance_walked < cfg.demote_fraction * commanded_distance) & ~up
    new = levels + up.astype(int) - down.astype(int)
    solved = new >= cfg.num_levels
    new[solved] = rng.integers(0, cfg.num_levels, size=int(solved.sum()))
    return np.clip(new, 0, cfg.num_levels - 1)


def initial_levels(cfg: TerrainCfg, rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, cfg.initial_max_level + 1, size=n)


def initial_kinds(cfg: TerrainCfg, n: int) -> list[TerrainKind]:
    """Kinds spread evenly over the envs (an env keeps its kind; its level changes)."""
    return [cfg.kinds[i % len(cfg.kinds)] for i in range(n)]
