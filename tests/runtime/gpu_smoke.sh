#!/usr/bin/env bash
# One CUDA-backend step of the 10M model on one GPU; skips (77) without a GPU.
set -euo pipefail
bin=$1 data=$2
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU present (nvidia-smi finds none); the cuda backend is tested by tests/gpu/validate.sh"
  exit 77
fi
if "$bin" measure --backend cuda --hf-config "$data/llama_10m_config.json" --ds-config "$data/ds_stage2.json" \
     --seq-len 64 --steps 1 --format json 2>&1 | grep -q "built without the CUDA backend"; then
  echo "SKIP: this zeromem was built without the CUDA backend"
  exit 77
fi
"$bin" validate --backend cuda --hf-config "$data/llama_10m_config.json" --ds-config "$data/ds_stage2.json" --seq-len 64
