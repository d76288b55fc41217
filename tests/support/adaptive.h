// Shared by the adaptive input / softmax tests (adaptive_count_test.cpp, adaptive_test.cpp): a
// model holding an input layer and a softmax, optionally tied, so tied tensors count once, as in
// a real language model.
#pragma once

#include <memory>

#include "nn/module.h"

namespace define::test {

template <class In, class Out>
struct LanguageModelIO : nn::Module {
  std::shared_ptr<In> input;
  std::shared_ptr<Out> output;
  LanguageModelIO() : nn::Module("LanguageModelIO") {}
};

template <class In, class Out, class InCfg, class OutCfg>
std::shared_ptr<LanguageModelIO<In, Out>> make_io(const InCfg& in_cfg, const OutCfg& out_cfg, bool tie,
                                                  Generator& gen) {
  auto m = std::make_shared<LanguageModelIO<In, Out>>();
  m->input = m->register_module("input", std::make_shared<In>(in_cfg, gen));
  m->output = m->register_module("output", std::make_shared<Out>(out_cfg, tie ? m->input.get() : nullptr, gen));
  return m;
}

}  // namespace define::test
