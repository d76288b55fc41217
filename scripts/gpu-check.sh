#!/usr/bin/env bash
# Every GPU check of the CUDA backend in one run, for a GPU machine you hold for a few minutes:
#   1. the op harness in mode `cuda` (each op's forward and backward on the GPU against the reference);
#   2. the kernel tests of tests/cuda/*_kernels_test.cpp on the GPU (DEFINE_KERNEL_TEST_DEVICE=cuda): odd and
#      large shapes against the reference, and each result repeated bit for bit;
#   3. a short LSTM LM run (configs/ptb-define-lstm.json) on the CPU and on the GPU from the same seed: the
#      logged losses must agree (same initial weights, the same Philox dropout stream on both devices);
#   4. a short Transformer-XL run with DeFINE on the GPU (configs/wt2-transformer-xl-define.json), and the
#      same steps on the CPU, compared the same way;
#   5. kernel_bench --device cuda (each kernel's bandwidth against the device's measured copy rate), and,
#      when BIN_DIR has it, grouped_linear_bench --device cuda (the DeFINE unit's grouped GEMM against the
#      composed ops and against a dense GEMM of the same FLOPs: T 4,096 x 512 -> 1,024, and 360 x 512 -> 512);
#   6. (STAGES=... sanitize) compute-sanitizer's memcheck and racecheck over the harness and the kernel tests;
#   7. (STAGES=... translate) Multi30k de->en with DeFINE trained, beam-searched and scored on the GPU;
#   8. (nccl) the real NCCL library with one rank: Transformer-XL with train.distributed = nccl on the GPU
#      (the communication stream, its events, record_stream), its losses against the plain GPU run of step 4,
#      and comm_ms_per_step / comm_wait_ms_per_step in its metrics.jsonl.
#   9. (mixed) mixed precision (train.precision, train/precision.h): the LSTM LM, Transformer-XL and the
#      Multi30k Transformer for 200 steps each in fp32, fp16 and bf16 on the GPU, one table of tokens/s,
#      peak tensor memory and the last logged loss per run (mixed.txt); the op harness in modes cuda-f16 and
#      cuda-bf16 runs in step 1, the GemmEx rates in kernel_bench (step 5); bench/peers/gemm_torch.py times
#      the same 4096^3 GEMMs through PyTorch (fp32 with TF32 off, fp16, bf16).
#  10. (peers) define against PyTorch on the same GPU: kernel_bench --device cuda beside
#      bench/peers/kernels_torch.py --device cuda (the same cases, sizes and compulsory bytes through PyTorch's
#      ops), joined into kernels_vs_torch.txt (each side's time, define/torch, each as a share of the copy rate
#      its run measured); and lm_train_bench, txl_train_bench and nmt_train_bench --device cuda in fp32, fp16 and
#      bf16 against their peers (same model on the same GPU, autocast / GradScaler on the peer's side), one
#      table of tokens/s and peak device memory of both in models_vs_torch.txt. The peers need a python3 whose
#      torch sees the GPU (DEFINE_PYTHON, else the first of python3 and /usr/bin/python3 that has one).
#      A ctest (scripts/checks/check-kernel-peers.py) keeps the peer's cases and sizes those of
#      kernel_bench and runs the peer and the join on the CPU, so this stage works the first time.
# STAGES picks them (default "tests train bench mixed peers nccl"; all: "tests sanitize train bench mixed
# translate peers nccl").
# Each step has its own time limit, so one that hangs costs only its own minutes, and writes its log
# under OUT_DIR; OUT_DIR/summary.txt gets one line per step.
#
#   scripts/gpu-check.sh BIN_DIR OUT_DIR [DATA_DIR]
#
# BIN_DIR holds define, define_tests and kernel_bench (and, optionally, grouped_linear_bench, lm_train_bench,
# txl_train_bench and nmt_train_bench, which stage peers runs) from a build for
# that GPU (for an H100 / H200: -DCMAKE_CUDA_ARCHITECTURES=90) and, optionally, lib/ with shared libraries the
# machine lacks. DATA_DIR
# holds ptb/, wikitext-2/ and multi30k/, default the ../shared/data beside the repository.
#
#   scripts/gpu-check.sh --cpu-reference OUT_DIR [DATA_DIR]   (build/release binaries, no GPU needed)
#
# makes only the CPU reference runs of steps 3, 4 and 7, for CPU_REFERENCE=OUT_DIR on the GPU machine.
set -u
reference_only=0
if [ "${1:-}" = "--cpu-reference" ]; then
  reference_only=1
  shift
  BIN=$(cd "$(dirname "$0")/../build/release/tools" && pwd)
  OUT=$1
  DATA=${2:-$(dirname "$0")/../../shared/data}
else
  BIN=$(cd "$1" && pwd)
  OUT=$2
  DATA=${3:-$(dirname "$0")/../../shared/data}
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DATA=$(cd "$DATA" && pwd)
[ -n "${CPU_REFERENCE:-}" ] && CPU_REFERENCE=$(cd "$CPU_REFERENCE" && pwd)
cd "$(dirname "$0")/.."  # configs/ and tests/ are read from the repository
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
export DEFINE_DATA_DIR=$DATA DEFINE_CACHE_DIR=off OMP_WAIT_POLICY=PASSIVE

# step NAME LIMIT_S COMMAND...: runs COMMAND with its output in OUT/NAME.log, one summary line.
step() {
  local name=$1 limit=$2
  shift 2
  local t0 t1 rc
  t0=$(date +%s%N)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  t1=$(date +%s%N)
  printf '%-16s rc=%-3s %6s ms  %s\n' "$name" "$rc" "$(( (t1 - t0) / 1000000 ))" \
    "$(grep -v '^\s*$' "$OUT/$name.log" | tail -1 | cut -c1-150)" | tee -a "$SUMMARY"
}

# train NAME LIMIT_S CONFIG STEPS LOG_EVERY DEVICE [--set ...]: a short run; its metrics.jsonl in OUT.
train() {
  local name=$1 limit=$2 config=$3 steps=$4 every=$5 device=$6
  shift 6
  rm -rf "/tmp/gpu-check-$name"
  step "$name" "$limit" "$BIN/define" train --config "$config" --run-dir "/tmp/gpu-check-$name" \
    --set train.max_steps="$steps" --set train.log_interval="$every" --set train.device="\"$device\"" \
    --set train.threads="$(nproc)" "$@"
  cp "/tmp/gpu-check-$name/metrics.jsonl" "$OUT/$name.metrics.jsonl" 2>/dev/null
}

# losses NAME_A NAME_B: the logged training losses of two runs side by side.
losses() {
  python3 - "$OUT/$1.metrics.jsonl" "$OUT/$2.metrics.jsonl" <<'PY' | tee -a "$SUMMARY"
import json, sys
def read(path):
    try:
        rows = [json.loads(l) for l in open(path)]
    except OSError:
        return {}
    return {r["step"]: r for r in rows if r.get("event") == "train"}
a, b = read(sys.argv[1]), read(sys.argv[2])
common = sorted(set(a) & set(b))
worst = max((abs(a[s]["loss"] - b[s]["loss"]) for s in common), default=float("nan"))
print(f"{sys.argv[1].split('/')[-1]} vs {sys.argv[2].split('/')[-1]}: {len(common)} common steps, "
      f"max |loss difference| {worst:.2e}; "
      + ", ".join(f"{s:.0f}: {a[s]['loss']:.5f}/{b[s]['loss']:.5f}" for s in common[:6]))
speed = [r["tokens_per_s"] for r in b.values() if r.get("tokens_per_s")]
if speed:
    print(f"{sys.argv[2].split('/')[-1]}: tokens/s at the last logs {', '.join(f'{v:.0f}' for v in speed[-3:])}")
PY
}

# The CPU runs are the references for the GPU runs' losses (the same first steps, the same seed).
txl_schedule=(--set train.schedule_steps=1500)
cpu_references() {
  train lstm_cpu 300 configs/ptb-define-lstm.json 60 20 cpu
  train txl_cpu 300 configs/wt2-transformer-xl-define.json 20 10 cpu "${txl_schedule[@]}"
  train nmt_cpu 600 configs/multi30k-define.json 60 20 cpu --set train.max_minutes=0
}
if [ "$reference_only" = 1 ]; then
  cpu_references
  exit 0
fi

# cuBLAS is loaded at the first GPU GEMM: find the toolkit's or a pip wheel's copy.
cublas=$(ldconfig -p | awk '/libcublas\.so\.13/ {print $NF; exit}')
[ -z "$cublas" ] && cublas=$(find /usr/local/cuda*/ /opt -name 'libcublas.so.13*' -print -quit 2>/dev/null)
extra=${cublas:+$(dirname "$cublas")}
[ -d "$BIN/lib" ] && extra=$BIN/lib${extra:+:$extra}
export LD_LIBRARY_PATH=${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "cuBLAS: ${cublas:-not found}" | tee -a "$SUMMARY"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee -a "$SUMMARY"
step devices 20 "$BIN/define" devices
# Catch's file tags of the kernel tests: [#softmax_kernels_test],[#reduce_kernels_test],...
kernel_files=$(cd tests/cuda && ls *_kernels_test.cpp | sed 's/\.cpp$//; s/^/[#/; s/$/]/' |
  paste -sd,)
stages=" ${STAGES:-tests train bench mixed peers nccl} "

if [[ $stages == *" tests "* ]]; then
  step harness_cuda 90 env DEFINE_TEST_MODES=cuda,cuda-f16,cuda-bf16 "$BIN/define_tests" "[harness]"
  step kernels_cuda 60 env DEFINE_KERNEL_TEST_DEVICE=cuda "$BIN/define_tests" -# "$kernel_files"
fi

# compute-sanitizer over the same tests, each tensor in its own cudaMalloc (DEFINE_CUDA_CACHE=0) so
# that memcheck sees exact bounds: out-of-bounds and misaligned accesses, and shared-memory races.
if [[ $stages == *" sanitize "* ]]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  sanitize() {
    local name=$1 limit=$2 tool=$3
    shift 3
    step "$name" "$limit" env DEFINE_CUDA_CACHE=0 "$@" "$cs" --tool "$tool" --error-exitcode 9 --print-limit 50 \
      "$BIN/define_tests" "${test_args[@]}"
    echo "$name: $(grep -c '^========= \(Invalid\|Race\|Error\|Warning\|Program hit\)' "$OUT/$name.log") reports" |
      tee -a "$SUMMARY"
  }
  test_args=("[harness]")
  sanitize memcheck_harness 90 memcheck DEFINE_TEST_MODES=cuda
  sanitize racecheck_harness 90 racecheck DEFINE_TEST_MODES=cuda
  test_args=(-# "$kernel_files")
  sanitize memcheck_kernels 120 memcheck DEFINE_KERNEL_TEST_DEVICE=cuda
fi

if [[ $stages == *" train "* ]]; then
  train lstm_gpu 60 configs/ptb-define-lstm.json 600 20 cuda
  train txl_gpu 60 configs/wt2-transformer-xl-define.json 300 10 cuda "${txl_schedule[@]}"
  # CPU_REFERENCE=DIR takes the CPU runs from DIR (made elsewhere by --cpu-reference DIR), which saves
  # their minutes on the GPU machine.
  if [ -n "${CPU_REFERENCE:-}" ]; then
    cp "$CPU_REFERENCE"/lstm_cpu.metrics.jsonl "$CPU_REFERENCE"/txl_cpu.metrics.jsonl "$OUT"/
  else
    cpu_references
  fi
  losses lstm_cpu lstm_gpu
  losses txl_cpu txl_gpu
fi

if [[ $stages == *" bench "* ]]; then
  step kernel_bench 60 "$BIN/kernel_bench" --device cuda --runs 5
  if [ -x "$BIN/grouped_linear_bench" ]; then
    step grouped_linear_bench 60 "$BIN/grouped_linear_bench" --device cuda --runs 5
    step grouped_linear_bench_360 60 "$BIN/grouped_linear_bench" --device cuda --runs 5 --rows 360 --in 512 --out 512
  fi
fi

# Mixed precision on the GPU: each model in fp32, fp16 and bf16 from the same seed.
if [[ $stages == *" mixed "* ]]; then
  for p in fp32 fp16 bf16; do
    train "lstm_$p" 60 configs/ptb-define-lstm.json 200 50 cuda --set train.precision="\"$p\""
    train "txl_$p" 60 configs/wt2-transformer-xl-define.json 200 50 cuda --set train.precision="\"$p\"" \
      "${txl_schedule[@]}"
    train "nmt_$p" 60 configs/multi30k-define.json 200 50 cuda --set train.precision="\"$p\"" \
      --set train.max_minutes=0
  done
  step gemm_torch 60 python3 bench/peers/gemm_torch.py --n 4096
  python3 - "$OUT" <<'PY' | tee "$OUT/mixed.txt" | tee -a "$SUMMARY"
import json, sys
out = sys.argv[1]
print(f"{'run':<10} {'tokens/s':>10} {'vs fp32':>8} {'peak tensor MiB':>16} {'last loss':>10} {'overflows':>9}")
for model in ("lstm", "txl", "nmt"):
    base = None
    for p in ("fp32", "fp16", "bf16"):
        try:
            rows = [json.loads(l) for l in open(f"{out}/{model}_{p}.metrics.jsonl")]
        except OSError:
            print(f"{model}_{p:<5} (no run)")
            continue
        train = [r for r in rows if r.get("event") == "train"]
        if not train:
            print(f"{model}_{p:<5} (no train lines)")
            continue
        tok = sorted(r["tokens_per_s"] for r in train[1:] or train)[len(train[1:] or train) // 2]
        base = tok if p == "fp32" else base
        peak = max(r.get("peak_tensor_bytes", 0) for r in train) / 2**20
        ratio = f"{tok / base:.2f}x" if base else "-"
        print(f"{model}_{p:<5} {tok:>10.0f} {ratio:>8} {peak:>16.1f} {train[-1]['loss']:>10.4f} "
              f"{sum(1 for r in rows if r.get('event') == 'overflow'):>9}")
PY
fi

# define against PyTorch on the same GPU: kernels case by case, then whole training steps. Small
# steps: the stage takes about 4 minutes on an H100.
if [[ $stages == *" peers "* ]]; then
  peer_python=${DEFINE_PYTHON:-}
  if [ -z "$peer_python" ]; then
    for candidate in python3 /usr/bin/python3; do
      if "$candidate" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
        peer_python=$(command -v "$candidate")
        break
      fi
    done
  fi
  if [ -z "$peer_python" ]; then
    echo "peers: no python3 whose torch sees a GPU (set DEFINE_PYTHON); stage skipped" | tee -a "$SUMMARY"
  else
    export DEFINE_PYTHON=$peer_python  # the training benchmarks start their peers with it
    echo "peers: $peer_python, torch $("$peer_python" -c 'import torch; print(torch.__version__)' 2>&1)" |
      tee -a "$SUMMARY"
    # The bench stage's kernel_bench table when it ran in this invocation; else a run of its own.
    [[ $stages == *" bench "* ]] || step kernel_bench 60 "$BIN/kernel_bench" --device cuda --runs 5
    step kernels_torch 60 "$peer_python" bench/peers/kernels_torch.py --device cuda
    python3 bench/peers/join_peers.py kernels "$OUT/kernel_bench.log" "$OUT/kernels_torch.log" \
      > "$OUT/kernels_vs_torch.txt"
    tee -a "$SUMMARY" < "$OUT/kernels_vs_torch.txt"
    # One round each: the GPU's run-to-run spread is small next to the CPU VM's that --rounds 3 answers.
    model_logs=()
    for bench in "lm_train_bench --steps 100" "txl_train_bench --steps 50" "nmt_train_bench --steps 30"; do
      for p in fp32 fp16 bf16; do
        read -r binary bench_args <<< "$bench"
        if [ ! -x "$BIN/$binary" ]; then
          echo "$binary: not in $BIN; skipped" | tee -a "$SUMMARY"
          continue
        fi
        name=${binary%_train_bench}_vs_torch_$p
        # shellcheck disable=SC2086 # bench_args holds several options
        step "$name" 45 "$BIN/$binary" --device cuda --precision "$p" --rounds 1 $bench_args
        model_logs+=("$OUT/$name.log")
      done
    done
    if [ ${#model_logs[@]} -gt 0 ]; then
      python3 bench/peers/join_peers.py models "${model_logs[@]}" > "$OUT/models_vs_torch.txt"
      tee -a "$SUMMARY" < "$OUT/models_vs_torch.txt"
    fi
  fi
fi

# Translation end to end on the GPU: Multi30k de->en with DeFINE (BPE, training, beam search, BLEU);
# its first losses against a CPU run of the same config (CPU_REFERENCE/nmt_cpu.metrics.jsonl).
if [[ $stages == *" translate "* ]]; then
  train nmt_gpu 150 configs/multi30k-define.json 400 20 cuda --set train.max_minutes=0
  step nmt_translate 60 "$BIN/define" translate --run /tmp/gpu-check-nmt_gpu --device cuda --beam 5 \
    --max-len-a 1.2 --max-len-b 10 --input "$DATA/multi30k/test.de" --output "$OUT/nmt_test.hyp"
  step nmt_bleu 20 "$BIN/define" bleu --ref "$DATA/multi30k/test.en" --hyp "$OUT/nmt_test.hyp"
  [ -n "${CPU_REFERENCE:-}" ] && cp "$CPU_REFERENCE"/nmt_cpu.metrics.jsonl "$OUT"/
  losses nmt_cpu nmt_gpu
fi
# One GPU cannot host two NCCL ranks; one rank still runs the library, the stream and the events.
if [[ $stages == *" nccl "* ]]; then
  launcher=()
  command -v mpirun > /dev/null && launcher=(mpirun --allow-run-as-root -np 1)
  rm -rf /tmp/gpu-check-nccl_1rank
  step nccl_1rank 90 "${launcher[@]}" "$BIN/define" train --config configs/wt2-transformer-xl-define.json \
    --run-dir /tmp/gpu-check-nccl_1rank --set train.device='"cuda"' --set train.distributed='"nccl"' \
    --set train.max_steps=300 --set train.log_interval=10 --set train.max_minutes=0 "${txl_schedule[@]}"
  cp /tmp/gpu-check-nccl_1rank/metrics.jsonl "$OUT/nccl_1rank.metrics.jsonl" 2> /dev/null || true
  losses txl_gpu nccl_1rank
  grep -o '"comm_[a-z_]*ms_per_step":[0-9.e+-]*' "$OUT/nccl_1rank.metrics.jsonl" | tail -4 | tee -a "$SUMMARY" || true
fi
echo "done; logs in $OUT" | tee -a "$SUMMARY"
