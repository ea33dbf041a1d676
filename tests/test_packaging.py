"""The installable package: a wheel carries every robot spec and the demo's policy as package data, and an
installed (not editable) copy finds them with no checkout around. `make check-wheel` (in CI) goes further: a
fresh venv, the extras, the CLI and the sim2sim gate from outside the repository."""

from __future__ import annotations

import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from robot_rl.robots.spec import available_robots, load_robot

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "hardware" / "robots").glob("*.yaml"))
# What setup.py maps into the wheel: package → (checkout directory, patterns).
SHIPPED = runpy.run_path(str(ROOT / "setup.py"), run_name="not_main")["SHIPPED"]


def _package_path(package: str) -> str:
    return package.replace(".", "/")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built (no deps, no isolation: the running environment's setuptools) from a clean copy of the
    sources it is made of, so that no build/ left in the checkout can leak in."""
    if importlib.util.find_spec("setuptools") is None or importlib.util.find_spec("pip") is None:
        pytest.skip("pip and setuptools are needed to build the wheel (the build backend is unavailable)")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for directory in ("robot_rl", *(source for source, _ in SHIPPED.values())):
        shutil.copytree(ROOT / directory, src / directory, ignore=ignore)
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
           "--wheel-dir", str(tmp / "dist"), str(src)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"
    (built,) = (tmp / "dist").glob("robot_rl-*.whl")
    return built


def test_wheel_carries_every_spec_and_the_demo_policy(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    hardware = _package_path(next(p for p, (source, _) in SHIPPED.items() if source == "hardware"))
    assert SPECS, "no specs in hardware/robots"
    for spec in SPECS:
        assert f"{hardware}/robots/{spec.name}" in names, f"{spec.name} is not in {wheel.name}"
    # Everything else under hardware/ too: the DDS config users point CYCLONEDDS_URI at, the README errors cite.
    for path in (ROOT / "hardware").rglob("*"):
        if path.is_file():
            assert f"{hardware}/{path.relative_to(ROOT / 'hardware').as_posix()}" in names
    assert "robot_rl/_package_data/policies/a1_flat/policy.onnx" in names
    # One copy in the checkout: the data is mapped in at build time, never kept inside the package's sources.
    assert not (ROOT / "robot_rl" / "_package_data").exists()


def _run_installed(site: Path, cwd: Path, code: str, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in ("ROBOT_RL_HARDWARE_DIR", "PYTHONPATH")}
    environ.update(PYTHONPATH=str(site), **env)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=environ,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_installed_package_finds_its_specs_without_a_checkout(wheel: Path, tmp_path: Path):
    site = tmp_path / "site"  # the wheel unpacked, as pip installs it into site-packages
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = """
        import json, robot_rl
        from robot_rl.evaluation.demo import DEFAULT_POLICY, resolve_policy
        from robot_rl.robots.spec import HARDWARE_DIR, available_robots, checkout_root, load_robot
        from robot_rl.ros.gen_config import gen_ros_config, render_params
        print(json.dumps({
            "package": robot_rl.__file__, "hardware": str(HARDWARE_DIR), "checkout": str(checkout_root()),
            "robots": {name: [load_robot(name).spec_hash, load_robot(name).source_file] for name in available_robots()},
            "policy": str(resolve_policy(DEFAULT_POLICY)), "gen_ros_config": gen_ros_config(),
            "a1_params": render_params(load_robot("a1")),
        }))
    """
    found = _run_installed(site, elsewhere, code)
    assert Path(found["package"]).is_relative_to(site), "imported the checkout's robot_rl, not the wheel's"
    assert found["checkout"] == "None"
    assert Path(found["hardware"]) == site / "robot_rl" / "_package_data" / "hardware"
    assert sorted(found["robots"]) == available_robots() == [p.stem for p in SPECS]
    for name, (spec_hash, source) in found["robots"].items():
        assert spec_hash == load_robot(name).spec_hash
        assert Path(source).is_relative_to(site)
    assert Path(found["policy"]) == site / "robot_rl" / "_package_data" / "policies" / "a1_flat" / "policy.onnx"
    assert found["gen_ros_config"] == 2  # no ros_ws outside a checkout: it asks for --out-dir instead
    # … and what it writes there is what the checkout commits (the header names hardware/robots/a1.yaml).
    assert found["a1_params"] == (ROOT / "ros_ws" / "src" / "robot_rl" / "config" / "a1_params.yaml").read_text()

    # ROBOT_RL_HARDWARE_DIR still overrides the package data.
    lab = tmp_path / "lab"
    (lab / "robots").mkdir(parents=True)
    shutil.copy2(ROOT / "hardware" / "robots" / "a1.yaml", lab / "robots" / "a1.yaml")
    code = """
        import json
        from robot_rl.robots.spec import available_robots, load_robot
        print(json.dumps({"robots": available_robots(), "a1": load_robot("a1").source_file}))
    """
    found = _run_installed(site, elsewhere, code, ROBOT_RL_HARDWARE_DIR=str(lab))
    assert found == {"robots": ["a1"], "a1": str(lab / "robots" / "a1.yaml")}
