#!/usr/bin/env python3
"""Opens a safetensors file written by define (`define export`, `define export-cache`, or a
checkpoint) from Python, to show that the weights interchange works outside define.

Reads the format directly (8-byte little-endian header length, JSON header, raw little-endian
data), so it needs no package: with numpy installed the tensors become numpy arrays, without it
they are read with the standard `array` module. It prints every tensor's name, dtype, shape and
a few statistics, the metadata (the config and vocabulary of an export, summarised), and checks
define's whole-file CRC-32 ("define.crc32": the CRC of the file with that value's 8 hex digits
set to "00000000") with zlib.

usage: python3 scripts/open_safetensors.py FILE [--values N]
Not part of the build; define never runs Python.
"""
import argparse
import array
import json
import math
import struct
import sys
import zlib

try:
    import numpy as np
except ImportError:  # the standard library is enough
    np = None

# safetensors dtype -> (array typecode, numpy dtype, bytes per element)
DTYPES = {
    "F32": ("f", "<f4", 4),
    "F64": ("d", "<f8", 8),
    "I32": ("i", "<i4", 4),
    "I64": ("q", "<i8", 8),
    "F16": (None, "<f2", 2),
}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        sys.exit(f"{path}: too short to be a safetensors file ({len(data)} bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        sys.exit(f"{path}: header length {n} runs past the end of the file ({len(data)} bytes)")
    header = json.loads(data[8 : 8 + n])
    return data, n, header


def check_crc(data, header_len, metadata):
    stored = metadata.get("define.crc32")
    if stored is None:
        return "no define.crc32 entry (not written by define): not checked"
    head = data[8 : 8 + header_len]
    key = b'"define.crc32":"' + stored.encode() + b'"'
    at = head.find(key)
    if at < 0:
        return "define.crc32 entry not found verbatim in the header: not checked"
    digits = 8 + at + len(key) - 9  # the 8 hex digits before the closing quote
    zeroed = data[:digits] + b"00000000" + data[digits + 8 :]
    actual = f"{zlib.crc32(zeroed) & 0xFFFFFFFF:08x}"
    return f"define.crc32 {stored}: {'OK' if actual == stored else 'MISMATCH (computed ' + actual + ')'}"


def tensor_values(data, base, info):
    code, np_dtype, size = DTYPES[info["dtype"]]
    begin, end = info["data_offsets"]
    raw = data[base + begin : base + end]
    count = math.prod(info["shape"]) if info["shape"] else 1
    if len(raw) != count * size:
        sys.exit(f"tensor of shape {info['shape']} has {len(raw)} bytes, expected {count * size}")
    if np is not None:
        return np.frombuffer(raw, dtype=np_dtype).reshape(info["shape"])
    if code is None:
        return None
    values = array.array(code)
    values.frombytes(raw)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def stats(values):
    if values is None:
        return "(F16: install numpy to read)"
    flat = values.ravel().tolist() if np is not None else list(values)
    if not flat:
        return "(empty)"
    mean = sum(flat) / len(flat)
    return f"mean {mean:+.5f}  absmax {max(abs(v) for v in flat):.5f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--values", type=int, default=3, help="first values to print per tensor")
    args = ap.parse_args()

    data, header_len, header = read(args.file)
    metadata = header.pop("__metadata__", {})
    base = 8 + header_len
    print(f"{args.file}: {len(header)} tensors, {len(data)} bytes, read with {'numpy ' + np.__version__ if np else 'the array module (no numpy)'}")
    for name, info in header.items():
        values = tensor_values(data, base, info)
        first = ""
        if values is not None and args.values > 0:
            flat = values.ravel()[: args.values].tolist() if np is not None else list(values[: args.values])
            first = "  first " + ", ".join(f"{v:.5g}" for v in flat)
        print(f"  {name:<40} {info['dtype']:<4} {str(info['shape']):<14} {stats(values)}{first}")
    print("metadata:")
    for key, value in sorted(metadata.items()):
        if key == "config":
            cfg = json.loads(value)
            print(f"  config: model.type {cfg['model']['type']}, input {json.dumps(cfg['model']['input'])}")
        elif key == "vocab":
            words = value.split("\n")[:-1]
            print(f"  vocab: {len(words)} words, first {words[:5]}")
        else:
            print(f"  {key}: {value}")
    print(check_crc(data, header_len, metadata))


if __name__ == "__main__":
    main()
