"""Foot air-time bookkeeping."""

import numpy as np
import pytest

from robot_rl.sim.feet import CONTACT_FORCE_N, FootAirTime


def _force(*touching: bool) -> np.ndarray:
    """One env, two substeps, len(touching) feet."""
    f = np.array([[CONTACT_FORCE_N * 10 if t else 0.0 for t in touching]] * 2)
    return f[None]


def test_touchdown_reports_the_swing_length_once():
    feet = FootAirTime(num_envs=1, num_feet=2, dt=0.02)
    for _ in range(3):  # both feet on the ground
        first, _ = feet.update(_force(True, True))
        assert not first.any()
    for _ in range(10):  # foot 0 swings for 10 steps (0.2 s)
        first, _ = feet.update(_force(False, True))
    assert not first[0, 0]
    first, air = feet.update(_force(True, True))
    assert first[0].tolist() == [True, False]
    # 10 steps: the filter counts the first step after lift-off as contact, the touchdown step as swing.
    assert air[0, 0] == pytest.approx(0.02 * 10)
    first, _ = feet.update(_force(True, True))
    assert not first.any()


def test_a_single_step_flicker_is_not_a_swing_and_reset_forgets():
    feet = FootAirTime(num_envs=2, num_feet=1, dt=0.02)
    feet.update(np.full((2, 2, 1), 10.0))
    first, _ = feet.update(np.zeros((2, 2, 1)))  # one step without contact: still "settled" by the filter
    assert not first.any()
    feet.reset(np.array([1]))
    assert feet.air_time[1, 0] == 0 and not feet.last_contact[1, 0]


def test_contact_is_each_foots_filtered_contact_through_lift_off_landing_and_reset():
    feet = FootAirTime(num_envs=1, num_feet=2, dt=0.02)
    for _ in range(5):  # both feet down for 5 steps
        feet.update(_force(True, True))
    assert feet.contact[0].tolist() == [True, True]
    feet.update(_force(False, True))  # lift-off: the one-step filter still counts foot 0 as down
    assert feet.contact[0].tolist() == [True, True]
    for _ in range(3):
        feet.update(_force(False, True))
    assert feet.contact[0].tolist() == [False, True]
    feet.update(_force(True, False))  # foot 0 lands, foot 1 lifts (filtered: still down)
    assert feet.contact[0].tolist() == [True, True]
    feet.reset(np.array([0]))
    assert not feet.contact.any()
