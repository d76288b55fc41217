#include "models/registry.h"

#include "core/error.h"
#include "models/lstm_lm.h"

namespace define::models {

BuiltModel build_model(const Config& model, std::int64_t vocab, Generator& gen) {
  const std::string type = model.get_string("type");
  if (vocab == 0) {
    vocab = model.get_int("vocab_size");
  } else if (model.has("vocab_size") && model.get_int("vocab_size") != vocab) {
    fail("build_model", "{} = {} but the data's vocabulary has {} words", model.path("vocab_size"),
         model.get_int("vocab_size"), vocab);
  }
  if (type == "lstm_lm") {
    auto m = std::make_shared<LstmLM>(read_lstm_lm_config(model, vocab), gen);
    return {type, m, m->part_rules()};
  }
  fail("build_model", "unknown model type '{}' at {} (known: lstm_lm)", type, model.path("type"));
}

}  // namespace define::models
