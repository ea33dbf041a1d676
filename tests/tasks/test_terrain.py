"""Heightfield patches and the terrain-level curriculum."""

import numpy as np
import pytest

from robot_rl.tasks import terrain as T

CFG = T.TerrainCfg(size_m=4.0, resolution_m=0.1, border_m=0.4, spawn_pad_m=0.3, num_levels=5)


@pytest.mark.parametrize("kind", CFG.kinds)
def test_patches_are_non_negative_flat_at_the_border_and_harder_with_level(kind):
    rng = np.random.default_rng(0)
    easy = T.generate(CFG, kind, 0, rng)
    hard = T.generate(CFG, kind, CFG.num_levels - 1, rng)
    assert easy.shape == (CFG.grid_points, CFG.grid_points)
    assert np.all(hard >= 0) and hard.max() <= CFG.max_height_m
    assert np.ptp(easy) == 0.0  # level 0 is flat
    assert np.ptp(hard) > 0.03
    assert np.all(hard[0] == 0) and np.all(hard[:, -1] == 0)  # the border meets the floor
    centre = CFG.grid_points // 2
    pad = hard[centre - 2 : centre + 3, centre - 2 : centre + 3]
    assert np.ptp(pad) == 0.0  # flat spawn pad


def test_a1_rough_blocks_have_near_vertical_sides_as_the_suites_steps_do():
    """MuJoCo triangulates a heightfield between grid points, so a block's side is as steep as its height over the
    grid's spacing: a1-rough's top-level blocks must be walls (over 75°), not ramps a sliding foot climbs."""
    from robot_rl.tasks.registry import make_task

    cfg = make_task("a1-rough").terrain
    hard = T.generate(cfg, "obstacles", cfg.num_levels - 1, np.random.default_rng(0))
    rise = max(np.abs(np.diff(hard, axis=0)).max(), np.abs(np.diff(hard, axis=1)).max())
    assert rise > 0.08  # the tallest edge: a block of up to max_obstacle_m
    assert np.degrees(np.arctan(rise / cfg.resolution_m)) > 75  # on the 0.1 m grid it was a 50° ramp


def test_height_at_interpolates_the_grid_and_is_zero_off_the_patch():
    rng = np.random.default_rng(1)
    heights = np.stack([T.generate(CFG, "rough", 4, rng) for _ in range(2)])
    row, col = 13, 27
    x = -CFG.size_m / 2 + col * CFG.resolution_m
    y = -CFG.size_m / 2 + row * CFG.resolution_m
    got = T.height_at(CFG, heights, np.array([[x, y], [x + 0.05, y]]))
    assert got[0] == pytest.approx(heights[0, row, col])
    assert got[1] == pytest.approx((heights[1, row, col] + heights[1, row, col + 1]) / 2)
    assert T.height_at(CFG, heights, np.array([[10.0, 0.0], [0.0, -10.0]])).tolist() == [0.0, 0.0]


def test_curriculum_promotes_demotes_and_recycles_the_top_level():
    rng = np.random.default_rng(2)
    levels = np.array([1, 1, 1, 4])
    walked = np.array([1.5, 0.1, 0.8, 1.5])  # promote beyond 0.5 × half patch = 1.0 m
    commanded = np.array([2.0, 2.0, 1.0, 2.0])
    new = T.update_levels(CFG, levels, walked, commanded, rng)
    assert new[0] == 2 and new[1] == 0 and new[2] == 1
    assert 0 <= new[3] < CFG.num_levels  # solved the top level: sent to a random one


def test_bad_terrain_config_is_refused():
    with pytest.raises(ValueError, match="initial_max_level"):
        T.TerrainCfg(num_levels=3, initial_max_level=3)
