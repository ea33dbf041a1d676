"""The training world's model: the per-env copies' memory check."""

from pathlib import Path

import pytest

from robot_rl.robots.spec import load_robot
from robot_rl.sim.world import ModelCopiesDoNotFit, available_memory_bytes, build_training_world, check_model_copies_fit


@pytest.fixture(scope="module")
def a1_model():
    return build_training_world(load_robot("a1"), None).robot.model


def test_copies_that_fit_pass_and_those_that_do_not_name_how_many_would(a1_model):
    size = a1_model.nbuffer
    check_model_copies_fit(a1_model, 90, "task 'x'", available=100 * size)  # 90 % of what is available
    with pytest.raises(ModelCopiesDoNotFit) as err:
        check_model_copies_fit(a1_model, 91, "task 'x'", available=100 * size)
    message = str(err.value)
    assert "\n" not in message and message.startswith("task 'x': 91 envs need")
    assert "use --num-envs 90 or fewer, or --backend warp" in message
    assert isinstance(err.value, MemoryError)


def test_without_a_memory_figure_nothing_is_refused(a1_model, monkeypatch):
    monkeypatch.setattr("builtins.open", lambda *a, **k: (_ for _ in ()).throw(OSError("no /proc")))
    assert available_memory_bytes() is None
    check_model_copies_fit(a1_model, 10**9, "task 'x'")


def test_this_machine_reports_its_available_memory():
    if not Path("/proc/meminfo").is_file():
        pytest.skip("no /proc/meminfo on this system")
    available = available_memory_bytes()
    assert available is not None and available > 0
