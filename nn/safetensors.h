// Named tensors on disk in the safetensors format (https://huggingface.co/docs/safetensors), so a
// model's weights open from Python (`safetensors.torch.load_file`) under the module's parameter
// names, and so define's checkpoints (nn/checkpoint.h) use one well-specified container:
//
//   [u64 little-endian: header length H][H bytes: JSON header, space-padded to 8-byte alignment]
//   [data: every tensor's bytes, row-major, little-endian, in header order, no gaps]
//
// The header maps each name to {"dtype", "shape", "data_offsets": [begin, end)} (offsets into the
// data section), plus "__metadata__": string -> string.
//
// Integrity: define writes the metadata key "define.crc32", the CRC-32 of the whole file computed
// with that value's 8 hex digits set to "00000000", so every byte (header and data) is covered.
// Files are written atomically (a temporary file in the same folder, flushed to disk, then renamed),
// so a crash never leaves a half-written file under the final name.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace define::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

// Tensors may be on any device and have any strides (written as contiguous CPU copies). Names
// must be unique and non-empty, and must not be "__metadata__". Throws naming the path on I/O
// errors.
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

struct SafetensorsContents {
  NamedTensors tensors;  // CPU tensors, in file order
  Metadata metadata;
};

// Reads and validates a file: refuses, naming the path and the problem, a missing file, a file
// shorter than its header says (truncated), a malformed header, overlapping or out-of-range
// offsets, unknown dtypes, sizes that disagree with shapes, and a CRC-32 mismatch when the file
// carries "define.crc32". Files without it (written by other tools) load unchecked.
SafetensorsContents load_safetensors(const std::string& path);

}  // namespace define::nn
