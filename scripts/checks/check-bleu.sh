#!/usr/bin/env bash
# scripts/checks/check-bleu.sh [BUILD_DIR]   (default build/release; run by ctest)
#
# Checks `define bleu` (data/bleu.h) against the sacrebleu Python package, an implementation
# written independently of define's, on real text: the Multi30k test set (test_2016_flickr,
# scripts/get-data multi30k). The reference is test.en (or test.de); the hypotheses are the reference
# itself and perturbed copies of it: words dropped, words shuffled within a line, lowercased, lines
# cut in half, some lines emptied, words repeated (longer than the reference), the tokenised
# lowercased corpus, and the German file against the English reference. Each is scored by
# `define bleu --ref REF --hyp HYP` and by sacrebleu's command line (`python3 -m sacrebleu REF -i
# HYP -m bleu -f text -w 2`: 2 decimals, as define and sacrebleu's Python API print; its command
# line's default is 1); the check fails unless the scores agree to 0.01 BLEU and the rest of the
# line (precisions, BP, ratio, lengths) is the same, and prints both lines where not.
# sacrebleu 2.x must be installed (scripts/install-deps.sh installs 2.6.0 from PyPI).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
build="${1:-$repo/build/release}"
bin="$build/tools/define"
die() {
  echo "check-bleu: $*" >&2
  exit 1
}
[ -x "$bin" ] || die "no define binary at $bin (build first, or pass the build folder)"
python3 -c 'import sacrebleu, sys; sys.exit(0 if sacrebleu.__version__.startswith("2.") else 1)' 2> /dev/null ||
  die "needs the sacrebleu 2.x Python package (scripts/install-deps.sh installs it)"
data="$("$repo/scripts/get-data" multi30k)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 - "$bin" "$data" "$work" <<'PY'
import random, re, subprocess, sys
import sacrebleu

define_bin, data, work = sys.argv[1:4]

def read(path):  # as sacrebleu reads a file
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip() for line in f]

en, de, tok_en = read(f"{data}/test.en"), read(f"{data}/test.de"), read(f"{data}/tok/test.en")
rng = random.Random(20260101)  # fixed: the same perturbations every run

def per_line(lines, f):
    return [" ".join(f(line.split())) for line in lines]

def shuffled(ws):
    ws = list(ws)
    rng.shuffle(ws)
    return ws

# (name, reference lines, hypothesis lines)
cases = [
    ("identical to the reference", en, en),
    ("20% of words dropped", en, per_line(en, lambda ws: [w for w in ws if rng.random() >= 0.2])),
    ("words shuffled within each line", en, per_line(en, shuffled)),
    ("lowercased", en, [line.lower() for line in en]),
    ("lines cut to their first half", en, per_line(en, lambda ws: ws[: len(ws) // 2])),
    ("every 7th line empty", en, ["" if i % 7 == 0 else line for i, line in enumerate(en)]),
    ("10% of words repeated (longer)", en, per_line(en, lambda ws: [x for w in ws for x in ([w, w] if rng.random() < 0.1 else [w])])),
    ("tokenised lowercased tok/test.en", en, tok_en),
    ("German test.de against test.en", en, de),
    ("German reference, 30% of words dropped", de, per_line(de, lambda ws: [w for w in ws if rng.random() >= 0.3])),
    ("German reference, neighbours swapped", de, per_line(de, lambda ws: ws[1::2] + ws[0::2])),
]

line_re = re.compile(r"= (\d+\.\d+) (.*)$")
failures = 0
print(f"define bleu vs sacrebleu {sacrebleu.__version__} on Multi30k test ({len(en)} lines)")
print(f"{'case':<42} {'define':>8} {'sacrebleu':>10} {'diff':>6}")
for i, (name, ref, hyp) in enumerate(cases):
    ref_path, hyp_path = f"{work}/ref{i}.txt", f"{work}/hyp{i}.txt"
    for path, lines in ((ref_path, ref), (hyp_path, hyp)):
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(line + "\n" for line in lines))
    ours = subprocess.run([define_bin, "bleu", "--ref", ref_path, "--hyp", hyp_path],
                          capture_output=True, text=True, check=True).stdout.splitlines()[0]
    theirs = subprocess.run([sys.executable, "-m", "sacrebleu", ref_path, "-i", hyp_path, "-m", "bleu", "-f", "text", "-w", "2"],
                            capture_output=True, text=True, check=True).stdout.strip()
    (ours_score, ours_rest), (their_score, their_rest) = line_re.search(ours).groups(), line_re.search(theirs).groups()
    diff = abs(float(ours_score) - float(their_score))
    ok = diff <= 0.01 and ours_rest == their_rest
    failures += not ok
    print(f"{name:<42} {ours_score:>8} {their_score:>10} {diff:6.2f}{'' if ok else '  MISMATCH'}")
    if not ok:
        print(f"    define:    {ours}\n    sacrebleu: {theirs}")
if failures:
    sys.exit(f"check-bleu: {failures} of {len(cases)} cases disagree")
print(f"check-bleu: all {len(cases)} cases agree")
PY
