#!/usr/bin/env bash
# The installable package: build a wheel, install it (not editable) into a fresh virtual environment with only
# the extras the sim2sim gate needs, and from a directory outside the repository run `robot-rl robot list` and
# the sim2sim gate on a shipped policy. Catches what an editable install hides: specs or data missing from the
# wheel, code that finds files through the checkout. Exits non-zero on any failure.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PY:-python3}"
start=$SECONDS
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
step() { printf '\n== check-wheel: %s (%ss)\n' "$*" "$((SECONDS - start))"; }

step "source copy"
# Build from a copy of the working tree (tracked and untracked-but-not-ignored files) so that no stale build/
# in the checkout leaks into the wheel and the checkout is left as it was.
mkdir "$work/src"
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$repo" ls-files -z --cached --others --exclude-standard \
        | tar -C "$repo" --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$work/src" -xf -
else
    cp -a "$repo/." "$work/src/"
fi

step "fresh venv"
"$PY" -m venv "$work/venv"
bin="$work/venv/bin"
"$bin/pip" install --quiet --upgrade pip

step "build the wheel"
"$bin/pip" wheel --quiet --no-deps --wheel-dir "$work/dist" "$work/src"
wheel="$(ls "$work"/dist/robot_rl-*.whl)"
echo "built $(basename "$wheel")"

step "install it with the [sim,deploy] extras"
# sim2sim needs the simulators (sim) and onnxruntime (deploy), not torch: an import of torch there would fail
# below, which is the point. If it ever needs torch, install exactly torch==2.13.0 first (the CPU build).
"$bin/pip" install --quiet "${wheel}[sim,deploy]"

step "robot-rl from outside the repository"
mkdir "$work/elsewhere"
cd "$work/elsewhere"
unset ROBOT_RL_HARDWARE_DIR
"$bin/python" - "$repo" <<'PY'
import sys
from pathlib import Path

import robot_rl
from robot_rl.robots.spec import HARDWARE_DIR, available_robots

repo = Path(sys.argv[1])
where = Path(robot_rl.__file__).resolve()
assert repo.resolve() not in where.parents, f"robot_rl imported from the checkout: {where}"
assert Path(sys.prefix).resolve() in where.parents, f"robot_rl not from the fresh venv: {where}"
specs = sorted(p.stem for p in (repo / "hardware" / "robots").glob("*.yaml"))
assert available_robots() == specs, f"installed specs {available_robots()} != hardware/robots {specs}"
print(f"robot_rl from {where.parent}; specs from {HARDWARE_DIR}: {', '.join(specs)}")
PY
"$bin/robot-rl" robot list
"$bin/robot-rl" sim2sim --policy "$repo/policies/a1_flat/policy.onnx" --out "$work/elsewhere/sim2sim"
# The main job: `robot-rl demo` runs the policy the package ships (not the stand-check fallback).
"$bin/python" -c "from robot_rl.evaluation.demo import DEFAULT_POLICY, resolve_policy; \
p = resolve_policy(DEFAULT_POLICY); assert p is not None and 'site-packages' in str(p), p; print('demo policy:', p)"
"$bin/robot-rl" demo --out-dir "$work/elsewhere/demo"
test -f "$work/elsewhere/demo/gate.json"

step "passed"
