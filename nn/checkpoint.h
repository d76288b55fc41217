// Checkpoints: everything a run needs to continue exactly where it stopped — the model's state
// dict, the optimizer's state, and scalars/strings of the run (step, RNG state, data position,
// resolved config) — in one safetensors file (nn/safetensors.h), written atomically and verified
// by CRC-32 on load. Opening one from Python shows the model's tensors as "model/<name>".
//
// Layout inside the file:
//   tensors  "model/<parameter or buffer name>", "optimizer/<optimizer state key>",
//            "run/<name>" (the caller's tensors: e.g. the recurrent state carried across batches)
//   metadata "define.format" = "checkpoint/1", "optimizer.name",
//            "optimizer.scalar.<key>" (%.17g, exact), "run.<key>" (the caller's strings)
#pragma once

#include <map>
#include <string>

#include "nn/module.h"
#include "nn/optim/optimizer.h"
#include "nn/safetensors.h"

namespace define::nn {

struct Checkpoint {
  StateDict model;
  optim::OptimizerState optimizer;
  std::string optimizer_name;            // e.g. "Adam"; checked on load when both are set
  std::map<std::string, std::string> run;  // free-form: step, RNG state, data position, config
  std::map<std::string, Tensor> run_tensors;  // free-form tensors of the run
};

// Written to a temporary file next to `path`, flushed, then renamed over it: an interrupted save
// leaves the previous checkpoint intact.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Refuses, naming the path: a missing file, a truncated or altered file (CRC-32 / structure), a
// safetensors file that is not a define checkpoint, or one of an unknown format version.
Checkpoint load_checkpoint(const std::string& path);

// Convenience: capture / restore a module and an optimizer (the optimizer may be null).
Checkpoint make_checkpoint(const Module& model, const optim::Optimizer* optimizer,
                           std::map<std::string, std::string> run = {});
void restore_checkpoint(const Checkpoint& ckpt, Module& model, optim::Optimizer* optimizer);

}  // namespace define::nn
