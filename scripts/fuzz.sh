#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang-14 + ASan + UBSan in
# build-fuzz/ and runs each for a fixed time (default 60 s), seeded from
# data/, tests/data/ and tests/fuzz/seeds/. Run from anywhere:
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     (targets: ds_config hf_config sizes stack run_log snapshot module_tree launch_file calibration_profile cli)
# Crashes, hangs (> 10 s per input) and sanitizer reports are written to
# build-fuzz/artifacts/<target>/; each must become a regression test
# (tests/data/malformed/ or tests/fuzz_regression_test.cpp). The summary
# line per target gives the executions run. Exits 1 when any target found
# something (libFuzzer's exit status is nonzero then).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(ds_config hf_config sizes stack run_log snapshot module_tree launch_file calibration_profile cli)
CC="${CC:-clang-14}" CXX="${CXX:-clang++-14}" cmake -S . -B build-fuzz -DZEROMEM_FUZZ=ON -DBUILD_TESTING=OFF \
  -DZEROMEM_BUILD_BENCH=OFF -DZEROMEM_BUILD_GUI=OFF -DZEROMEM_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j2 --target $(printf 'fuzz_%s ' "${targets[@]}")
status=0
for t in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$t"
  mkdir -p "$corpus" "build-fuzz/artifacts/$t"
  case "$t" in
    ds_config) seeds=(data/ds_configs tests/data/malformed tests/data/check tests/data/check_nvme_zero3.json) ;;
    hf_config) seeds=(tests/data/hf_configs data/models) ;;
    sizes) seeds=(tests/fuzz/seeds/sizes) ;;
    stack) seeds=(tests/fuzz/seeds/stack) ;;
    run_log) seeds=(tests/data/run_logs) ;;
    snapshot) seeds=(tests/fuzz/seeds/snapshot) ;;
    module_tree) seeds=(tests/data/module_trees tests/fuzz/seeds/module_tree tests/data/malformed/module_tree_*.json) ;;
    launch_file) seeds=(tests/data/launch/llamafactory/examples/train_full tests/data/launch/llamafactory/examples/train_qlora
                        tests/data/launch/llamafactory/examples/deepspeed tests/data/launch/accelerate/config_yaml_templates
                        tests/data/launch/trainer) ;;
    calibration_profile) seeds=(tests/fuzz/seeds/calibration_profile) ;;
    cli) seeds=(tests/fuzz/seeds/cli) ;;
  esac
  for s in "${seeds[@]}"; do
    if [ -d "$s" ]; then find "$s" -maxdepth 1 -type f -exec cp {} "$corpus/" \; ; else cp "$s" "$corpus/"; fi
  done
  echo "== fuzz_$t for ${secs} s"
  set +e
  "build-fuzz/tests/fuzz/fuzz_$t" "$corpus" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="build-fuzz/artifacts/$t/" -print_final_stats=1 >"build-fuzz/$t.log" 2>&1
  rc=$?
  set -e
  { grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build-fuzz/$t.log" || true; } | tr '\n' ' '
  echo "exit=$rc artifacts=$(ls "build-fuzz/artifacts/$t" | wc -l)"
  [ "$rc" -eq 0 ] || { status=1; tail -n 30 "build-fuzz/$t.log"; }
done
exit "$status"
