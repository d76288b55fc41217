// kernels/cpu/row_math.h runs float32 rows as explicit vectors (8 floats with AVX, 4 without). Each of its 16 lanes
// must do exactly what a scalar lane does (lane l sums elements l, l + 16, ... in order, then the
// lanes and the tail are added in double), so the vector path gives the same bits as these plain
// scalar loops, for every row length (tails of 0-15), -inf, NaN, -0 and huge logits. The softmax,
// attention and adaptive-softmax harness cases then check the kernels against the float64
// reference; this pins the rounding itself.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/row_math.h"

namespace rm = define::kernels::cpu::row_math;

namespace {

constexpr int kLanes = rm::kLanes;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Scalar lanes, written the plain way.
float scalar_row_max(const float* x, std::int64_t n) {
  float acc[kLanes];
  for (float& a : acc) a = -std::numeric_limits<float>::infinity();
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = rm::max_of(acc[l], x[j + l]);
  float m = -std::numeric_limits<float>::infinity();
  for (; j < n; ++j) m = rm::max_of(m, x[j]);
  for (float a : acc) m = rm::max_of(m, a);
  return m;
}

// sum of exp(x - shift) in kLanesThenTail order, storing the exponentials in y when given.
double scalar_sum_exp(const float* x, float* y, std::int64_t n, float shift) {
  float acc[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float e = rm::exp_fast(x[j + l] - shift);
      if (y) y[j + l] = e;
      acc[l] += e;
    }
  double s = 0;
  for (float a : acc) s += a;
  for (; j < n; ++j) {
    const float e = rm::exp_fast(x[j] - shift);
    if (y) y[j] = e;
    s += e;
  }
  return s;
}

double scalar_dot_tail_plus_lanes(const float* a, const float* b, std::int64_t n) {
  float acc[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
  double tail = 0, lanes = 0;
  for (; j < n; ++j) tail += double(a[j]) * b[j];
  for (float v : acc) lanes += v;
  return tail + lanes;
}

std::vector<float> random_row(std::mt19937& gen, std::int64_t n, int variant) {
  std::normal_distribution<float> nd(0.0f, variant % 3 == 0 ? 40.0f : 5.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = nd(gen);
  if (n > 6 && variant % 4 == 1) x[1] = -std::numeric_limits<float>::infinity();  // a masked score
  if (n > 6 && variant % 5 == 2) x[5] = std::numeric_limits<float>::quiet_NaN();
  if (n > 6 && variant % 6 == 3) x[2] = -0.0f;
  return x;
}

}  // namespace

TEST_CASE("row_math: the float32 vector lanes give the scalar lanes' bits", "[softmax][row_math]") {
  std::mt19937 gen(7);
  int rows = 0;
  for (int variant = 0; variant < 12; ++variant)
    for (const std::int64_t n : {0, 1, 7, 15, 16, 17, 31, 32, 33, 48, 95, 1000, 10007}) {
      INFO("n " << n << " variant " << variant);
      const std::vector<float> x = random_row(gen, n, variant), b = random_row(gen, n, variant + 1);
      const float m = scalar_row_max(x.data(), n);
      CHECK(same_bits(rm::row_max(x.data(), n), m));
      const rm::RowStats<float> st = rm::row_stats(x.data(), n);
      CHECK(same_bits(st.max, m));
      CHECK(same_bits(st.log_sum, std::log(scalar_sum_exp(x.data(), nullptr, n, m))));
      CHECK(same_bits(rm::row_dot<rm::SumOrder::kTailPlusLanes>(x.data(), b.data(), n),
                      scalar_dot_tail_plus_lanes(x.data(), b.data(), n)));
      // Softmax in place (y is x) against the scalar exponentials scaled by their sum.
      std::vector<float> want(x.size()), got = x;
      const float inv = static_cast<float>(1.0 / scalar_sum_exp(x.data(), want.data(), n, m));
      for (float& v : want) v *= inv;
      rm::store_softmax<rm::SumOrder::kLanesThenTail>(got.data(), got.data(), n, m);
      CHECK(same_bits(got, want));
      // The gradient rows.
      const float shift = 0.25f, scale = 0.03f, sub = 1e-5f;
      std::vector<float> g1(x.size()), g2(x.size());
      for (std::size_t j = 0; j < x.size(); ++j) g1[j] = scale * rm::exp_fast(x[j] - shift) - sub;
      rm::store_scaled_exp(x.data(), g2.data(), n, shift, scale, sub);
      CHECK(same_bits(g1, g2));
      for (std::size_t j = 0; j < x.size(); ++j) g1[j] = b[j] - rm::exp_fast(x[j] - shift) * scale;
      rm::store_minus_scaled_exp(b.data(), x.data(), g2.data(), n, shift, scale);
      CHECK(same_bits(g1, g2));
      ++rows;
    }
  CHECK(rows == 12 * 13);
}

TEST_CASE("row_math: exp_fast on a vector equals exp_fast on each, and stays within a few ulp of std::exp",
          "[softmax][row_math]") {
  double worst_rel = 0;
  for (float v = -90.0f; v < 89.0f; v += 0.0173f) {
    // 16 values: one AVX-512 vector, two AVX ones, four SSE ones.
    const float values[16] = {v, -v, v * 0.5f, -0.0f, 0.0f, v - 1.0f, std::numeric_limits<float>::quiet_NaN(),
                              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                              v * 2.0f, -v * 0.25f, 87.9f, -86.9f, -87.1f, 1e-30f, v + 0.5f};
    for (int first = 0; first < 16; first += rm::kVecLanes) {
      const rm::FloatVec out = rm::exp_fast(rm::load_vec(values + first));
      for (int l = 0; l < rm::kVecLanes; ++l) CHECK(same_bits(out[l], rm::exp_fast(values[first + l])));
    }
    if (v > -87.0f && v < 88.0f) {
      const double want = std::exp(double(v));
      worst_rel = std::max(worst_rel, std::abs(double(rm::exp_fast(v)) - want) / want);
    }
  }
  CHECK(worst_rel < 4e-7);  // a few float32 ulp (one ulp is 6e-8 to 1.2e-7 relative)
  CHECK(rm::exp_fast(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(rm::exp_fast(std::numeric_limits<float>::quiet_NaN())));
}
