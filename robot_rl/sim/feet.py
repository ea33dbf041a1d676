"""Foot contact bookkeeping for the gait rewards (air time at touchdown, contact against a gait clock), batched
over envs."""

from __future__ import annotations

import numpy as np

CONTACT_FORCE_N = 1.0  # a foot "touches" above this net contact force (as legged_gym)


class FootAirTime:
    """Tracks each foot's swing: when a foot touches down, ``update`` reports how long it was in the air.

    After ``update``, ``contact`` is each foot's filtered contact (the phase-contact reward's)."""

    def __init__(self, num_envs: int, num_feet: int, dt: float):
        self.dt = dt
        self.air_time = np.zeros((num_envs, num_feet))
        self.last_contact = np.zeros((num_envs, num_feet), dtype=bool)
        self.contact = np.zeros((num_envs, num_feet), dtype=bool)

    def reset(self, env_ids: np.ndarray) -> None:
        for array in (self.air_time, self.last_contact, self.contact):
            array[env_ids] = 0

    def update(self, force: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``force``: (N, substeps, feet) contact force magnitudes of one policy step; a touch in any substep
        counts. Returns (first_contact, air_time): feet that touched down this step, and the length of the
        swing each foot has been in (meaningful where first_contact)."""
        contact = force.max(axis=1) > CONTACT_FORCE_N
        settled = contact | self.last_contact  # a one-step filter: a flickering contact is one contact
        self.last_contact = contact
        first = (self.air_time > 0) & settled
        self.air_time += self.dt
        air = self.air_time.copy()
        self.air_time *= ~settled
        self.contact = settled
        return first, air
