#!/usr/bin/env bash
# scripts/get-data's verification, offline: WikiText-103 found by its line counts under either file
# naming, refused with a wrong count or a file changed since its SHA256SUMS; an unknown corpus named.
# (Downloads are not tried: CI has no network. Run `scripts/get-data wikitext-103` by hand.)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd -P)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
check() {  # check DESCRIPTION COMMAND...: the command must succeed
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1" >&2; fails=$((fails + 1)); fi
}

lines() { awk -v s="$1" -v n="$2" 'BEGIN { for (i = 0; i < n; i++) print s }'; }  # TEXT COUNT

wt="$work/data/wikitext-103"
mkdir -p "$wt"
lines ' = Robert Boulter = ' 1801350 > "$wt/wiki.train.tokens"
lines ' the cat ' 3760 > "$wt/wiki.valid.tokens"
lines ' the dog ' 4358 > "$wt/wiki.test.tokens"
found="$(DEFINE_DATA_DIR="$work/data" DEFINE_DATA_CACHE="$work/cache" "$repo/scripts/get-data" --offline wikitext-103)"
check "wiki.*.tokens with WikiText-103's line counts are found" test "$found" = "$(cd "$wt" && pwd -P)"

echo ' one line too many ' >> "$wt/wiki.valid.tokens"
out="$(DEFINE_DATA_DIR="$work/data" DEFINE_DATA_CACHE="$work/cache" "$repo/scripts/get-data" --offline wikitext-103 2>&1)" && status=0 || status=$?
check "a wrong line count is refused" test "$status" -ne 0
check "  naming the file and both counts" grep -q "wiki.valid.tokens has 3761 lines, expected 3760" <<< "$out"

for split in train valid test; do mv "$wt/wiki.$split.tokens" "$wt/$split.txt"; done
head -n 3760 "$wt/valid.txt" > "$wt/v" && mv "$wt/v" "$wt/valid.txt"
(cd "$wt" && sha256sum train.txt valid.txt test.txt > SHA256SUMS)
check "train/valid/test.txt with a matching SHA256SUMS are found" \
  env DEFINE_DATA_DIR="$work/data" DEFINE_DATA_CACHE="$work/cache" "$repo/scripts/get-data" --offline wikitext-103
sed -i '1s/Robert/Roberta/' "$wt/train.txt"
out="$(DEFINE_DATA_DIR="$work/data" DEFINE_DATA_CACHE="$work/cache" "$repo/scripts/get-data" --offline wikitext-103 2>&1)" && status=0 || status=$?
check "a file changed since its SHA256SUMS is refused" test "$status" -ne 0
check "  saying so" grep -q "differs from its SHA256SUMS" <<< "$out"

out="$("$repo/scripts/get-data" --offline wikitext-5 2>&1)" && status=0 || status=$?
check "an unknown corpus is named" grep -q "unknown corpus 'wikitext-5' (expected ptb, wikitext-2, wikitext-103 or multi30k)" <<< "$out"
[ "$fails" -eq 0 ] || { echo "check-get-data: $fails check(s) failed" >&2; exit 1; }
echo "check-get-data: all checks passed"
