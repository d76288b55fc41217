"""Reads and writes the safetensors files the reference-equality tests exchange with define
(tests/models/reference_equality_test.cpp): a little-endian header length, a JSON header naming
each tensor's dtype, shape and byte range, then the bytes. numpy only, so no PyPI package is
needed beside Debian's python3-torch."""
import json
import struct

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "I64": np.int64, "I32": np.int32}
NAMES = {np.dtype(v).str: k for k, v in DTYPES.items()}


def read(path):
    """{name: numpy array} of a safetensors file (its metadata ignored)."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"]).copy()
    return out


def write(path, tensors):
    """Writes {name: numpy array} (float64 / float32 / int64 / int32) as safetensors."""
    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        a = np.ascontiguousarray(array)
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": NAMES[a.dtype.str], "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
