#!/bin/bash
# Start-up cost of the zeromem executable as a whole process, with hyperfine,
# beside a bare C++ process (an empty main linked against the shared
# libstdc++, compiled here) and /bin/true. The in-process figures come from
# Google Benchmark (build/tests/bench/zeromem_bench).
# Usage: scripts/bench-startup.sh [BUILD_DIR]   (default: build)
# Prints hyperfine's table; `min` is the least noisy figure on a busy machine.
set -euo pipefail
# The built-in software stack, whatever Python environment is active (the
# installed deepspeed/torch/transformers would otherwise be read).
export ZEROMEM_STACK=defaults
build="${1:-build}"
zm="$build/zeromem"
[ -x "$zm" ] || { echo "no $zm: build first (cmake --build $build)" >&2; exit 2; }
command -v hyperfine >/dev/null || { echo "hyperfine is not installed (apt-get install hyperfine)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf 'int main() { return 0; }\n' >"$tmp/bare.cpp"
"${CXX:-c++}" -O2 -o "$tmp/bare" "$tmp/bare.cpp" -Wl,--no-as-needed -lstdc++
hyperfine -N --warmup 50 --runs "${RUNS:-500}" --export-json "$tmp/r.json" \
  "$zm estimate --params 7e9 --gpus 8 --stage 3" \
  "$zm estimate --model llama-2-7b --gpus 8 --gpu A100-80GB --stage 3" \
  "$zm estimate --model llama-2-70b --gpus 64 --gpu A100-80GB --stage 3" \
  "$zm compare --model llama-2-7b --gpus 8 --gpu A100-80GB --host-memory 1TB --global-batch 64 --seq-len 4096" \
  "$tmp/bare" \
  "/bin/true" >/dev/null 2>&1
python3 - "$tmp/r.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
print(f"{'command':<110} {'min ms':>7} {'median ms':>10} {'mean ms':>8}")
for r in rows:
    cmd = r["command"].replace(sys.argv[1].rsplit("/", 1)[0] + "/bare", "bare C++ process (shared libstdc++)")
    print(f"{cmd:<110} {r['min']*1e3:7.2f} {r['median']*1e3:10.2f} {r['mean']*1e3:8.2f}")
PY
