"""Lock-free shared memory between the control loop and the learner process.

Neither side ever waits for the other: there are no locks, pipes or queues that can fill up.

- :class:`TransitionRing` — loop → learner. A ring of fixed-width float32 records with one producer and one
  consumer. The producer overwrites the oldest records when the learner falls behind (or died): the loop's
  cost per transition is one row copy and two integer stores, whatever the learner does. Each slot carries
  the sequence number of the record in it, set to −1 while the slot is being written, so the consumer drops a
  record that was overwritten while it was copying it instead of reading half of two records.
- :class:`WeightBoard` — learner → loop. The actor's flat parameter vector under a seqlock version: odd while
  the learner writes, even when done. The loop copies the vector and keeps it only if the version was even
  and unchanged across the copy; otherwise it tries again at its next poll.
- :class:`LearnerStatus` — a few float64 cells: the learner's heartbeat (``time.monotonic()``, which is one
  clock for every process on the machine), its counters, its state, and the loop's stop request.

Ordering: each side stores data before the counter/version that publishes it, and x86-64 keeps stores in
order (TSO). Aligned 8-byte stores are atomic there, so a counter is never read half-written.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np


@dataclass(frozen=True)
class BlockRef:
    """What a process needs to attach to a block another one created (picklable)."""

    name: str
    shape: tuple[int, ...]


def _create(nbytes: int) -> shared_memory.SharedMemory:
    return shared_memory.SharedMemory(create=True, size=max(nbytes, 1))


class _Block:
    def __init__(self, nbytes: int, name: str | None):
        self.shm = _create(nbytes) if name is None else shared_memory.SharedMemory(name=name)
        self.owner = name is None

    def close(self) -> None:
        """Detach; the creating side also removes the block."""
        self.shm.close()
        if self.owner:
            with contextlib.suppress(FileNotFoundError):
                self.shm.unlink()


class TransitionRing(_Block):
    _HEADER = 8  # int64 cells; [0] = records ever written

    def __init__(self, width: int, capacity: int, name: str | None = None):
        if width < 1 or capacity < 1:
            raise ValueError(f"transition ring needs width ≥ 1 and capacity ≥ 1, got {width}, {capacity}")
        self.width, self.capacity = width, capacity
        head, seq = self._HEADER * 8, capacity * 8
        super().__init__(head + seq + capacity * width * 4, name)
        buf = self.shm.buf
        self._header = np.ndarray((self._HEADER,), np.int64, buf, 0)
        self._seq = np.ndarray((capacity,), np.int64, buf, head)
        self._data = np.ndarray((capacity, width), np.float32, buf, head + seq)
        if self.owner:
            self._header[:] = 0
            self._seq[:] = -1
        self._read = 0  # consumer side: next record index to read
        self.lost = 0  # consumer side: records overwritten before they were read

    @property
    def ref(self) -> BlockRef:
        return BlockRef(self.shm.name, (self.width, self.capacity))

    @classmethod
    def attach(cls, ref: BlockRef) -> TransitionRing:
        return cls(*ref.shape, name=ref.name)

    @property
    def written(self) -> int:
        return int(self._header[0])

    def write(self, record: np.ndarray) -> None:
        """Producer: append one record (overwriting the oldest when full). Never blocks."""
        k = int(self._header[0])
        i = k % self.capacity
        self._seq[i] = -1
        self._data[i] = record
        self._seq[i] = k
        self._header[0] = k + 1

    def read(self) -> np.ndarray:
        """Consumer: every record written since the last read that is still intact, oldest first (a copy)."""
        end = int(self._header[0])
        start = max(self._read, end - self.capacity)
        self.lost += start - self._read
        if start >= end:
            return np.zeros((0, self.width), np.float32)
        ks = np.arange(start, end)
        slots = ks % self.capacity
        out = self._data[slots].copy()
        intact = self._seq[slots] == ks  # checked after the copy: a slot rewritten meanwhile fails it
        self.lost += int(np.count_nonzero(~intact))
        self._read = end
        return out if intact.all() else out[intact]


class WeightBoard(_Block):
    def __init__(self, size: int, name: str | None = None):
        self.size = size
        super().__init__(8 + size * 4, name)
        self._version = np.ndarray((1,), np.int64, self.shm.buf, 0)
        self._data = np.ndarray((size,), np.float32, self.shm.buf, 8)
        if self.owner:
            self._version[0] = 0

    @property
    def ref(self) -> BlockRef:
        return BlockRef(self.shm.name, (self.size,))

    @classmethod
    def attach(cls, ref: BlockRef) -> WeightBoard:
        return cls(ref.shape[0], name=ref.name)

    @property
    def version(self) -> int:
        return int(self._version[0])

    def publish(self, flat: np.ndarray) -> int:
        """Writer (one only): returns the new even version."""
        v = int(self._version[0])
        self._version[0] = v + 1
        self._data[:] = flat
        self._version[0] = v + 2
        return v + 2

    def poll(self, have: int, out: np.ndarray) -> int | None:
        """Reader: copy a newer, complete vector into ``out`` and return its version; None when there is
        nothing new or the writer was mid-update (``out`` may then hold a torn copy: don't use it)."""
        v = int(self._version[0])
        if v == have or v % 2 or v == 0:
            return None
        np.copyto(out, self._data)
        return v if int(self._version[0]) == v else None


class LearnerStatus(_Block):
    """float64 cells. States: 0 starting, 1 running, 2 finished, 3 failed."""

    HEARTBEAT, UPDATES, RECEIVED, LOST, STATE, STOP, CRITIC_LOSS, ALPHA, ONLINE, PRIOR = range(10)
    STARTING, RUNNING, FINISHED, FAILED = 0.0, 1.0, 2.0, 3.0
    _CELLS = 16

    def __init__(self, name: str | None = None):
        super().__init__(self._CELLS * 8, name)
        self.cells = np.ndarray((self._CELLS,), np.float64, self.shm.buf, 0)
        if self.owner:
            self.cells[:] = 0.0
            self.cells[self.HEARTBEAT] = -np.inf

    @property
    def ref(self) -> BlockRef:
        return BlockRef(self.shm.name, ())

    @classmethod
    def attach(cls, ref: BlockRef) -> LearnerStatus:
        return cls(name=ref.name)

    def beat(self) -> None:
        self.cells[self.HEARTBEAT] = time.monotonic()

    def heartbeat_age(self, now: float | None = None) -> float:
        return (time.monotonic() if now is None else now) - float(self.cells[self.HEARTBEAT])

    @property
    def updates(self) -> int:
        return int(self.cells[self.UPDATES])

    @property
    def state(self) -> float:
        return float(self.cells[self.STATE])

    def request_stop(self) -> None:
        self.cells[self.STOP] = 1.0

    @property
    def stop_requested(self) -> bool:
        return bool(self.cells[self.STOP])

    def summary(self) -> dict[str, float]:
        c = self.cells
        names = {"updates": self.UPDATES, "received": self.RECEIVED, "lost": self.LOST, "critic_loss": self.CRITIC_LOSS,
                 "alpha": self.ALPHA, "online_transitions": self.ONLINE, "prior_transitions": self.PRIOR}
        return {k: float(c[i]) for k, i in names.items()} | {"state": ("starting", "running", "finished",
                                                                       "failed")[int(c[self.STATE])]}
