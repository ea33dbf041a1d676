"""The lock-free shared blocks: the transition ring and the weight board's seqlock (across processes: test_learner)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.learn.residual.shared import TransitionRing, WeightBoard


@pytest.fixture
def ring():
    r = TransitionRing(width=3, capacity=8)
    yield r
    r.close()


def test_ring_delivers_in_order_and_counts_overwritten_records(ring):
    consumer = TransitionRing.attach(ring.ref)
    try:
        for k in range(5):
            ring.write(np.full(3, k, np.float32))
        np.testing.assert_array_equal(consumer.read()[:, 0], np.arange(5))
        assert consumer.read().shape == (0, 3)
        for k in range(5, 25):  # 20 more into 8 slots: the consumer lost 12
            ring.write(np.full(3, k, np.float32))
        np.testing.assert_array_equal(consumer.read()[:, 0], np.arange(17, 25))
        assert consumer.lost == 12
    finally:
        consumer.close()


def test_ring_drops_a_slot_being_rewritten(ring):
    consumer = TransitionRing.attach(ring.ref)
    try:
        for k in range(3):
            ring.write(np.full(3, k, np.float32))
        ring._seq[1] = -1  # the producer is mid-write on slot 1 (as if preempted there)
        got = consumer.read()
        np.testing.assert_array_equal(got[:, 0], [0, 2])
        assert consumer.lost == 1
    finally:
        consumer.close()


def test_weight_board_seqlock():
    board = WeightBoard(4)
    try:
        out = np.zeros(4, np.float32)
        assert board.poll(0, out) is None  # nothing published yet
        v = board.publish(np.arange(4, dtype=np.float32))
        assert v == 2 and board.poll(0, out) == 2
        np.testing.assert_array_equal(out, np.arange(4))
        assert board.poll(2, out) is None  # nothing newer
        board._version[0] = 3  # the writer is mid-update
        assert board.poll(2, out) is None
    finally:
        board.close()
