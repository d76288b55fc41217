#!/usr/bin/env bash
# The peak device memory per rank of the paper configurations on 4 ranks of 11 GiB cards (GTX 1080 Ti
# / RTX 2080 Ti), and the train.update_freq / model.recompute setting that makes each fit: what
# docs/data-parallel.md tabulates. `define memory` measures each step on the emulated GPU as a dry run.
# Usage: scripts/experiments/memory_table.sh [DEFINE_BINARY] [RANKS] [GIB]
set -euo pipefail
define="${1:-build/release/tools/define}" ranks="${2:-4}" gib="${3:-11}"
cd "$(dirname "$0")/../.."
for c in configs/transformer-xl-wt103-*.json configs/delight-wt103.json configs/transformer-wmt14-ende-*.json \
         configs/delight-wmt14-ende-*.json; do
  echo "== $c"
  "$define" memory --config "$c" --ranks "$ranks" --gpu-gib "$gib"
done
