"""`colcon build` of the ament_python package into a temporary directory, and its installed layout.

colcon-core + colcon-ros (the dev extra) build an ament_python package without a ROS installation: this is
the same build a ROS user runs in ros_ws, with every output under tmp_path.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from robot_rl.robots.spec import REPO_ROOT

PACKAGE_SRC = REPO_ROOT / "ros_ws" / "src"
LAUNCH_DIR = REPO_ROOT / "launch"
CONFIG_DIR = PACKAGE_SRC / "robot_rl" / "config"
EXECUTABLES = ("deploy_node", "teleop_node", "recorder_node")


def _colcon() -> str | None:
    beside_python = Path(sys.executable).with_name("colcon")
    return str(beside_python) if beside_python.exists() else shutil.which("colcon")


pytestmark = [
    pytest.mark.skipif(_colcon() is None, reason="colcon is not installed (pip install colcon-core colcon-ros)"),
    pytest.mark.skipif(importlib.util.find_spec("colcon_ros") is None,
                       reason="colcon-ros is not installed: colcon cannot build ament_python packages without it"),
]


def _build(tmp_path: Path, symlink: bool) -> Path:
    # colcon's per-package build directory is <build-base>/robot_rl; with --symlink-install it links data
    # files at the same relative place as in the source tree, so ../../../launch lands in tmp_path/launch.
    build_base = tmp_path / "ws" / "build"
    install_base = tmp_path / "ws" / "install"
    cmd = [_colcon(), "--log-base", str(tmp_path / "ws" / "log"), "build", "--base-paths", str(PACKAGE_SRC),
           "--build-base", str(build_base), "--install-base", str(install_base),
           "--event-handlers", "console_direct-"]
    if symlink:
        cmd.append("--symlink-install")
    env = {**os.environ, "COLCON_HOME": str(tmp_path / "colcon_home")}  # no user defaults.yaml
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"colcon build failed:\n{result.stdout}\n{result.stderr}"
    return install_base / "robot_rl"


@pytest.mark.parametrize("symlink", [False, True], ids=["copy", "symlink-install"])
def test_colcon_build_installs_the_ament_layout(tmp_path, symlink):
    prefix = _build(tmp_path, symlink)
    share = prefix / "share" / "robot_rl"
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / "robot_rl").is_file()
    assert (share / "package.xml").read_text() == (PACKAGE_SRC / "robot_rl" / "package.xml").read_text()
    for launch_file in [*LAUNCH_DIR.glob("*.launch.py"), LAUNCH_DIR / "launch_logic.py"]:
        installed = share / "launch" / launch_file.name
        assert installed.read_text() == launch_file.read_text(), f"{installed} differs from launch/{launch_file.name}"
        if symlink:
            assert installed.resolve() == launch_file.resolve()
    assert {p.name for p in (share / "launch").iterdir()} == {p.name for p in LAUNCH_DIR.glob("*.launch.py")} | {
        "launch_logic.py"}
    assert {p.name for p in (share / "config").iterdir()} == {p.name for p in CONFIG_DIR.glob("*.yaml")}
    for name in EXECUTABLES:
        executable = prefix / "lib" / "robot_rl" / name
        assert executable.is_file() and os.access(executable, os.X_OK), f"{executable} missing or not executable"
        shebang = executable.read_text().splitlines()[0]
        if not symlink:  # setup.cfg's build_scripts: the active virtualenv's interpreter, which has robot_rl
            assert shebang == "#!/usr/bin/env python3"
        else:  # `setup.py develop` writes the interpreter colcon ran on; that one must import robot_rl
            interpreter = shebang.removeprefix("#!").split()
            subprocess.run([*interpreter, "-c", "import robot_rl.ros.conversions"], check=True, timeout=60)


def test_installed_entry_points_resolve_to_the_node_modules(tmp_path):
    """The installed scripts find their entry point through the robot_rl_ros distribution's metadata."""
    prefix = _build(tmp_path, symlink=False)
    (site_packages,) = (prefix / "lib").glob("python3*/site-packages")
    assert (site_packages / "robot_rl_ros" / "deploy_node.py").is_file()
    probe = (
        "from importlib.metadata import distribution\n"
        "eps = {e.name: e.value for e in distribution('robot_rl_ros').entry_points if e.group == 'console_scripts'}\n"
        "print(sorted(eps.items()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site_packages)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(sorted((name, f"robot_rl_ros.{name}:main") for name in EXECUTABLES))
