"""Deadline checks of the safety chain: how many policy deadlines a tick missed, and the overrun fault.

The chain's per-tick filters (robot_rl.safety.filters) judge a command; these judge its timing: the deadlines
missed since the previous tick (:func:`overrun_check`, run by every tick) and, just before a command is sent,
those that passed while its own tick ran (:func:`late_command_check`). Pure functions, as every filter.
"""

from __future__ import annotations

import math

from robot_rl.safety.filters import OVERRUN, SafetyEvent, SafetyLimits


def missed_deadlines(latency_s: float, period_s: float) -> int:
    """Deadlines that passed while one policy tick ran: 25 ms at a 20 ms period → 1, 50 → 2, 100 → 4."""
    return max(0, math.ceil(latency_s / period_s - 1e-9) - 1)


def overrun_check(missed: int, consecutive: int, limits: SafetyLimits) -> tuple[int, SafetyEvent | None]:
    """Count deadlines missed in a row; fault when more than max_consecutive_overruns.

    ``missed`` is the number of deadlines that passed since the previous tick (0: on time, see
    :func:`missed_deadlines`). Consecutive counts deadlines, not late ticks, so one long stall (a
    100 ms hang at 20 ms is 4 periods without a new command) counts like four short overruns in a row,
    as libfranka counts dropped packets. An on-time tick resets the count.
    """
    if missed <= 0:
        return 0, None
    consecutive += missed
    limit = limits.max_consecutive_overruns
    if consecutive > limit:
        detail = f"{consecutive} policy deadlines missed in a row (limit {limit})"
        return consecutive, SafetyEvent(OVERRUN, True, detail)
    return consecutive, SafetyEvent(OVERRUN, False, f"policy tick missed {missed} deadline(s), {consecutive} in a row")


def late_command_check(missed_in_tick: int, consecutive: int, limits: SafetyLimits) -> SafetyEvent | None:
    """The overrun check once more, just before a tick's command is sent: fault when the deadlines that passed
    while the tick ran push the count past max_consecutive_overruns.

    ``missed_in_tick``: deadlines after this tick's own that have already passed (a stall between its read
    and its write: SIGSTOP, a swapping machine, a blocking call); ``consecutive``: those missed in a row
    before it (the chain's count after this tick's :func:`overrun_check`). Past the limit the command is
    older than the chain lets any command be - the next tick would fault on exactly these deadlines - so the
    fault comes now and the command is never sent. Within it: None, and nothing is counted here (the next
    tick counts these deadlines, as before).
    """
    if missed_in_tick <= 0:
        return None
    total, limit = consecutive + missed_in_tick, limits.max_consecutive_overruns
    if total <= limit:
        return None
    detail = (f"{total} policy deadlines missed in a row (limit {limit}), {missed_in_tick} of them while this tick "
              "ran: its command was not sent")
    return SafetyEvent(OVERRUN, True, detail)
