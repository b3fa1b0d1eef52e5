#!/usr/bin/env bash
# GPU validation of the estimate against the cuda backend, < 10 minutes on one
# GPU: a ~1.1B-parameter Llama (TinyLlama shape) under ZeRO stages 0-3 and
# optimizer offload (stages 2 and 3), two Llama-2-70B-shaped layers under
# stages 2 and 3, and the collective bandwidth sweep. Prints a compact
# estimated-vs-measured table and keeps every JSON under
# data/measurements/<gpu>_<date>/ (with the GPU name, driver and date).
# Usage: tests/gpu/validate.sh [build-dir]   (NP=<ranks> for more GPUs)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
np=${NP:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: no NVIDIA GPU"; exit 77; fi
if [ ! -x "$build/zeromem" ]; then
  cmake -S "$root" -B "$build" -DZEROMEM_ENABLE_CUDA=ON -DZEROMEM_BUILD_GUI=OFF -DZEROMEM_BUILD_BENCH=OFF \
        -DBUILD_TESTING=OFF -DCMAKE_CUDA_ARCHITECTURES=native >/dev/null
  cmake --build "$build" -j"$(nproc)" --target zeromem >/dev/null
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
day=$(date -u +%Y-%m-%d)
out="$root/data/measurements/$(echo "$gpu" | tr ' /' '__')_$day"
mkdir -p "$out"
printf '{"gpu": "%s", "driver": "%s", "date": "%s", "ranks": %s}\n' "$gpu" "$driver" "$day" "$np" > "$out/machine.json"
data=$root/tests/data/runtime
tmp=$(mktemp -d)
ds() {  # stage offload bucket
  printf '{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": true},
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
  "zero_optimization": {"stage": %s, "offload_optimizer": {"device": "%s"}, "reduce_bucket_size": %s}}\n' "$1" "$2" "$3" \
    > "$tmp/ds_$1_$2.json"
  echo "$tmp/ds_$1_$2.json"
}
z=$build/zeromem
status=0
run_case() {  # name model-args ds
  local name=$1 model=$2 cfg=$3
  echo "== $name"
  timeout 240 mpirun --oversubscribe -np "$np" "$z" measure --backend cuda $model --ds-config "$cfg" --seq-len 1024 \
      --steps 2 --format json --output "$out/$name.json" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; status=1; return; }
  "$z" validate $model --ds-config "$cfg" --seq-len 1024 --gpus "$np" --measurement "$out/$name.json" \
      > "$out/$name.validate.txt" || true
  # compact: one line per component at its worst phase
  awk 'NR>2 && $1 != "PASS" && $1 != "FAIL" {e=$5; sub("%","",e); a=(e<0?-e:e);
        if (!(($1) in w) || a > w[$1]) {w[$1]=a; l[$1]=sprintf("  %-18s %-16s est %9s GiB  meas %9s GiB  %8s", $1, $2, $3, $4, $5)}}
       END {for (k in l) print l[k]}' "$out/$name.validate.txt" | sort
  tail -1 "$out/$name.validate.txt"
}
tiny="--hf-config $data/llama_1b_config.json"
for s in 0 1 2 3; do run_case "llama1b_stage$s" "$tiny" "$(ds $s none 500000000)"; done
run_case "llama1b_stage2_offload" "$tiny" "$(ds 2 cpu 500000000)"
run_case "llama1b_stage3_offload" "$tiny" "$(ds 3 cpu 500000000)"
run_case "llama70b_2layers_stage2" "--model llama-2-70b --layers 2" "$(ds 2 none 500000000)"
run_case "llama70b_2layers_stage3" "--model llama-2-70b --layers 2" "$(ds 3 none 500000000)"
echo "== collectives (nccl-tests columns)"
timeout 120 mpirun --oversubscribe -np "$np" "$z" measure --backend cuda --collectives --min-bytes 1MiB --max-bytes 1GiB \
    --iters 20 --output "$out/collectives.json" | tail -12 || status=1
rm -rf "$tmp"
echo "results: $out"
exit $status
