"""``robot-rl``: one command-line entry point, subcommands dispatched to typed functions (tyro).

Each subcommand is a plain function in the package; this module only maps names to them and turns the
project's own errors into one clear line (no traceback) for the person at the terminal.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

import tyro

from robot_rl.core.errors import RobotRLError

# name → "module:function", or a nested group. Imports are lazy so `robot-rl robot show` doesn't
# import torch or mujoco.
COMMANDS: dict[str, str | dict] = {
    "demo": "robot_rl.evaluation.demo:demo",
    "sim2sim": "robot_rl.evaluation.sim2sim:sim2sim",
    "deploy": "robot_rl.control.deploy_command:deploy",
    "stand": "robot_rl.commands:stand",
    "robot": {
        "list": "robot_rl.commands:robot_list",
        "show": "robot_rl.commands:robot_show",
    },
    "train": "robot_rl.learn.train:train_command",
    "play": "robot_rl.learn.play:play_command",
    "export": "robot_rl.learn.export_checkpoint:export_checkpoint",
    "import-policy": "robot_rl.policy.importers:import_policy",
    "collect-demos": "robot_rl.learn.demos:collect_demos",
    "train-bc": "robot_rl.learn.bc:train_bc",
    "finetune": "robot_rl.learn.residual.finetune_command:finetune",
    "calibrate": "robot_rl.learn.residual.calibrated:calibrate_command",
    "model-card": "robot_rl.policy.model_card:write_model_card",
    "gen-ros-config": "robot_rl.ros.gen_config:gen_ros_config",
    "bridge": "robot_rl.hardware.sim_bridge:run_bridge",
    "supervise": "robot_rl.control.supervisor:supervise",
    "teleop": "robot_rl.teleop.session:teleop",
    "dataset": {
        "validate": "robot_rl.data.lerobot_validate:dataset_validate",
    },
    "log": {
        "summarize": "robot_rl.data.mcap_log_reader:log_summarize",
    },
}

def _resolve(target: str) -> Callable:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _usage(prog: str, group: dict) -> str:
    lines = [f"usage: {prog} COMMAND [ARGS]", "", "commands:"]
    for name, target in group.items():
        if isinstance(target, dict):
            summary = f"{', '.join(target)}"
        else:
            try:
                doc = (_resolve(target).__doc__ or "").strip().splitlines()
                summary = doc[0] if doc else ""
            except ImportError as exc:
                summary = f"(unavailable: {exc.name} is not installed)"
        lines.append(f"  {name:<10} {summary}")
    lines.append("")
    lines.append(f"Run '{prog} COMMAND --help' for a command's options.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    prog = "robot-rl"
    group: dict = COMMANDS
    while True:
        if not args or args[0] in ("-h", "--help"):
            print(_usage(prog, group))
            return 0 if args else 2
        name = args.pop(0)
        if name not in group:
            print(f"{prog}: unknown command {name!r}\n\n{_usage(prog, group)}", file=sys.stderr)
            return 2
        prog = f"{prog} {name}"
        if isinstance(group[name], dict):
            group = group[name]
            continue
        target = group[name]
        break
    try:
        func = _resolve(target)
    except ImportError as exc:
        print(
            f"error: '{prog}' needs the Python package {exc.name!r}, which is not installed.\n"
            "Install the extras: pip install -e '.[dev]' (or the 'sim', 'train', 'deploy' extra it needs).",
            file=sys.stderr,
        )
        return 2
    try:
        if getattr(func, "own_cli", False):  # parses its own arguments (e.g. a preset word, then a tyro config)
            result = func(args, prog=prog)
        else:
            result = tyro.cli(func, args=args, prog=prog)
    except RobotRLError as exc:  # a message meant for the user; anything else is a bug and keeps its traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
