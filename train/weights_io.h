// Weights interchange with other tools (Python: `safetensors.numpy.load_file`, or
// scripts/open_safetensors.py without any package); `define export` and `define import`
// (tools/export.cpp) are the command-line side.
//
//   export_weights  the model's state dict under its parameter names (input.map.weight,
//       rnn.module.weight_hh_l0, output.bias, ...), plus metadata strings: "define.format" =
//       "weights/1", "config" (the run's resolved config.json, so the model can be rebuilt), "vocab"
//       (one word per line, line i = id i), "source_checkpoint".
//       `--dtype float16|bfloat16` writes the float tensors in 16 bits (half the size).
//   import_weights  loads such a file (16-bit tensors widen exactly into the float32 model) (e.g. weights changed in
//   Python) into the run's model and
//       writes a checkpoint that eval / generate / export-cache read with --checkpoint. Strict: every
//       missing, unexpected, mis-shaped or mis-typed tensor is listed by name, a vocabulary in the
//       metadata must equal the run's, and two names of one shared tensor (e.g. input.map.weight and
//       input.dextra_emb.map.weight) must hold equal values. Nothing is written unless the whole
//       file fits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "train/run_loader.h"

namespace define::train {

struct ExportSummary {
  std::size_t tensors = 0;
  std::int64_t bytes = 0;
};
// dtype: float tensors written in that format (float16 / bfloat16 for a half-size file, rounded
// once); nullopt keeps the model's (float32).
ExportSummary export_weights(const LoadedRun& run, const std::string& out, std::optional<DType> dtype = std::nullopt);
// Returns the number of tensors written to the checkpoint `out`.
std::size_t import_weights(const LoadedRun& run, const std::string& from, const std::string& out);

}  // namespace define::train
