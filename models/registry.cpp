#include "models/registry.h"

#include "core/error.h"
#include "models/delight_lm.h"
#include "models/delight_nmt.h"
#include "models/lstm_lm.h"
#include "models/transformer_nmt.h"
#include "models/transformer_xl.h"

namespace define::models {
namespace {

// Keys shared by both DeLighT models (DelightNmtConfig and DelightLmConfig name these fields
// alike): the token representation and the blocks' options.
template <class Cfg>
void read_delight_common(const Config& c, Cfg& cfg) {
  cfg.map_dim = c.get_int("map_dim", cfg.map_dim);
  cfg.d_m = c.get_int("d_m", cfg.d_m);
  cfg.max_groups = c.get_int("max_groups", 0);
  cfg.group_rule = nn::parse_dextra_group_rule(c.get_string("group_rule", "released"));
  cfg.emb_depth = c.get_int("emb_depth", cfg.emb_depth);
  cfg.emb_width_mult = c.get_double("emb_width_mult", cfg.emb_width_mult);
  cfg.ffn_reduction = c.get_int("ffn_reduction", cfg.ffn_reduction);
  cfg.dextra_norm = nn::parse_grouped_linear_norm(c.get_string("dextra_norm", "chunk"));
  cfg.activation = nn::parse_activation(c.get_string("activation", "swish"));
  cfg.shuffle = c.get_bool("shuffle", cfg.shuffle);
}

// The dropouts both DeLighT models take, from the `dropout` section (spec 4.5 lists the released
// values; every one defaults to 0 except ffn, which the released code ties to residual).
template <class Cfg>
void read_delight_dropouts(const Config& c, Cfg& cfg) {
  const Config d = c.section("dropout");
  cfg.dropout = d.get_double("residual", 0.0);
  cfg.attention_dropout = d.get_double("attention", 0.0);
  cfg.activation_dropout = d.get_double("activation", 0.0);
  cfg.ffn_dropout = d.get_double("ffn", cfg.dropout);  // the released code ties it to the residual dropout
  cfg.dextra_dropout = d.get_double("dextra", 0.0);
  cfg.emb_dropout = d.get_double("embedding", 0.0);
  cfg.pe_dropout = d.get_double("positions", 0.0);
  const std::string mask = d.get_string("positions_mask", "sequence");
  if (mask != "sequence" && mask != "element")
    fail("build_model", "{} must be 'sequence' (one mask per sequence and channel, as released) or 'element', got '{}'",
         d.path("positions_mask"), mask);
  cfg.pe_dropout_locked = mask == "sequence";
}

BuiltModel build_delight_nmt(const Config& c, std::int64_t vocab, Generator& gen) {
  DelightNmtConfig cfg;
  cfg.vocab = vocab;
  read_delight_common(c, cfg);
  cfg.padding_idx = c.get_int("padding_idx", cfg.padding_idx);
  const Config enc = c.section("encoder"), dec = c.section("decoder");
  cfg.enc_min_depth = enc.get_int("min_depth", cfg.enc_min_depth);
  cfg.enc_max_depth = enc.get_int("max_depth", cfg.enc_max_depth);
  cfg.enc_layers = enc.get_int("layers", cfg.enc_max_depth);  // released archs: B = N_max
  cfg.enc_width_mult = enc.get_double("width_mult", cfg.enc_width_mult);
  cfg.dec_min_depth = dec.get_int("min_depth", cfg.dec_min_depth);
  cfg.dec_max_depth = dec.get_int("max_depth", cfg.dec_max_depth);
  cfg.dec_layers = dec.get_int("layers", cfg.dec_max_depth);
  cfg.dec_width_mult = dec.get_double("width_mult", cfg.dec_width_mult);
  cfg.pre_norm = c.get_bool("pre_norm", cfg.pre_norm);
  cfg.final_norm = c.get_bool("final_norm", cfg.final_norm);
  read_delight_dropouts(c, cfg);
  auto m = std::make_shared<DelightNmt>(cfg, gen);
  return {"delight_nmt", m, m->part_rules()};
}

BuiltModel build_delight_lm(const Config& c, std::int64_t vocab, Generator& gen) {
  DelightLmConfig cfg;
  cfg.vocab = vocab;
  read_delight_common(c, cfg);
  cfg.padding_idx = c.get_int("padding_idx", cfg.padding_idx);
  cfg.min_depth = c.get_int("min_depth", cfg.min_depth);
  cfg.max_depth = c.get_int("max_depth", cfg.max_depth);
  cfg.layers = c.get_int("layers", cfg.max_depth);
  cfg.width_mult = c.get_double("width_mult", cfg.width_mult);
  cfg.final_norm = c.get_bool("final_norm", cfg.final_norm);
  cfg.adaptive = c.get_bool("adaptive", cfg.adaptive);
  if (cfg.adaptive) {
    cfg.cutoffs = c.get_int_list("cutoffs", cfg.cutoffs);
    cfg.adaptive_factor = c.get_double("adaptive_factor", cfg.adaptive_factor);
  }
  read_delight_dropouts(c, cfg);
  cfg.adaptive_softmax_dropout = c.section("dropout").get_double("adaptive_softmax", 0.0);
  auto m = std::make_shared<DelightLm>(cfg, gen);
  return {"delight_lm", m, m->part_rules()};
}

}  // namespace

BuiltModel build_model(const Config& model, std::int64_t vocab, Generator& gen) {
  const std::string type = model.get_string("type");
  if (vocab == 0) {
    vocab = model.get_int("vocab_size");
  } else if (model.has("vocab_size") && model.get_int("vocab_size") != vocab) {
    fail("build_model", "{} = {} but the data's vocabulary has {} words", model.path("vocab_size"),
         model.get_int("vocab_size"), vocab);
  }
  if (type == "lstm_lm") {
    auto m = std::make_shared<LstmLm>(read_lstm_lm_config(model, vocab), gen);
    return {type, m, m->part_rules()};
  }
  if (type == "transformer_xl") {
    auto m = std::make_shared<TransformerXL>(read_transformer_xl_config(model, vocab), gen);
    return {type, m, m->part_rules()};
  }
  if (type == "transformer_nmt") {
    auto m = std::make_shared<TransformerNmt>(read_transformer_nmt_config(model, vocab), gen);
    return {type, m, m->part_rules()};
  }
  if (type == "delight_nmt") return build_delight_nmt(model, vocab, gen);
  if (type == "delight_lm") return build_delight_lm(model, vocab, gen);
  fail("build_model", "unknown model type '{}' at {} (known: lstm_lm, transformer_xl, delight_lm, delight_nmt, transformer_nmt)", type, model.path("type"));
}

}  // namespace define::models
