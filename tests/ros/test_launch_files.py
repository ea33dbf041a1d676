"""The launch files declare the documented arguments, and the README's tables say exactly that.

Without the ROS `launch` package the files are read with `ast` (every DeclareLaunchArgument call with
literal name, default and description); with it, they are also loaded and run through
generate_launch_description().
"""

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from robot_rl.robots.spec import REPO_ROOT

LAUNCH_DIR = REPO_ROOT / "launch"
README = REPO_ROOT / "ros_ws" / "README.md"
LAUNCH_FILES = ("deploy.launch.py", "sim.launch.py", "teleop.launch.py")
COLCON_OUTPUT_DIRS = ("build", "install", "log")


def declared_arguments(path: Path) -> dict[str, tuple[str, str]]:
    """name → (default, description) of every DeclareLaunchArgument(...) call in a launch file."""
    arguments = {}
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None))
                == "DeclareLaunchArgument"):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        name = node.args[0] if node.args else keywords["name"]
        values = [name, keywords.get("default_value"), keywords.get("description")]
        assert all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in values), (
            f"{path.name}:{node.lineno}: DeclareLaunchArgument needs literal name, default_value and description"
        )
        assert name.value not in arguments, f"{path.name}: argument {name.value!r} declared twice"
        arguments[name.value] = (values[1].value, values[2].value)
    return arguments


def readme_tables() -> dict[str, dict[str, tuple[str, str]]]:
    """launch file → {argument: (default, description)} from the README's '### `x.launch.py`' tables."""
    tables: dict[str, dict[str, tuple[str, str]]] = {}
    current = None
    for line in README.read_text().splitlines():
        heading = re.fullmatch(r"### `([\w.]+\.launch\.py)`", line.strip())
        if heading:
            current = tables.setdefault(heading[1], {})
            continue
        if line.startswith("#"):
            current = None
        if current is None or not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 3, f"README row {line!r}: want | argument | default | description |"
        name, default, description = cells
        default = default.strip("`")
        default = "" if default == '""' else default
        current[name.strip("`")] = (default, description)
    return tables


@pytest.mark.parametrize("name", LAUNCH_FILES)
def test_launch_file_has_a_launch_description(name):
    tree = ast.parse((LAUNCH_DIR / name).read_text())
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in functions


def test_deploy_declares_the_documented_arguments_with_sim_bridge_defaults():
    arguments = declared_arguments(LAUNCH_DIR / "deploy.launch.py")
    assert {"robot", "policy", "interface", "params_file", "namespace"} <= set(arguments)
    assert arguments["robot"][0] == "a1"
    assert arguments["policy"][0] == "policies/a1_flat/policy.onnx"
    assert arguments["interface"][0] == ""  # the robot's own: unitree_dds for the A1 (see gen_config)
    for name, (_, description) in arguments.items():
        assert description, f"deploy.launch.py: argument {name!r} has no description"


def test_sim_declares_no_interface_and_reuses_the_deploy_launch_with_unitree_dds():
    # Including deploy.launch.py would list its interface argument, which the sim silently overrode.
    sim = LAUNCH_DIR / "sim.launch.py"
    arguments = declared_arguments(sim)
    assert {"robot", "policy", "params_file", "namespace", "autostart", "link_domain_id"} == set(arguments)
    assert "interface" not in arguments
    assert set(arguments) - {"link_domain_id"} < set(declared_arguments(LAUNCH_DIR / "deploy.launch.py"))
    text = sim.read_text()
    assert "IncludeLaunchDescription" not in text
    assert '"robot-rl", "bridge", "--robot", robot, "--domain-id", str(domain)' in text
    assert 'deploy_actions(context, interface="unitree_dds", dds_domain_id=domain)' in text
    assert "exit_shutdown_reason(context.is_shutdown" in text


def test_readme_tables_match_the_launch_files():
    tables = readme_tables()
    assert set(tables) == set(LAUNCH_FILES)
    for name in LAUNCH_FILES:
        declared = declared_arguments(LAUNCH_DIR / name)
        assert tables[name] == declared, f"ros_ws/README.md's table for {name} differs from its arguments"


def test_launch_files_are_installed_from_the_top_level_launch_dir():
    setup_py = (REPO_ROOT / "ros_ws" / "src" / "robot_rl" / "setup.py").read_text()
    assert 'glob("../../../launch/*.launch.py")' in setup_py
    # colcon's build/, install/ and log/ (after the README's own `colcon build`) hold installed copies.
    stray = [p for p in (REPO_ROOT / "ros_ws").rglob("*.launch.py")
             if p.relative_to(REPO_ROOT / "ros_ws").parts[0] not in COLCON_OUTPUT_DIRS]
    assert not stray, f"launch files live only in launch/: {stray}"


def test_colcon_outputs_are_skipped_by_the_stray_launch_file_check(tmp_path):
    installed = REPO_ROOT / "ros_ws" / "install" / "robot_rl" / "share" / "robot_rl" / "launch"
    assert installed.relative_to(REPO_ROOT / "ros_ws").parts[0] in COLCON_OUTPUT_DIRS
    assert (REPO_ROOT / "ros_ws" / "src").relative_to(REPO_ROOT / "ros_ws").parts[0] not in COLCON_OUTPUT_DIRS


def _ros_launch_available() -> bool:
    # The repository's own launch/ directory would import as a namespace package; the real one has this.
    try:
        from launch import LaunchDescription  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _ros_launch_available(), reason="the ROS 2 'launch' package is not installed (no ROS 2 here)")
@pytest.mark.parametrize("name", LAUNCH_FILES)
def test_launch_file_loads_with_ros_launch(name):
    from launch.actions import DeclareLaunchArgument

    spec = importlib.util.spec_from_file_location(name.replace(".", "_"), LAUNCH_DIR / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    declared = {a.name: a for a in description.entities if isinstance(a, DeclareLaunchArgument)}
    assert set(declared) == set(declared_arguments(LAUNCH_DIR / name))
