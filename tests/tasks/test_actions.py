"""Action decoding: the deploy tick's ActionDecoder gives JointPositionAction.decode's targets to the bit."""

import numpy as np
import pytest

from robot_rl.robots.spec import load_robot
from robot_rl.tasks.actions import JointPositionAction


@pytest.mark.parametrize("scale, clip", [(0.25, 5.0), (0.5, 1.0), (-0.3, 2.0), (1.0, 0.0)])
def test_the_decoder_gives_decode_to_the_bit(scale, clip):
    action = JointPositionAction(scale=scale, clip=clip)
    default_q = load_robot("a1").default_positions
    decoder = action.decoder(default_q)
    out = np.empty_like(default_q)
    rng = np.random.default_rng(26)
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, clip, -clip, 1e308, -1e308, 5e-324]
    for _ in range(300):
        raw = rng.normal(size=default_q.shape) * rng.choice([0.1, 1.0, 10.0])  # float64, as the controller passes
        if rng.random() < 0.3:
            raw[rng.integers(raw.size)] = rng.choice(specials)
        expected = action.decode(raw, default_q)
        got = decoder.decode_into(raw, out)
        assert got is out
        np.testing.assert_array_equal(got, expected)
        assert np.array_equal(np.signbit(got), np.signbit(expected))  # −0.0 stays −0.0


def test_the_decoder_keeps_its_own_pose():
    default_q = load_robot("a1").default_positions.copy()
    decoder = JointPositionAction(scale=0.25, clip=5.0).decoder(default_q)
    expected = decoder.decode_into(np.ones(12), np.empty(12)).copy()
    default_q += 1.0  # the caller's array changes later: the decoder's pose does not
    np.testing.assert_array_equal(decoder.decode_into(np.ones(12), np.empty(12)), expected)
    assert not decoder.default_q.flags.writeable
