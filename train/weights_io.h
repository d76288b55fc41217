// Weights interchange with other tools (Python: `safetensors.numpy.load_file`, or
// scripts/open_safetensors.py without any package); `define export` and `define import`
// (tools/export.cpp) are the command-line side.
//
//   export_weights  the model's state dict under its parameter names (input.map.weight,
//       rnn.module.weight_hh_l0, output.bias, ...), plus metadata strings: "define.format" =
//       "weights/1", "config" (the run's resolved config.json, so the model can be rebuilt), "vocab"
//       (one word per line, line i = id i), "source_checkpoint".
//   import_weights  loads such a file (e.g. weights changed in Python) into the run's model and
//       writes a checkpoint that eval / generate / export-cache read with --checkpoint. Strict: every
//       missing, unexpected, mis-shaped or mis-typed tensor is listed by name, a vocabulary in the
//       metadata must equal the run's, and two names of one shared tensor (e.g. input.map.weight and
//       input.dextra_emb.map.weight) must hold equal values. Nothing is written unless the whole
//       file fits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "train/run_loader.h"

namespace define::train {

struct ExportSummary {
  std::size_t tensors = 0;
  std::int64_t bytes = 0;
};
ExportSummary export_weights(const LoadedRun& run, const std::string& out);
// Returns the number of tensors written to the checkpoint `out`.
std::size_t import_weights(const LoadedRun& run, const std::string& from, const std::string& out);

}  // namespace define::train
