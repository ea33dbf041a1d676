"""ament_python build of the ROS 2 package ``robot_rl`` (Python module ``robot_rl_ros``).

The launch files live only in the repository's top-level ``launch/``; they are installed from there into
``share/robot_rl/launch`` so ``ros2 launch robot_rl deploy.launch.py`` finds them.
"""

from glob import glob
from pathlib import Path

from setuptools import setup

PACKAGE = "robot_rl"  # the ROS package name (package.xml); the Python module is robot_rl_ros
HERE = Path(__file__).resolve().parent

# Paths relative to this file: colcon and setuptools run setup.py from this directory.
LAUNCH_FILES = sorted(glob("../../../launch/*.launch.py"))
if not LAUNCH_FILES:
    raise SystemExit(f"no launch files found in {(HERE / '../../../launch').resolve()} (the repository's launch/)")
LAUNCH_HELPERS = ["../../../launch/launch_logic.py"]  # loaded by path by the launch files beside it

setup(
    # Not "robot_rl": the repository's own distribution is robot-rl (same normalized name), and two
    # distributions of one name on sys.path confuse pip and importlib.metadata once the workspace is sourced.
    name="robot_rl_ros",
    version="0.1.0",
    packages=["robot_rl_ros"],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", LAUNCH_FILES + LAUNCH_HELPERS),
        (f"share/{PACKAGE}/config", sorted(glob("config/*.yaml"))),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="robot_rl maintainers",
    maintainer_email="robot-rl@example.com",
    description="ROS 2 nodes over the robot_rl deploy runtime",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "deploy_node = robot_rl_ros.deploy_node:main",
            "teleop_node = robot_rl_ros.teleop_node:main",
            "recorder_node = robot_rl_ros.recorder_node:main",
        ],
    },
)
