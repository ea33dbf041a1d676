"""The supervisor's decision logic, driven step by step with healthy streams and injected faults: a
controller that dies, hangs, stutters, comes back; bad clocks; release and loss of the controller."""

from __future__ import annotations

import math

import pytest

from robot_rl.robots.spec import load_robot
from robot_rl.safety.supervisor import (
    SupervisorDecision,
    SupervisorInput,
    SupervisorLimits,
    SupervisorMode,
    SupervisorState,
    supervise_step,
)

LIMITS = SupervisorLimits(stale_s=0.1, handback_s=0.1)
DT = 0.002  # the supervisor steps at the hardware period
W, D = SupervisorMode.WATCHING, SupervisorMode.DAMPING


def run(steps: list[SupervisorInput], state: SupervisorState | None = None) -> list[SupervisorDecision]:
    state = state or SupervisorState()
    out = []
    for inp in steps:
        decision = supervise_step(LIMITS, state, inp)
        state = decision.state
        out.append(decision)
    return out


def stream(t0: float, t1: float, every: float = DT, gone: bool = False) -> list[SupervisorInput]:
    """Steps from t0 to t1, a controller command arriving on each (every ``every``)."""
    n = round((t1 - t0) / DT)
    k = max(1, round(every / DT))
    return [SupervisorInput(t0 + i * DT, t0 + i * DT if i % k == 0 else None, controller_gone=gone)
            for i in range(n)]


def silence(t0: float, t1: float, gone: bool = False) -> list[SupervisorInput]:
    return [SupervisorInput(t0 + i * DT, controller_gone=gone) for i in range(round((t1 - t0) / DT))]


def watching(t: float = 1.0) -> SupervisorState:
    return run(stream(0.0, t))[-1].state


def test_limits_come_from_the_spec_stale_limit() -> None:
    spec = load_robot("a1")
    limits = SupervisorLimits.from_spec(spec)
    assert limits.stale_s == pytest.approx(spec.safety.stale_state_periods * spec.timing.policy_period_s)
    assert limits.handback_s == limits.stale_s


@pytest.mark.parametrize("value", [0.0, -0.1, math.nan, math.inf, "0.1", None])
def test_limits_refuse_nonsense(value: object) -> None:
    with pytest.raises(ValueError, match="stale_s"):
        SupervisorLimits(stale_s=value, handback_s=0.1)  # type: ignore[arg-type]


def test_waits_without_damping_until_the_controller_commands() -> None:
    out = run(silence(0.0, 5.0))
    assert all(d.state.mode is SupervisorMode.WAITING and not d.send_damping for d in out)
    first = run(silence(0.0, 1.0) + stream(1.0, 1.01))[-1]
    assert first.state.mode is W and not first.send_damping


def test_controller_gone_before_commanding_ends_the_supervisor() -> None:
    d = run([*silence(0.0, 0.1), SupervisorInput(0.1, controller_gone=True)])[-1]
    assert d.state.mode is SupervisorMode.DONE and not d.send_damping and "before commanding" in d.event


@pytest.mark.parametrize("every", [DT, 0.02, 0.098])
def test_a_healthy_stream_is_never_interfered_with(every: float) -> None:
    """500 Hz re-publish, the 50 Hz loop alone, and a loop that is just under the limit late every time."""
    out = run(stream(0.0, 10.0, every=every))
    assert {d.state.mode for d in out[1:]} == {W}
    assert not any(d.send_damping for d in out) and out[-1].state.takeovers == 0


def test_stream_stopping_takes_over_on_the_first_step_past_the_limit() -> None:
    state = watching(1.0)
    last = state.last_command_s
    out = run(silence(1.0, 1.5), state)
    taken = next(i for i, d in enumerate(out) if d.state.mode is D)
    t_taken = 1.0 + taken * DT
    assert t_taken - last > LIMITS.stale_s and t_taken - DT - last <= LIMITS.stale_s + 1e-12
    assert out[taken].send_damping and "taking over with damping" in out[taken].event
    assert all(d.send_damping for d in out[taken:]) and out[-1].state.takeovers == 1


def test_damping_is_kept_forever_once_the_controller_is_gone() -> None:
    state = run(silence(1.0, 1.2), watching(1.0))[-1].state
    out = run(silence(1.2, 60.0, gone=True), state)
    assert all(d.send_damping and d.state.mode is D for d in out)


def test_hands_back_to_a_controller_that_commands_again_for_handback_s() -> None:
    state = run(silence(1.0, 1.5), watching(1.0))[-1].state
    out = run(stream(1.5, 1.8), state)
    back = next(i for i, d in enumerate(out) if d.state.mode is W)
    assert (1.5 + back * DT) - 1.5 >= LIMITS.handback_s - 1e-9
    assert all(d.send_damping for d in out[:back]) and not any(d.send_damping for d in out[back:])
    assert "handing back" in out[back].event and out[-1].state.handbacks == 1
    # ...and watches it again: a second death is a second takeover.
    again = run(silence(1.8, 2.1), out[-1].state)
    assert again[-1].state.mode is D and again[-1].state.takeovers == 2


def test_a_stuttering_controller_does_not_get_the_robot_back() -> None:
    """Bursts of commands shorter than handback_s, separated by stale gaps: damping throughout."""
    state = run(silence(1.0, 1.5), watching(1.0))[-1].state
    steps: list[SupervisorInput] = []
    t = 1.5
    for _ in range(10):
        steps += stream(t, t + 0.06) + silence(t + 0.06, t + 0.2)
        t += 0.2
    out = run(steps, state)
    assert all(d.send_damping and d.state.mode is D for d in out)


def test_a_new_controller_after_the_old_one_died_gets_the_robot_and_the_supervisor_ends() -> None:
    state = run(silence(1.0, 1.5, gone=True), watching(1.0))[-1].state
    out = run(stream(1.5, 1.8, gone=True), state)
    done = next(i for i, d in enumerate(out) if d.state.mode is SupervisorMode.DONE)
    assert not any(d.send_damping for d in out[done:]) and "handing back, done" in out[done].event


@pytest.mark.parametrize("mode_state", ["waiting", "watching", "damping"])
def test_release_ends_the_supervisor_from_any_mode(mode_state: str) -> None:
    state = {"waiting": SupervisorState(), "watching": watching(1.0),
             "damping": run(silence(1.0, 1.5), watching(1.0))[-1].state}[mode_state]
    d = supervise_step(LIMITS, state, SupervisorInput(2.0, released=True))
    assert d.state.mode is SupervisorMode.DONE and not d.send_damping
    later = run(silence(2.0, 3.0), d.state)
    assert all(x.state.mode is SupervisorMode.DONE and not x.send_damping for x in later)


def test_non_finite_arrivals_are_not_fresh_commands() -> None:
    state = watching(1.0)
    bad = [SupervisorInput(1.0 + i * DT, math.nan if i % 2 else math.inf) for i in range(100)]
    out = run(bad, state)
    assert out[-1].state.mode is D and out[-1].send_damping


def test_a_non_finite_now_takes_over() -> None:
    d = supervise_step(LIMITS, watching(1.0), SupervisorInput(math.nan, 1.0))
    assert d.state.mode is D and d.send_damping


def test_an_arrival_in_the_future_does_not_postpone_the_takeover() -> None:
    state = watching(1.0)
    out = run([SupervisorInput(1.0, arrival=1000000000.0), *silence(1.0 + DT, 1.3)], state)
    taken = next(i for i, d in enumerate(out) if d.state.mode is D)
    assert 1.0 + taken * DT <= 1.0 + LIMITS.stale_s + 2 * DT


def test_an_old_arrival_does_not_refresh_the_stream() -> None:
    """A late-delivered command (taken now, stamped long ago) cannot keep a dead controller 'alive'."""
    state = watching(1.0)
    old = [SupervisorInput(1.0 + i * DT, arrival=0.5) for i in range(100)]
    assert run(old, state)[-1].state.mode is D


def test_a_damped_robot_is_not_handed_back_on_a_single_late_command() -> None:
    state = run(silence(1.0, 1.5), watching(1.0))[-1].state
    out = run([SupervisorInput(1.5, 1.5), *silence(1.5 + DT, 2.5)], state)
    assert all(d.send_damping and d.state.mode is D for d in out)


def test_steps_leave_an_unchanged_state_object_alone() -> None:
    state = watching(1.0)
    d = supervise_step(LIMITS, state, SupervisorInput(state.last_command_s + DT))
    assert d.state is state


def damping_stream(t0: float, t1: float) -> list[SupervisorInput]:
    """A stream whose commands are damping (the flag as the caller fills it: only when it matters)."""
    return [SupervisorInput(i.now, i.arrival, last_command_damping=True) for i in stream(t0, t1)]


def test_a_stream_that_stops_on_damping_is_left_alone() -> None:
    """The robot holds the damping command: nothing to take over (a deploy's own ending, a pause after it)."""
    state = run(damping_stream(1.0, 1.5), watching(1.0))[-1].state
    quiet = [SupervisorInput(1.5 + i * DT, last_command_damping=True) for i in range(500)]
    out = run(quiet, state)
    assert not any(d.send_damping for d in out) and out[-1].state.mode is SupervisorMode.IDLE
    assert sum(d.event is not None for d in out) == 1 and "the robot holds it" in next(d.event for d in out if d.event)
    # The controller commands again: watched again, and a stop on a pose target is taken over.
    back = run(stream(2.5, 2.6) + silence(2.6, 2.9), out[-1].state)
    assert back[0].state.mode is W and back[-1].state.mode is D and back[-1].send_damping
    # Gone while idle: nothing left to protect.
    gone = supervise_step(LIMITS, out[-1].state, SupervisorInput(2.5, controller_gone=True))
    assert gone.state.mode is SupervisorMode.DONE and "after damping" in gone.event


def test_the_damping_flag_is_not_trusted_with_a_bad_clock() -> None:
    d = supervise_step(LIMITS, watching(1.0), SupervisorInput(math.nan, last_command_damping=True))
    assert d.state.mode is D and d.send_damping
