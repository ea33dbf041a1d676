#!/usr/bin/env bash
# The warp backend's checks on a GPU, in one go (a session lent a GPU; ≈ 10 min with MINUTES=5):
#   1. the equivalence and training tests, which add cuda:0 to warp's CPU device where torch sees a GPU;
#   2. env throughput vs number of envs (goal: ≥ 100k A1 policy steps/s on an H100-class card);
#   3. a short a1-flat training run on the GPU, then its checkpoints against the walking criterion.
# Needs the gpu extra and a CUDA build of torch 2.13.0 (the project's venv has the CPU build). Usage:
#   PY=.venv/bin/python MINUTES=5 bash benchmarks/warp_gpu_check.sh [out_dir]
set -euo pipefail
PY="${PY:-python}"
MINUTES="${MINUTES:-5}"
out="${1:-gpu_check}"
mkdir -p "$out"
"$PY" -c "import torch, warp; assert torch.cuda.is_available(), 'torch has no CUDA: install torch 2.13.0 CUDA build'"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"
"$PY" -m pytest tests/sim/test_warp_vec_env.py -q -p no:cacheprovider -k "cuda" 2>&1 | tee "$out/tests.txt"
"$PY" benchmarks/bench_env_throughput.py --backend warp --device cuda:0 --envs 1024 4096 16384 --repeats 3 \
    --steps 100 --markdown-out "$out/RESULTS_env_throughput.md" 2>&1 | tail -12
"$PY" sim/train.py --task a1-flat --backend warp --device cuda:0 --num-envs 4096 --max-minutes "$MINUTES" \
    --log-dir "$out/runs" --no-progress 2>&1 | tail -3
run="$(ls -d "$out"/runs/a1-flat/*/ | tail -1)"
"$PY" benchmarks/bench_time_to_walk.py "$run" --every 5 --markdown-out "$out/RESULTS_time_to_walk_gpu.md" \
    --training-command "sim/train.py --task a1-flat --backend warp --device cuda:0 --num-envs 4096 --max-minutes $MINUTES"
