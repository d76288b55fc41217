// Next-token sampling (models/sampling.h): the truncated distributions against values worked out by
// hand, and draws from a known distribution whose frequencies must match the truncated one.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "models/sampling.h"

using namespace define;
using Catch::Contains;
using models::SamplingOptions;

namespace {

// log of probabilities 0.4, 0.25, 0.15, 0.1, 0.06, 0.04 in a shuffled token order.
const std::vector<double> kProbs = {0.1, 0.4, 0.04, 0.25, 0.06, 0.15};

std::vector<double> log_of(const std::vector<double>& p) {
  std::vector<double> out;
  for (double v : p) out.push_back(std::log(v));
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
}

}  // namespace

TEST_CASE("sampling: temperature, top-k and top-p truncate as worked out by hand", "[models][sampling]") {
  const std::vector<double> logp = log_of(kProbs);
  check_close(models::sampling_distribution(logp, {}), kProbs);
  // Top-3 keeps 0.4, 0.25, 0.15 (tokens 1, 3, 5), renormalised by 0.8.
  check_close(models::sampling_distribution(logp, {.top_k = 3}), {0, 0.5, 0, 0.3125, 0, 0.1875});
  // Top-p 0.7: 0.4 + 0.25 = 0.65 < 0.7, so 0.15 joins; 0.8 in all.
  check_close(models::sampling_distribution(logp, {.top_p = 0.7}), {0, 0.5, 0, 0.3125, 0, 0.1875});
  // Exactly reaching P stops there: 0.4 + 0.25 = 0.65.
  check_close(models::sampling_distribution(logp, {.top_p = 0.65}), {0, 0.4 / 0.65, 0, 0.25 / 0.65, 0, 0});
  // Top-p after top-k works on the top-k renormalised mass: top-2 gives 0.615, 0.385; p = 0.5 keeps one.
  check_close(models::sampling_distribution(logp, {.top_k = 2, .top_p = 0.5}), {0, 1, 0, 0, 0, 0});
  // Temperature 2 flattens to sqrt(p), renormalised; T = 0 is the argmax; a tiny top-p too.
  std::vector<double> flat;
  double total = 0;
  for (double v : kProbs) total += std::sqrt(v);
  for (double v : kProbs) flat.push_back(std::sqrt(v) / total);
  check_close(models::sampling_distribution(logp, {.temperature = 2}), flat);
  check_close(models::sampling_distribution(logp, {.temperature = 0}), {0, 1, 0, 0, 0, 0});
  check_close(models::sampling_distribution(logp, {.top_p = 1e-9}), {0, 1, 0, 0, 0, 0});
  // Ties: the lower id ranks first.
  check_close(models::sampling_distribution(log_of({0.3, 0.3, 0.4}), {.top_k = 2}), {3.0 / 7, 0, 4.0 / 7});

  CHECK_THROWS_WITH(models::sampling_distribution(logp, {.top_k = -1}), Contains("top-k must be >= 0"));
  CHECK_THROWS_WITH(models::sampling_distribution(logp, {.top_p = 0}), Contains("top-p must be in (0, 1]"));
  CHECK_THROWS_WITH(models::sampling_distribution(logp, {.top_p = 1.5}), Contains("top-p must be in (0, 1]"));
  CHECK_THROWS_WITH(models::sampling_distribution(logp, {.temperature = NAN}), Contains("temperature"));
  CHECK_THROWS_WITH(models::sampling_distribution({}, {}), Contains("no tokens"));
}

TEST_CASE("sampling: drawn frequencies match the truncated distribution", "[models][sampling]") {
  const std::vector<double> logp = log_of(kProbs);
  constexpr std::int64_t kDraws = 200000;
  Generator gen(42);
  const std::vector<double> u = rand_uniform({kDraws}, 0.0, 1.0, {.dtype = DType::Float64}, gen).to_vector<double>();
  for (const SamplingOptions& o : {SamplingOptions{}, SamplingOptions{.top_k = 4}, SamplingOptions{.top_p = 0.7},
                                   SamplingOptions{.temperature = 0.5, .top_k = 5, .top_p = 0.9}}) {
    const std::vector<double> want = models::sampling_distribution(logp, o);
    std::vector<double> count(logp.size(), 0);
    for (double x : u) count[static_cast<std::size_t>(models::sample_token(logp, o, x))] += 1;
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO("token " << i << ", top_k " << o.top_k << ", top_p " << o.top_p << ", T " << o.temperature);
      if (want[i] == 0) {
        CHECK(count[i] == 0);  // a truncated token is never drawn
        continue;
      }
      // Within 5 standard deviations of the binomial count.
      const double n = static_cast<double>(kDraws), sd = std::sqrt(n * want[i] * (1 - want[i]));
      CHECK(std::abs(count[i] - n * want[i]) < 5 * sd);
    }
  }
}
