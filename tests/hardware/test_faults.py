"""Fault decisions are pure functions of (config, time or message index): reproducible and checkable."""

import pytest

from robot_rl.hardware.faults import FaultConfig, FaultConfigError, uniform


def test_no_fault_by_default() -> None:
    faults = FaultConfig()
    assert not faults.any and faults.describe() == "none"
    assert not any(faults.drop_state(i, 0.002 * i) for i in range(1000))
    assert not faults.frozen(1e6) and not faults.killed(1e6) and not faults.corrupt_command(0)
    assert faults.release_time(1.25) == 1.25


def test_random_drops_are_reproducible_and_at_the_configured_rate() -> None:
    faults = FaultConfig(drop_probability=0.3, seed=11)
    decisions = [faults.drop_state(i, 0.0) for i in range(20000)]
    assert decisions == [FaultConfig(drop_probability=0.3, seed=11).drop_state(i, 0.0) for i in range(20000)]
    assert sum(decisions) / len(decisions) == pytest.approx(0.3, abs=0.015)
    other_seed = [FaultConfig(drop_probability=0.3, seed=12).drop_state(i, 0.0) for i in range(20000)]
    assert decisions != other_seed
    values = [uniform(1, 2, i) for i in range(10000)]
    assert min(values) >= 0.0 and max(values) < 1.0 and sum(values) / len(values) == pytest.approx(0.5, abs=0.02)


def test_drop_windows_are_half_open() -> None:
    faults = FaultConfig(drop_windows=((1.0, 1.5), (3.0, 3.1)))
    assert [faults.drop_state(0, t) for t in (0.999, 1.0, 1.499, 1.5, 3.05, 3.1)] == \
        [False, True, True, False, True, False]


def test_time_triggered_faults() -> None:
    faults = FaultConfig(delay_s=0.04, freeze_at_s=2.0, kill_at_s=5.0, corrupt_command_probability=1.0)
    assert faults.release_time(1.0) == pytest.approx(1.04)
    assert not faults.frozen(1.998) and faults.frozen(2.0)
    assert not faults.killed(4.999) and faults.killed(5.0)
    assert all(faults.corrupt_command(i) for i in range(100))
    assert faults.describe() == "delay 40 ms, freeze at 2 s, corrupt LowCmd 1, kill at 5 s"
    assert faults.any


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"drop_probability": 1.5}, "drop_probability must be a probability in"),
    ({"corrupt_command_probability": -0.1}, "corrupt_command_probability must be a probability"),
    ({"delay_s": float("inf")}, "delay_s must be a finite number >= 0"),
    ({"freeze_at_s": -1.0}, "freeze_at_s must be None or a time"),
    ({"kill_at_s": float("nan")}, "kill_at_s must be None or a time"),
    ({"drop_windows": ((2.0, 1.0),)}, r"drop_windows\[0\] = \(2.0, 1.0\): need 0 <= start < end"),
    ({"drop_windows": ((1.0,),)}, r"drop_windows\[0\] must be \(start_s, end_s\)"),
])
def test_bad_parameters_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(FaultConfigError, match=message):
        FaultConfig(**kwargs)
