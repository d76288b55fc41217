#!/usr/bin/env bash
# Data-parallel `define train` against one process (a ctest; see tests/CMakeLists.txt):
#   1. LSTM LM (AWD-LSTM regularisers, random window lengths), Transformer-XL (memory, adaptive
#      input), the LSTM LM on the emulated GPU over MPI and Transformer-XL on it over the NCCL
#      communicator (distributed/nccl/emulated_nccl.h): 6 steps with 2 ranks x 4 streams equal 6 steps of one
#      process x 8 streams (weights, optimizer state, carried state, every logged loss);
#   2. translation: 2 ranks equal one process with train.update_freq = 2;
#   3. a 2-rank run stopped after 3 steps and resumed equals the uninterrupted 2-rank run bit for bit;
#   4. a rank killed mid-run ends the job with an error naming it, within a minute, not a hang;
#   5. configuration errors: streams not divisible by the ranks, resuming with another rank count;
#   6. Transformer-XL with train.update_freq = 2 equals the unsplit step (1 and 2 ranks, resumed);
#   7. an NCCL collective that stalls or fails on one rank (emulated) ends the job naming it;
#   8. gradients all-reduced in bfloat16 (train.allreduce_dtype): losses within 1% of the float32 run.
# Dropout is off in the equality runs: with it on, ranks draw their own masks (by design).
# Tolerance: 2e-5 relative to each tensor's largest value (float32 sums in another order; 6 steps).
# Usage: scripts/checks/check-distributed.sh DEFINE_BINARY CHECKPOINT_DIFF_BINARY MPIRUN
set -euo pipefail
define="$1" diff_ckpt="$2" mpirun="$3"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mpi=("$mpirun" --oversubscribe --allow-run-as-root -np 2)

# A small corpus: 3,000 lines of words drawn from 60 with a skewed distribution (fixed seed).
mkdir -p "$work/data"
awk -v seed=7 'BEGIN { srand(seed);
  for (f = 0; f < 3; f++) { file = f == 0 ? "train" : (f == 1 ? "valid" : "test"); n = f == 0 ? 3000 : 100;
    for (l = 0; l < n; l++) { line = ""; len = 3 + int(rand() * 12);
      for (w = 0; w < len; w++) line = line " w" int(60 * rand() * rand());
      print substr(line, 2) > ("'"$work"'/data/" file ".txt") } } }'

lstm='{"type": "lstm_lm", "input": {"type": "embedding", "dim": 24, "init_range": 0.1}, "hidden": 32, "layers": 2,
       "dropout": {"input": 0, "hidden": 0, "output": 0}}'
txl='{"type": "transformer_xl", "input": {"type": "projected", "dim": 8, "out_dim": 16, "cutoffs": [20]},
      "d_model": 16, "n_head": 2, "d_head": 8, "d_inner": 24, "n_layer": 2, "dropout": 0, "dropatt": 0,
      "mem_len": 6, "same_length": true, "clamp_len": 10}'
config() {  # config MODEL OPTIMIZER_JSON DEVICE VARIABLE_LENGTH
  cat <<JSON
{"data": {"dir": "$work/data", "batch_size": 8, "eval_batch_size": 4, "test_batch_size": 4, "bptt": 10,
          "variable_length": $4},
 "model": $1,
 "train": {$2, "clip": 0.25, "epochs": 1, "max_steps": 6, "log_interval": 1, "checkpoint_interval": 3,
           "seed": 11, "threads": 1, "device": "$3"}}
JSON
}
losses() { grep '"event":"train"' "$1/metrics.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
same_losses() {  # same_losses RUN_A RUN_B [TOLERANCE]: every logged loss within TOLERANCE (2e-5) relative
  paste <(losses "$1") <(losses "$2") | awk -v tol="${3:-2e-5}" '{ d = $1 - $2; if (d < 0) d = -d; if (d > tol * $1 || NF != 2) bad = 1; n++ }
    END { if (bad || n != 6) { print "logged losses differ (or are not 6)"; exit 1 } }'
}
fails() { echo "FAIL: $*" >&2; exit 1; }
compare() {  # compare NAME A.ckpt B.ckpt TOLERANCE
  local out
  out=$("$diff_ckpt" "$2" "$3" "$4") || { echo "$1: $out" >&2; fails "$1: checkpoints differ beyond $4"; }
  echo "$1: $out"
}

run_pair() {  # run_pair NAME MODEL OPTIMIZER DEVICE VARIABLE_LENGTH [TRANSPORT]
  local transport="${6:-mpi}"
  config "$2" "$3" "$4" "$5" > "$work/$1.json"
  "$define" train --config "$work/$1.json" --run-dir "$work/$1-1" > "$work/$1-1.log" 2>&1 || { cat "$work/$1-1.log"; fails "$1: one process"; }
  "${mpi[@]}" "$define" train --config "$work/$1.json" --run-dir "$work/$1-2" --set train.distributed="\"$transport\"" \
    > "$work/$1-2.log" 2>&1 || { cat "$work/$1-2.log"; fails "$1: 2 ranks"; }
  grep -q "data parallel: 2 processes ($transport)" "$work/$1-2.log" || fails "$1: the 2-rank run did not say it is data parallel over $transport"
  same_losses "$work/$1-1" "$work/$1-2" || fails "$1: logged losses"
  compare "$1" "$work/$1-1/latest.ckpt" "$work/$1-2/latest.ckpt" 2e-5
}
sgd='"optimizer": "sgd", "lr": 5, "alpha": 2, "beta": 1'
adam='"optimizer": "adam", "lr": 0.003, "weight_decay": 0'
run_pair lstm "$lstm" "$sgd" cpu true
run_pair txl "$txl" "$adam" cpu false
run_pair lstm-emu "$lstm" "$sgd" emu true
# The NCCL communicator's code on the emulated GPU (NCCL's entry points emulated over MPI).
run_pair txl-emu-nccl "$txl" "$adam" emu false nccl

# Gradients all-reduced in bfloat16 (train.allreduce_dtype) over the emulated NCCL: the run says so,
# and its losses track the float32 run's (each gradient rounded to 8 bits of mantissa once per rank
# and once per addition; the rounding itself is checked bit for bit by define_dist_tests).
"${mpi[@]}" "$define" train --config "$work/txl-emu-nccl.json" --run-dir "$work/txl-bf16-reduce" \
  --set train.distributed='"nccl"' --set train.allreduce_dtype='"bfloat16"' > "$work/txl-bf16-reduce.log" 2>&1 \
  || { cat "$work/txl-bf16-reduce.log"; fails "allreduce_dtype bfloat16: 2 ranks"; }
grep -q "all-reduced in bfloat16" "$work/txl-bf16-reduce.log" || fails "allreduce_dtype: the run did not name bfloat16"
same_losses "$work/txl-emu-nccl-1" "$work/txl-bf16-reduce" 1e-2 || fails "allreduce_dtype bfloat16: logged losses"

# Language models with train.update_freq = 2 (Transformer-XL's batch_chunk: each window's streams in
# 2 chunks, each with its own memories): one process equals the unsplit run, 2 ranks x 2 chunks
# equal it too, and a run stopped after 3 steps and resumed equals the uninterrupted one bit for bit.
"$define" train --config "$work/txl.json" --run-dir "$work/txl-chunked" --set train.update_freq=2 \
  > "$work/txl-chunked.log" 2>&1 || { cat "$work/txl-chunked.log"; fails "update_freq: one process"; }
same_losses "$work/txl-1" "$work/txl-chunked" || fails "update_freq: logged losses"
compare "update_freq 2, one process" "$work/txl-1/latest.ckpt" "$work/txl-chunked/latest.ckpt" 2e-5
"${mpi[@]}" "$define" train --config "$work/txl.json" --run-dir "$work/txl-chunked-2" --set train.distributed='"mpi"' \
  --set train.update_freq=2 > "$work/txl-chunked-2.log" 2>&1 || { cat "$work/txl-chunked-2.log"; fails "update_freq: 2 ranks"; }
compare "update_freq 2, 2 ranks" "$work/txl-1/latest.ckpt" "$work/txl-chunked-2/latest.ckpt" 2e-5
"$define" train --config "$work/txl.json" --run-dir "$work/txl-chunked-resumed" --set train.update_freq=2 \
  --set train.max_steps=3 > "$work/txl-chunked-resumed.log" 2>&1 || fails "update_freq: first half"
"$define" train --config "$work/txl.json" --run-dir "$work/txl-chunked-resumed" --set train.update_freq=2 --resume \
  > "$work/txl-chunked-resumed.log" 2>&1 || { cat "$work/txl-chunked-resumed.log"; fails "update_freq: resumed half"; }
compare "update_freq 2, resumed" "$work/txl-chunked/latest.ckpt" "$work/txl-chunked-resumed/latest.ckpt" 0
if "$define" train --config "$work/txl.json" --run-dir "$work/txl-odd" --set train.update_freq=3 > "$work/odd-chunks.log" 2>&1; then
  fails "update_freq 3 with 8 streams was accepted"; fi
grep -q "train.update_freq (3) must divide the streams each process trains on" "$work/odd-chunks.log" \
  || { cat "$work/odd-chunks.log"; fails "update_freq message"; }

# A rank whose NCCL collective stalls (the emulated NCCL's planted fault): both ranks give up after
# train.distributed_timeout, naming the collective, and the job ends instead of hanging. A rank
# whose collective fails (an asynchronous NCCL error) ends the job naming itself. Collective 33 is the
# all-reduce of the second step (31 broadcasts of the parameters at the start, one bucket a step).
for fault in stall fail; do
  start=$(date +%s)
  if "${mpi[@]}" sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export DEFINE_EMU_NCCL_FAULT='"$fault"':1:33; fi; exec "$0" "$@"' \
    "$define" train --config "$work/txl-emu-nccl.json" --run-dir "$work/nccl-$fault" --set train.distributed='"nccl"' \
    --set train.distributed_timeout=5 > "$work/nccl-$fault.log" 2>&1; then fails "a run with a ${fault}ed NCCL collective succeeded"; fi
  took=$(( $(date +%s) - start ))
  [ "$took" -lt 90 ] || fails "the job took ${took} s to end after an NCCL collective ${fault}ed"
  if [ "$fault" = stall ]; then
    grep -Eq "rank [01]: ncclAllReduce #33 of [0-9]+ float32 did not complete within 5 s" "$work/nccl-$fault.log" \
      || { cat "$work/nccl-$fault.log"; fails "the stalled collective is not named"; }
  else
    grep -q "rank 1: ncclAllReduce #33 of [0-9]* float32 failed" "$work/nccl-$fault.log" \
      || { cat "$work/nccl-$fault.log"; fails "the failed collective is not named with its rank"; }
  fi
  # The error path aborts the communicator: ncclCommDestroy there would wait for the peers (the
  # emulated NCCL ends the process with this message if it is called with collectives in flight).
  if grep -q "ncclCommDestroy on a communicator" "$work/nccl-$fault.log"; then
    cat "$work/nccl-$fault.log"; fails "ncclCommDestroy was called on the error path"; fi
  echo "NCCL collective ${fault}ed on rank 1: the job ended in ${took} s naming it"
done

# Translation: rank r takes batches r, r + 2, ... of the shared order, so 2 ranks take the step one
# process takes with train.update_freq = 2 (the same two batches, gradients summed over their tokens).
# SGD, not Adam: the attention key biases get a gradient of rounding noise only (softmax ignores
# them), which Adam's normalisation would turn into full-size steps of either sign.
awk -v seed=5 'BEGIN { srand(seed);
  for (f = 0; f < 3; f++) { split_name = f == 0 ? "train" : (f == 1 ? "val" : "test"); n = f == 0 ? 400 : 40;
    for (l = 0; l < n; l++) { len = 2 + int(rand() * 8); src = ""; tgt = "";
      for (w = 0; w < len; w++) { word = "w" int(30 * rand() * rand()); src = src " " word; tgt = toupper(word) " " tgt }
      print substr(src, 2) > ("'"$work"'/data/" split_name ".src"); sub(/ $/, "", tgt); print tgt > ("'"$work"'/data/" split_name ".tgt") } } }'
cat > "$work/nmt.json" <<JSON
{"data": {"dir": "$work/data", "source": "src", "target": "tgt", "max_tokens": 128, "subword": {"vocab_size": 36}},
 "model": {"type": "transformer_nmt", "input": {"type": "embedding", "dim": 32, "scale": true}, "d_model": 32,
           "heads": 4, "ffn_dim": 48, "encoder_layers": 1, "decoder_layers": 1, "pre_norm": true,
           "dropout": {"residual": 0}},
 "train": {"optimizer": "sgd", "lr": 0.5, "clip": 1.0, "epochs": 100, "max_steps": 6,
           "log_interval": 1, "checkpoint_interval": 3, "seed": 3, "threads": 1}}
JSON
"$define" train --config "$work/nmt.json" --run-dir "$work/nmt-1" --set train.update_freq=2 > "$work/nmt-1.log" 2>&1 \
  || { cat "$work/nmt-1.log"; fails "translation: one process"; }
"${mpi[@]}" "$define" train --config "$work/nmt.json" --run-dir "$work/nmt-2" --set train.distributed='"mpi"' \
  > "$work/nmt-2.log" 2>&1 || { cat "$work/nmt-2.log"; fails "translation: 2 ranks"; }
same_losses "$work/nmt-1" "$work/nmt-2" || fails "translation: logged losses"
compare translation "$work/nmt-1/latest.ckpt" "$work/nmt-2/latest.ckpt" 2e-5

# Resume: 3 steps, then on to 6, with 2 ranks: bit for bit the uninterrupted 2-rank run.
"${mpi[@]}" "$define" train --config "$work/lstm.json" --run-dir "$work/resumed" --set train.distributed='"mpi"' \
  --set train.max_steps=3 > "$work/resumed.log" 2>&1 || { cat "$work/resumed.log"; fails "resume: first half"; }
"${mpi[@]}" "$define" train --config "$work/lstm.json" --run-dir "$work/resumed" --set train.distributed='"mpi"' \
  --resume > "$work/resumed.log" 2>&1 || { cat "$work/resumed.log"; fails "resume: second half"; }
compare resume "$work/lstm-2/latest.ckpt" "$work/resumed/latest.ckpt" 0
diff <(losses "$work/lstm-2") <(losses "$work/resumed") > /dev/null || fails "resume: logged losses"

# Resuming a 2-rank run with one process is refused by name.
if "$define" train --config "$work/lstm.json" --run-dir "$work/resumed" --resume --set train.max_steps=9 \
  > "$work/mismatch.log" 2>&1; then fails "a 2-rank checkpoint resumed with 1 process"; fi
grep -q "written by a run of 2 process(es); resume it with 2" "$work/mismatch.log" || { cat "$work/mismatch.log"; fails "resume mismatch message"; }

# Streams must divide among the ranks.
if "${mpi[@]}" "$define" train --config "$work/lstm.json" --run-dir "$work/odd" --set train.distributed='"mpi"' \
  --set data.batch_size=7 > "$work/odd.log" 2>&1; then fails "batch_size 7 on 2 ranks was accepted"; fi
grep -q "data.batch_size (7) must be a multiple of the number of processes (2)" "$work/odd.log" || { cat "$work/odd.log"; fails "batch_size message"; }

# Rank 1 is killed (SIGKILL) before its third step while rank 0 waits in a reduction: mpirun must
# end the job and name the rank, well before the collective timeout.
start=$(date +%s)
if "${mpi[@]}" sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export DEFINE_CRASH_AT=train_step:3; fi; exec "$0" "$@"' \
  "$define" train --config "$work/lstm.json" --run-dir "$work/dead" --set train.distributed='"mpi"' \
  > "$work/dead.log" 2>&1; then fails "a run with a killed rank succeeded"; fi
took=$(( $(date +%s) - start ))
[ "$took" -lt 60 ] || fails "the job took ${took} s to end after rank 1 died"
grep -q "rank 1" "$work/dead.log" || { cat "$work/dead.log"; fails "the error does not name rank 1"; }
echo "killed rank: the job ended in ${took} s naming rank 1"
echo "check-distributed: all passed"
