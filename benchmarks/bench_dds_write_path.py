"""Cost per call of robot_rl.dds.cyclone_private's fast path (Cyclone internals: raw bytes in/out) against
its public-API fallback (DataWriter.write of the message / DataReader.take decoded and re-encoded), for
the full-size unitree_go and unitree_hg LowCmd_ on loopback with a matched reader in another participant.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_dds_write_path.py --n 3000

"write" is what the 500 Hz re-publish thread does per period (stored bytes vs the message written
again); "take" is what the supervisor does per command it watches (raw bytes vs decoded).
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

import tyro


@dataclass(frozen=True)
class Args:
    n: int = 3000  # calls per measurement
    repeats: int = 3  # medians over this many measurements
    domain_id: int = 0  # 0: random in 150..230


def main(args: Args) -> None:
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration

    from robot_rl.dds import close_domain, cyclone_private, make_participant
    from robot_rl.dds import unitree_go as go
    from robot_rl.dds import unitree_hg as hg
    from robot_rl.dds.crc import with_crc

    assert cyclone_private.FAST_PATH, "the fast path is not available here: nothing to compare"
    domain = args.domain_id or random.SystemRandom().randint(150, 230)
    qos = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(1))
    a, b = make_participant(domain, "lo"), make_participant(domain, "lo")
    print(f"cyclonedds {cyclone_private.CYCLONEDDS_VERSION}, {args.n} calls × {args.repeats}, µs per call (median)")
    for family in (go, hg):
        name = family.__name__.rsplit(".", 1)[-1]
        writer = DataWriter(a, Topic(a, f"bench_{name}", family.LowCmd_), qos=qos)
        reader = DataReader(b, Topic(b, f"bench_{name}", family.LowCmd_), qos=Qos(Policy.History.KeepLast(1)))
        deadline = time.monotonic() + 5
        while not writer.get_matched_subscriptions() and time.monotonic() < deadline:
            time.sleep(0.01)
        msg = with_crc(family.default_low_cmd())
        data = cyclone_private.serialize_for(writer, msg)

        def timed(fn) -> float:
            runs = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                for _ in range(args.n):
                    fn()
                runs.append(1e6 * (time.perf_counter() - start) / args.n)
            return statistics.median(runs)

        w_fast = timed(lambda: cyclone_private.write_serialized(writer, data, fast=True))  # noqa: B023
        w_pub = timed(lambda: cyclone_private.write_serialized(writer, data, msg, fast=False))  # noqa: B023

        def write_then_take(fast: bool):
            def step():
                cyclone_private.write_serialized(writer, data, fast=True)  # noqa: B023
                cyclone_private.take_serialized(reader, 1, fast=fast)  # noqa: B023
            return step

        t_fast = timed(write_then_take(True)) - w_fast
        t_pub = timed(write_then_take(False)) - w_fast
        print(f"{name:10s} write: fast {w_fast:7.1f}  public {w_pub:7.1f}  ({w_pub / w_fast:4.1f}×)   "
              f"take: fast {t_fast:7.1f}  public {t_pub:7.1f}  ({t_pub / max(t_fast, 1e-3):4.1f}×)")
    close_domain(domain)


if __name__ == "__main__":
    main(tyro.cli(Args))
