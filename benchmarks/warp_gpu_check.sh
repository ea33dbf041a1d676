#!/usr/bin/env bash
# The warp backend's checks on a GPU, in one go (a session lent a GPU; ≈ 10–12 min with MINUTES=3):
#   1. the equivalence and training tests (PPO's and FastTD3's), which add cuda:0 to warp's CPU device where
#      torch sees a GPU;
#   2. env throughput vs number of envs (goal: ≥ 100k A1 policy steps/s on an H100-class card);
#   3. the GPU race on a1-flat: PPO (4096 envs) and FastTD3 (the recipe's GPU sizes: 1024 envs, batch 32768) for
#      MINUTES each on cuda:0, then every run's checkpoints against the same walking criterion
#      (bench_time_to_walk.py: 20 episodes of 20 s at 0.5 m/s on the nominal robot, MuJoCo on the CPU).
# Needs the gpu extra and a CUDA build of torch (the project pins 2.13.0; the code avoids APIs newer than 2.11).
# Usage:
#   PY=.venv/bin/python MINUTES=3 bash benchmarks/warp_gpu_check.sh [out_dir]
# Skip steps with SKIP="tests throughput ppo fasttd3" (any subset), e.g. to rerun only the race's second half.
set -euo pipefail
PY="${PY:-python}"
MINUTES="${MINUTES:-3}"
SKIP="${SKIP:-}"
out="${1:-gpu_check}"
mkdir -p "$out"
skip() { [[ " $SKIP " == *" $1 "* ]]; }
"$PY" -c "import torch, warp; assert torch.cuda.is_available(), 'torch has no CUDA: install a CUDA build of torch'"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"
if ! skip tests; then
  "$PY" -m pytest tests/sim/test_warp_vec_env.py tests/learn/offpolicy/test_device_env.py -q -p no:cacheprovider \
      -k "cuda" 2>&1 | tee "$out/tests.txt"
fi
if ! skip throughput; then
  "$PY" benchmarks/bench_env_throughput.py --backend warp --device cuda:0 --envs 1024 4096 16384 --repeats 3 \
      --steps 100 --markdown-out "$out/RESULTS_env_throughput.md" 2>&1 | tail -12
fi
# One training run and its time-to-walk table: race <algo> <time-to-walk --every> <train flags...>
race() {
  local algo="$1" every="$2"
  shift 2
  local flags=(--task a1-flat --algo "$algo" --backend warp --device cuda:0 --max-minutes "$MINUTES" "$@")
  "$PY" sim/train.py "${flags[@]}" --log-dir "$out/runs_$algo" --no-progress 2>&1 | tail -3
  local run
  run="$(ls -d "$out/runs_$algo"/a1-flat/*/ | tail -1)"
  [[ -f "$run/profile.json" ]] && cp "$run/profile.json" "$out/profile_$algo.json"
  "$PY" benchmarks/bench_time_to_walk.py "$run" --every "$every" \
      --markdown-out "$out/RESULTS_time_to_walk_gpu_$algo.md" --training-command "sim/train.py ${flags[*]}" \
      2>&1 | tail -3
}
skip ppo || race ppo 5 --num-envs 4096
skip fasttd3 || race fasttd3 2
