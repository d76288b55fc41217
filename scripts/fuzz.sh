#!/usr/bin/env bash
# Builds the fuzz preset (clang, libFuzzer, ASan + UBSan) and runs every fuzz target of tests/fuzz/:
# first every seed (tests/fuzz/corpus/<target>/) and regression input (tests/fuzz/regressions/<target>/)
# once, then fuzzing from them for SECONDS per target (default 20). Fails on any finding: a crash,
# undefined behaviour, a leak, an exception other than define::Error, an allocation over 2 GiB or an
# input that takes over 10 s. What the runs learn is kept in build/fuzz/corpus/<target>/ (not in git),
# crash inputs go to build/fuzz/artifacts/<target>/, logs to build/fuzz/logs/. See docs/fuzzing.md.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (default: every target; named targets are the only
# ones built)
# Environment: BUILD_DIR, the fuzz preset's build folder (default build/fuzz, which the corpus,
# artifacts and logs folders above are under); JOBS, the build's parallel jobs and the number of
# targets fuzzed at once (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
shift || true
targets=("$@")
build_targets=("${targets[@]}")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_config fuzz_safetensors fuzz_corpus fuzz_bleu fuzz_cli fuzz_parallel fuzz_subword)
  build_targets=(fuzz_targets)
fi
build="${BUILD_DIR:-build/fuzz}"
case "$build" in /*) build_abs="$build" ;; *) build_abs="$PWD/$build" ;; esac

echo "== preset fuzz: configure and build in $build"
cmake --preset fuzz -B "$build" > /dev/null
cmake --build "$build" --target "${build_targets[@]}" -j "${JOBS:-$(nproc)}"

bin="$build/tests/fuzz"
mkdir -p "$build/logs"

# One target: its seeds and regression inputs once, then SECONDS of fuzzing. What it reports goes to
# $build/logs/<target>.summary, its exit status to <target>.status.
fuzz_target() {
  local t="$1" log="$build/logs/$1.log" summary="$build/logs/$1.summary" inputs=() d f
  for d in "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t"; do
    [ -d "$d" ] && while IFS= read -r -d '' f; do inputs+=("$f"); done < <(find "$d" -type f -print0 | sort -z)
  done
  echo "== $t: ${#inputs[@]} seed and regression inputs, then ${secs} s of fuzzing" > "$summary"
  # (With no file arguments libFuzzer would fuzz without end: every target has seeds.)
  if [ ${#inputs[@]} -eq 0 ] || ! "$bin/$t" -timeout=10 -rss_limit_mb=2048 "${inputs[@]}" > "$log" 2>&1; then
    { tail -n 60 "$log"; echo "$t: a seed or regression input fails (log: $log)"; } >> "$summary"
    return 1
  fi
  # Absolute: fuzz_cli runs each input in a folder of its own (a crash file is written from there).
  local work="$build/corpus/$t" artifacts="$build_abs/artifacts/$t/" dict=() seeds=("tests/fuzz/corpus/$t")
  mkdir -p "$work" "$artifacts"
  [ -f "tests/fuzz/$t.dict" ] && dict=("-dict=tests/fuzz/$t.dict")
  [ -d "tests/fuzz/regressions/$t" ] && seeds+=("tests/fuzz/regressions/$t")
  if ! "$bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts" "${dict[@]}" "$work" "${seeds[@]}" > "$log" 2>&1; then
    { tail -n 60 "$log"; echo "$t: FINDING (log: $log; the input is in $artifacts)"; } >> "$summary"
    return 1
  fi
  grep -E '^#[0-9]+.*DONE|stat::number_of_executed_units' "$log" | sed "s/^/  /" >> "$summary"
}

# The targets run side by side, JOBS at a time (each fuzzes one process on one core), and report in
# order.
jobs_max="${JOBS:-$(nproc)}"
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  # (In an && / || list the function runs without errexit and ends with its own status.)
  ( fuzz_target "$t" && echo 0 > "$build/logs/$t.status" || echo 1 > "$build/logs/$t.status" ) &
done
wait
failed=0
for t in "${targets[@]}"; do
  cat "$build/logs/$t.summary"
  [ "$(cat "$build/logs/$t.status")" = 0 ] || failed=1
done
if [ $failed -ne 0 ]; then
  echo "fuzz: findings or failing inputs above" >&2
  exit 1
fi
echo "fuzz: no findings"
