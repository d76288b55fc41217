#!/usr/bin/env python3
"""Writes the hand-made seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

The seeds are small, valid (or nearly valid) inputs that show each reader the real formats, so the
fuzzer starts from deep inside them: configs from configs/, safetensors files and checkpoints in
define's exact layout (nn/safetensors.h, nn/checkpoint.h: compact sorted JSON header padded to 8
bytes, the whole-file CRC-32 in "define.crc32"), vocabularies and corpus texts, argument lists.
Run from anywhere; rewrites the seed files (the regression inputs in tests/fuzz/regressions/ are
left alone, and so is tests/fuzz/corpus/fuzz_subword/run-bpe.model: the subword.model of a tiny
translation run, `define train` of a transformer_nmt config on five German-English sentence pairs
with data.subword {"type": "bpe", "vocab_size": 60}, the real thing the hand-made models below
imitate)."""
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def nul(*parts):
    return "\0".join(parts)


# --- fuzz_config: JSON text, then NUL-separated --set overrides.
for name in ["ptb-define-lstm.json", "wt2-transformer-xl-define.json", "wt2-delight-lm.json"]:
    with open(os.path.join(ROOT, "configs", name), "rb") as f:
        put("fuzz_config", name, f.read())
put("fuzz_config", "overrides", nul('{"model": {"type": "lstm_lm", "hidden": 512, "input": {"type": "define", '
                                     '"cutoffs": [2000, 10000]}}, "train": {"lr": 20, "device": "cpu"}}',
                                     "train.lr=0.5", "model.layers=3", "data.corpus=ptb",
                                     "model.input.cutoffs=[2000,10000]", 'train.device="emu"', "train.seed=-1",
                                     "data.bptt=7e1"))
put("fuzz_config", "bad-overrides", nul('{"model": {"type": "lstm_lm"}, "data": {"bptt": 35}}', "model=1",
                                         "data.bptt.x=2", "=3", "train..lr=1", "model.type", "x.y.z={\"a\": null}"))
put("fuzz_config", "syntax-error", '{\n  "model": {"type": "lstm_lm",\n  "hidden": 512,,\n}\n')


# --- fuzz_safetensors: whole files.
def safetensors(tensors, metadata=None, crc=False):
    """tensors: list of (name, dtype, shape, raw bytes); returns the file's bytes."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    meta = dict(metadata or {})
    if crc:
        meta["define.crc32"] = "00000000"
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    out = struct.pack("<Q", len(text)) + text + data
    if crc:
        needle = b'"define.crc32":"00000000"'
        at = out.index(needle) + len(needle) - 9
        out = out[:at] + b"%08x" % zlib.crc32(out) + out[at + 8:]
    return out


def f32(*xs):
    return struct.pack("<%df" % len(xs), *xs)


checkpoint = [("model/map.weight", "F32", [2, 3], f32(0.5, -1, 2, 0.25, 0, 3)),
              ("model/lstm.bias", "F32", [3], f32(1, 2, 3)),
              ("optimizer/model/map.weight.momentum", "F32", [2, 3], f32(0, 0, 0, 1, 1, 1)),
              ("run/h0", "F32", [1, 1, 3], f32(0.1, 0.2, 0.3)),
              ("run/step", "I64", [], struct.pack("<q", 42))]
checkpoint_meta = {"define.format": "checkpoint/1", "optimizer.name": "SGD", "optimizer.scalar.lr": "20",
                   "run.step": "42", "run.epoch": "1", "run.best_valid": "5.25", "run.config": '{"model": {}}'}
put("fuzz_safetensors", "checkpoint-crc.ckpt", safetensors(checkpoint, checkpoint_meta, crc=True))
put("fuzz_safetensors", "checkpoint.ckpt", safetensors(checkpoint, checkpoint_meta))
put("fuzz_safetensors", "dtypes.safetensors",
    safetensors([("a", "F64", [2], struct.pack("<2d", 1.5, -2)), ("b", "I32", [1, 2], struct.pack("<2i", 7, -7)),
                 ("c", "F16", [2], b"\x00\x3c\x00\xc0"), ("d", "BF16", [1], b"\x80\x3f"),
                 ("e", "F32", [0, 4], b""), ("f", "I64", [], struct.pack("<q", -1))]))
put("fuzz_safetensors", "export.safetensors",
    safetensors([("map.weight", "F32", [2, 2], f32(1, 2, 3, 4))], {"source": "define export"}, crc=True))
put("fuzz_safetensors", "empty.safetensors", safetensors([]))

# --- fuzz_corpus: vocabulary text, then NUL-separated train, valid, test.
put("fuzz_corpus", "small", nul("the\ncat\nsat\n<eos>\non\nmat\n<unk>\n",
                                "the cat sat\non the mat\n<unk> sat\n", "the cat\n\non the <unk>\n", "mat sat\n"))
put("fuzz_corpus", "spaces", nul("a\nb\n<eos>", " a\tb \r\n\vb  a\f\na", "a b\r\n", "b"))
put("fuzz_corpus", "oov", nul("a\nb\na\n", "a b c\n", "d\n", "a\n"))
put("fuzz_corpus", "ptb-like", nul("<eos>\nno\nit\nwas\nn't\nblack\nmonday\n",
                                   " no it was n't black monday \n but while the new york stock exchange did n't "
                                   "fall apart friday as the dow jones industrial average plunged N points \n",
                                   " no it was n't \n", " black monday \n"))
put("fuzz_corpus", "empty-splits", nul("x\n", "", "x", ""))

# --- fuzz_bleu: hypothesis text, then NUL-separated reference text.
put("fuzz_bleu", "multi30k-like", nul("Zwei junge Männer sind draußen in der Nähe von Büschen.\nEin Mann im blauen Hemd.\n",
                                      "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.\n"
                                      "Ein Mann in einem blauen Hemd steht auf einer Leiter.\n"))
put("fuzz_bleu", "entities-numbers", nul("A man & his dog, 3.5km from the US border.\r\n<skipped>x-\ny\n",
                                         "A man &amp; his dog, 3.5 km from the U.S. border.\n&quot;1,000&quot; 2-3\n"))
put("fuzz_bleu", "unicode-space", nul("a\u00a0b\u3000c\u2009d\u200be\x1cf \u0085\n\n", "a b c d e f\n\u00a0\n"))
put("fuzz_bleu", "not-utf8", b"M\xe4nner \xff.\xe2\x80,x \xc3(\n\x00M\xc3\xa4nner\n")

# --- fuzz_cli: the subcommand, then NUL-separated arguments.
for name, args in [
    ("train", ["train", "--config", "ptb.json", "--set", "train.lr=1", "--set", "model.hidden=8", "--run-dir", "r",
               "--resume"]),
    ("train-help", ["train", "--help"]),
    ("eval", ["eval", "--run", "r", "--split", "test", "--batch-size", "4", "--bptt", "35", "--mem-len", "8",
              "--threads", "1", "--json", "--compare", "--cache", "c.safetensors", "--checkpoint", "best.ckpt"]),
    ("eval-bad", ["eval", "--run=r", "--split", "train", "--batch-size", "x"]),
    ("generate", ["generate", "--run", "r", "--words", "5", "--temperature", "0.8", "--seed", "1", "--prompt",
                  "the company"]),
    ("params", ["params", "--config", "c.json", "--vocab-size", "10000", "--set", "model.type=lstm_lm"]),
    ("export-cache", ["export-cache", "--run", "r", "--out", "cache.safetensors", "--checkpoint", "latest.ckpt"]),
    ("corrmap", ["corrmap", "--run", "r", "--layer", "all", "--out", "c.png", "--size", "256", "--colour", "heat"]),
    ("export", ["export", "--run", "r", "--out", "m.safetensors"]),
    ("import", ["import", "--run", "r", "--from", "m.safetensors", "--out", "i.ckpt", "--force"]),
    ("bleu", ["bleu", "--ref", "ref.txt", "--hyp", "hyp.txt", "--score-only"]),
    ("demo", ["demo", "--steps", "100", "--hidden", "16", "--lr", "0.5", "--seed", "3"]),
    ("devices", ["devices"]),
    ("version", ["version"]),
    ("help", ["--help"]),
    ("unknown", ["trian", "--config", "x"]),
]:
    put("fuzz_cli", name, nul(*args))

# --- fuzz_parallel: source text, target text, max_len, [vocabulary size of a BPE model to train first].
put("fuzz_parallel", "multi30k-like", nul("Zwei junge Männer sind im Freien.\nEin Mann in einem blauen Hemd.\n",
                                          "Two young men are outside.\nA man in a blue shirt.\n", "0"))
put("fuzz_parallel", "max-len", nul("Ein kleines Mädchen klettert in ein Spielhaus aus Holz.\nZwei Männer.\n",
                                    "A little girl climbing into a wooden playhouse.\nTwo men.\n", "6"))
put("fuzz_parallel", "train-subword", nul("ein Hund läuft\nein Mann liest\nein Kind spielt\n",
                                          "a dog runs\na man reads\na child plays\n", "0", "30"))
put("fuzz_parallel", "blank-crlf", nul("Zwei Männer.\r\n\r\n   \r\nEin Hund", "Two men.\r\nx\r\n\r\nA dog", ""))
put("fuzz_parallel", "misaligned", nul("eins\nzwei\ndrei\n", "one\ntwo\n"))
put("fuzz_parallel", "specials-unknown", nul("</s> <s> <pad> <unk> \u2581\u2581 \u6f22\u5b57 \U0001f600\n",
                                             "\u00a0\u2003x\ty\n", "4"))
put("fuzz_parallel", "not-utf8", b"M\xe4nner\nok\n\x00men\n\xff\n")
put("fuzz_parallel", "source-only", "Zwei Männer.\n")


# --- fuzz_subword: SentencePiece .model files (ModelProto, sentencepiece_model.proto of SentencePiece
# 0.1.97), written with a small protobuf encoder: pieces (1: piece, 2: score, 3: type), the trainer
# spec (3: model_type, 4: vocab_size, 35: byte_fallback, 40-43: unk, bos, eos, pad ids) and the
# normalizer spec (1: name, 2: precompiled_charsmap, 3: add_dummy_prefix, 4:
# remove_extra_whitespaces, 5: escape_whitespaces).
def varint(n):
    n &= (1 << 64) - 1  # negative int32s as ten bytes, as protobuf writes them
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def pb_int(field, n):
    return varint(field << 3) + varint(n)


def pb_bytes(field, b):
    b = b.encode() if isinstance(b, str) else b
    return varint(field << 3 | 2) + varint(len(b)) + b


def pb_float(field, x):
    return varint(field << 3 | 5) + struct.pack("<f", x)


NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM, BPE, WORD, CHAR = 1, 2, 3, 4
SPECIALS = [("<pad>", 0.0, CONTROL), ("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL)]


def spm_model(pieces, model_type, ids=(0, 1, 2, 3), byte_fallback=False, normalizer="identity", extra=b""):
    """pieces: (piece, score, type); ids: (pad, unk, bos, eos) as the trainer spec records them."""
    out = b"".join(pb_bytes(1, pb_bytes(1, p) + pb_float(2, score) + (pb_int(3, t) if t != NORMAL else b""))
                   for p, score, t in pieces)
    pad, unk, bos, eos = ids
    trainer = (pb_int(3, model_type) + pb_int(4, len(pieces)) + pb_float(10, 1.0) + pb_int(16, 1) +
               pb_int(35, int(byte_fallback)) + pb_int(40, unk) + pb_int(41, bos) + pb_int(42, eos) + pb_int(43, pad))
    return out + pb_bytes(2, trainer) + pb_bytes(3, pb_bytes(1, normalizer) + pb_bytes(2, b"")) + extra


WB = "\u2581"  # SentencePiece's word boundary
letters = [WB, "e", "n", "a", "i", "r", "t", "s", "h", "d", "m", "o", "\u00e4"]
merges = [WB + "a", "en", "er", "in", WB + "ein", WB + "the", "an"]
bpe = spm_model(SPECIALS + [(p, -float(i), NORMAL) for i, p in enumerate(merges + letters)], BPE)
put("fuzz_subword", "bpe.model", bpe)
put("fuzz_subword", "unigram.model",
    spm_model(SPECIALS + [(p, -1.5 - 0.25 * i, NORMAL) for i, p in enumerate(letters + merges)], UNIGRAM))
put("fuzz_subword", "unigram-bytes.model",
    spm_model(SPECIALS + [("<0x%02X>" % b, 0.0, BYTE) for b in range(256)] +
              [(p, -2.0 - i, NORMAL) for i, p in enumerate(letters + merges)], UNIGRAM, byte_fallback=True))
put("fuzz_subword", "word.model",
    spm_model(SPECIALS + [(WB + w, -1.0 - i, NORMAL) for i, w in enumerate(["a", "man", "dog", "ein", "Mann"])], WORD))
put("fuzz_subword", "char.model", spm_model(SPECIALS + [(p, -1.0 - i, NORMAL) for i, p in enumerate(letters)], CHAR))
put("fuzz_subword", "user-defined.model",
    spm_model(SPECIALS + [("<sep>", 0.0, USER_DEFINED), ("<mask>", 0.0, CONTROL), ("<unused>", 0.0, UNUSED)] +
              [(p, -float(i), NORMAL) for i, p in enumerate(merges + letters)], BPE))
# spm_train's defaults: no pad piece, unk at 0, bos 1, eos 2 (refused: translation needs a pad).
put("fuzz_subword", "no-pad.model",
    spm_model(SPECIALS[1:] + [(p, -float(i), NORMAL) for i, p in enumerate(letters)], BPE, ids=(-1, 0, 1, 2)))
put("fuzz_subword", "nfkc-no-charsmap.model",
    spm_model(SPECIALS + [(p, -float(i), NORMAL) for i, p in enumerate(letters)], BPE, normalizer="nmt_nfkc"))
put("fuzz_subword", "truncated.model", bpe[:len(bpe) // 2])
put("fuzz_subword", "empty.model", b"")
