#!/usr/bin/env bash
# Frozen baseline of zeromem's outputs: run before and after a layout move, then `diff -r`; any difference
# means the move changed behaviour.
#
#   bash scripts/baseline.sh OUTDIR            # uses build/zeromem; ZEROMEM=path/to/zeromem to override
#   bash scripts/baseline.sh /tmp/before && <move, rebuild> && bash scripts/baseline.sh /tmp/after
#   diff -r /tmp/before /tmp/after
#
# Every command runs from the repository root with ZEROMEM_STACK=defaults (the built-in software stack,
# so the local Python environment does not enter) and writes OUTDIR/<name>.txt: its stdout, its stderr
# and its exit status, each under a header line. A command that fails is recorded, not skipped. The list:
#   models.txt                             zeromem models
#   estimate_<preset>_<case>.txt/.json.txt estimate --model <preset> --gpus 8 --gpu A100-80GB --host-memory 1TiB
#                                          for every preset of `zeromem models`, text and --format json, cases:
#                                          stage 0..3 with --offload-optimizer none and cpu, and stage 3 with
#                                          --offload-optimizer cpu --offload-param cpu
#   hf_<path>.txt                          estimate --hf-config F --gpus 8 --stage 3 --format json --explain
#                                          for every *.json under tests/data/hf_configs (recursively)
#   {compare,plan,fit}_<model>.txt         for llama-2-7b (8 GPUs), llama-2-70b (16 GPUs on 2 nodes, ib-hdr200),
#                                          mixtral-8x7b (8 GPUs), qwen3-30b-a3b (8 GPUs, seq 1024, global batch
#                                          16, which keeps its search to seconds); fit takes no --gpus
#   check_<file>.txt                       check F for each tests/data/ledger/*.json with a top-level
#                                          "zero_optimization" (the DeepSpeed configs there)
#   simulate_{z3,z3_offload}.txt           simulate llama-2-7b on 8 GPUs, ZeRO-3 (micro batch 2, seq 4096),
#                                          and ZeRO-3 with optimizer and parameters offloaded to the CPU
#   accuracy.md                            python3 scripts/ledger.py --write (the public-run ledger document)
# About a minute on 2 cores.
set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
zm=$(realpath "${ZEROMEM:-$root/build/zeromem}")
[ -x "$zm" ] || { echo "$0: no zeromem executable at $zm (build first, or set ZEROMEM)" >&2; exit 2; }
cd "$root" || exit 2
export ZEROMEM_STACK=defaults

# record NAME ARGS...: zeromem ARGS, its stdout, stderr and exit status in OUTDIR/NAME.txt.
record() {
    local name=$1
    shift
    local f="$out/$name.txt"
    "$zm" "$@" >"$f.stdout" 2>"$f.stderr"
    local rc=$?
    { echo "### zeromem $*"; echo "### stdout"; cat "$f.stdout"; echo "### stderr"; cat "$f.stderr";
      echo "### exit status $rc"; } >"$f"
    rm -f "$f.stdout" "$f.stderr"
}

cap=(--gpu A100-80GB --host-memory 1TiB)

record models models
for m in $("$zm" models | awk '{print $1}'); do
    for s in 0 1 2 3; do
        for o in none cpu; do
            record "estimate_${m}_s${s}_opt-${o}" estimate --model "$m" --gpus 8 "${cap[@]}" --stage "$s" --offload-optimizer "$o"
            record "estimate_${m}_s${s}_opt-${o}.json" estimate --model "$m" --gpus 8 "${cap[@]}" --stage "$s" --offload-optimizer "$o" --format json
        done
    done
    record "estimate_${m}_s3_opt-cpu_param-cpu" estimate --model "$m" --gpus 8 "${cap[@]}" --stage 3 --offload-optimizer cpu --offload-param cpu
    record "estimate_${m}_s3_opt-cpu_param-cpu.json" estimate --model "$m" --gpus 8 "${cap[@]}" --stage 3 --offload-optimizer cpu --offload-param cpu --format json
done

while IFS= read -r f; do
    rel=${f#tests/data/hf_configs/}
    record "hf_${rel//\//_}" estimate --hf-config "$f" --gpus 8 "${cap[@]}" --stage 3 --format json --explain
done < <(find tests/data/hf_configs -name '*.json' | LC_ALL=C sort)

planned=("llama-2-7b --gpus 8 --seq-len 4096 --global-batch 64"
         "llama-2-70b --gpus 16 --nodes 2 --network ib-hdr200 --seq-len 4096 --global-batch 64"
         "mixtral-8x7b --gpus 8 --seq-len 4096 --global-batch 64"
         "qwen3-30b-a3b --gpus 8 --seq-len 1024 --global-batch 16")
for p in "${planned[@]}"; do
    read -r -a args <<<"$p"
    m=${args[0]}
    record "compare_$m" compare --model "${args[@]}" "${cap[@]}"
    record "plan_$m" plan --model "${args[@]}" "${cap[@]}"
done
for m in llama-2-7b llama-2-70b mixtral-8x7b; do
    record "fit_$m" fit --model "$m" "${cap[@]}" --seq-len 4096
done
record fit_qwen3-30b-a3b fit --model qwen3-30b-a3b "${cap[@]}" --seq-len 1024

for f in $(LC_ALL=C ls tests/data/ledger/*.json); do
    if python3 -c 'import json, sys; sys.exit(0 if "zero_optimization" in json.load(open(sys.argv[1])) else 1)' "$f"; then
        record "check_$(basename "$f" .json)" check "$f"
    fi
done

record simulate_z3 simulate --model llama-2-7b --gpus 8 --stage 3 --micro-batch 2 --seq-len 4096
record simulate_z3_offload simulate --model llama-2-7b --gpus 8 --stage 3 --offload-optimizer cpu --offload-param cpu

python3 scripts/ledger.py --zeromem "$zm" --write "$out/accuracy.md" >"$out/ledger.txt" 2>&1
echo "### exit status $?" >>"$out/ledger.txt"
echo "$0: $(ls "$out" | wc -l) files in $out"
