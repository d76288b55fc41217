// Correctness of ordinary kernels under the emulator: GEMM, reductions, softmax, histogram, thread
// indexing in every shape, warp intrinsics, atomics, math intrinsics, vector types. Each test drives
// the kernels through their host wrappers and device buffers, exactly as GPU code would.
#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "emu_test_support.hpp"
#include "kernels/basic.cuh"
#include "kernels/gemm.cuh"
#include "kernels/reduce.cuh"

using emu_test::DeviceBuffer;

namespace {

// Checks C = A * B against a double-precision loop. The tolerance is the worst-case float
// accumulation error for any summation order: (k + 2) * eps * sum_k |a_ik * b_kj|.
void check_gemm(int m, int n, int k, bool dynamic_smem) {
  CAPTURE(m, n, k, dynamic_smem);
  const auto a = emu_test::random_floats(std::size_t(m) * k, 1);
  const auto b = emu_test::random_floats(std::size_t(k) * n, 2);
  DeviceBuffer<float> da(a), db(b), dc(std::size_t(m) * n);
  REQUIRE(cudaMemset(dc.get(), 0xFF, std::size_t(m) * n * sizeof(float)) == cudaSuccess);  // NaN: catch unwritten
  if (dynamic_smem) {
    emu_test::sgemm_dynamic_smem(m, n, k, da.get(), db.get(), dc.get());
  } else {
    emu_test::sgemm_tiled(m, n, k, da.get(), db.get(), dc.get());
  }
  const auto c = dc.download();
  int bad = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const double prod = double(a[std::size_t(i) * k + p]) * b[std::size_t(p) * n + j];
        ref += prod;
        mag += std::fabs(prod);
      }
      const double tol = (k + 2) * 6e-8 * mag + 1e-30;
      const double got = c[std::size_t(i) * n + j];
      if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
        FAIL_CHECK("C[" << i << "," << j << "] = " << got << ", want " << ref);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("emu: tiled SGEMM matches a CPU loop", "[emu][gemm]") {
  for (bool dyn : {false, true}) {
    check_gemm(256, 256, 256, dyn);
    check_gemm(1, 33, 31, dyn);
    check_gemm(67, 45, 93, dyn);
    check_gemm(96, 80, 64, dyn);
    check_gemm(5, 7, 0, dyn);  // empty inner dimension: C = 0
  }
}

TEST_CASE("emu: grid-stride warp-shuffle reduction", "[emu][reduce]") {
  for (std::size_t n : {std::size_t(1) << 20, std::size_t(1000003), std::size_t(1), std::size_t(300)}) {
    CAPTURE(n);
    // Multiples of 1/256 with small numerators: every partial sum is exact in float, so the result
    // must equal the exact sum whatever the order of additions.
    std::vector<float> x(n);
    long long exact = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const int q = int((i * 2654435761u) % 17) - 8;
      x[i] = float(q) / 256.f;
      exact += q;
    }
    DeviceBuffer<float> dx(x), partial(emu_test::kReduceMaxBlocks), out(1), out_atomic(1);
    emu_test::reduce_sum(dx.get(), n, partial.get(), out.get());
    emu_test::reduce_sum_atomic(dx.get(), n, out_atomic.get());
    CHECK(out.download()[0] == float(double(exact) / 256.0));
    CHECK(out_atomic.download()[0] == float(double(exact) / 256.0));
  }
  SECTION("random values, within float rounding") {
    const std::size_t n = 1 << 20;
    const auto x = emu_test::random_floats(n, 7);
    double ref = 0, mag = 0;
    for (float v : x) {
      ref += v;
      mag += std::fabs(v);
    }
    DeviceBuffer<float> dx(x), partial(emu_test::kReduceMaxBlocks), out(1);
    emu_test::reduce_sum(dx.get(), n, partial.get(), out.get());
    CHECK(std::fabs(out.download()[0] - ref) <= 40 * 6e-8 * mag);
  }
}

TEST_CASE("emu: row softmax", "[emu][softmax]") {
  for (auto [rows, cols] : {std::pair{64, 1000}, std::pair{3, 37}, std::pair{2, 1}, std::pair{5, 4096}}) {
    CAPTURE(rows, cols);
    auto x = emu_test::random_floats(std::size_t(rows) * cols, 3);
    for (auto& v : x) v *= 8.f;
    DeviceBuffer<float> dx(x), dy(x.size());
    emu_test::softmax_rows(dx.get(), dy.get(), rows, cols);
    const auto y = dy.download();
    double worst = 0;
    for (int r = 0; r < rows; ++r) {
      const float* xr = &x[std::size_t(r) * cols];
      const double mx = *std::max_element(xr, xr + cols);
      double sum = 0;
      for (int c = 0; c < cols; ++c) sum += std::exp(double(xr[c]) - mx);
      for (int c = 0; c < cols; ++c) {
        const double ref = std::exp(double(xr[c]) - mx) / sum;
        worst = std::max(worst, std::fabs(y[std::size_t(r) * cols + c] - ref) / (ref + 1e-6));
      }
    }
    CHECK(worst < 1e-4);
  }
}

TEST_CASE("emu: atomicAdd histogram with heavy collisions", "[emu][atomics]") {
  for (auto [n, bins] : {std::pair{100000, 7}, std::pair{50000, 1000}, std::pair{1000, 1}}) {
    CAPTURE(n, bins);
    std::vector<int> which(n);
    std::vector<float> w(n);
    std::vector<unsigned> want_counts(bins, 0);
    std::vector<double> want_weights(bins, 0);
    for (int i = 0; i < n; ++i) {
      which[i] = int((unsigned(i) * 2654435761u >> 7) % unsigned(bins));
      w[i] = float((i % 13) + 1) * 0.125f;
      ++want_counts[which[i]];
      want_weights[which[i]] += w[i];
    }
    DeviceBuffer<int> dwhich(which);
    DeviceBuffer<float> dw(w), dweights(bins);
    DeviceBuffer<unsigned> dcounts(bins);
    emu_test::histogram(dwhich.get(), dw.get(), n, bins, dcounts.get(), dweights.get());
    CHECK(dcounts.download() == want_counts);
    const auto got = dweights.download();
    for (int b = 0; b < bins; ++b) REQUIRE(std::fabs(got[b] - want_weights[b]) <= 1e-6 * want_weights[b] * 64 + 1e-6);
  }
}

TEST_CASE("emu: thread and block indices in 1-D 2-D and 3-D", "[emu][indexing]") {
  struct Shape {
    unsigned gx, gy, gz, bx, by, bz;
  };
  const Shape shapes[] = {
      {1, 1, 1, 1, 1, 1},  {3, 1, 1, 31, 1, 1}, {2, 1, 1, 33, 1, 1},  {2, 1, 1, 1024, 1, 1}, {3, 2, 1, 8, 4, 1},
      {2, 3, 2, 4, 4, 4},  {2, 2, 2, 33, 1, 1}, {1, 1, 1, 1, 1, 64},  {2, 1, 1, 32, 32, 1},  {1, 2, 1, 5, 3, 7},
  };
  for (const Shape& s : shapes) {
    CAPTURE(s.gx, s.gy, s.gz, s.bx, s.by, s.bz);
    const unsigned threads = s.bx * s.by * s.bz, blocks = s.gx * s.gy * s.gz;
    DeviceBuffer<emu_test::ThreadRecord> records(std::size_t(threads) * blocks);
    DeviceBuffer<int> errors(1);
    emu_test::record_threads(s.gx, s.gy, s.gz, s.bx, s.by, s.bz, records.get(), errors.get());
    CHECK(errors.download()[0] == 0);
    const auto rec = records.download();
    int bad = 0;
    for (unsigned b = 0; b < blocks; ++b) {
      for (unsigned t = 0; t < threads; ++t) {
        const auto& r = rec[std::size_t(b) * threads + t];
        const unsigned warp_base = t / 32 * 32;
        const int lanes = int(std::min(32u, threads - warp_base));
        const bool ok = r.tx == t % s.bx && r.ty == t / s.bx % s.by && r.tz == t / (s.bx * s.by) &&
                        r.bx == b % s.gx && r.by == b / s.gx % s.gy && r.bz == b / (s.gx * s.gy) &&
                        r.warp_lanes == lanes && r.block_count == int(threads);
        if (!ok) ++bad;
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("emu: warp shuffles and votes with widths", "[emu][warp]") {
  constexpr int T = emu_test::kWarpThreads;
  std::vector<int> in(T);
  for (int t = 0; t < T; ++t) in[t] = (t * 37 + 11) % 101;
  in[5] = 7;  // so that __any_sync(v == 7) is true in warp 0 only
  DeviceBuffer<int> din(in);
  DeviceBuffer<long long> dout(std::size_t(T) * emu_test::kWarpCases);
  emu_test::warp_intrinsics(din.get(), dout.get());
  const auto out = dout.download();

  for (int t = 0; t < T; ++t) {
    const int lane = t % 32, base = t - lane;
    auto at = [&](int l) { return (long long)in[base + l]; };
    unsigned ballot = 0;
    bool any7 = false, all40 = true;
    for (int l = 0; l < 32; ++l) {
      ballot |= (in[base + l] % 3 == 0 ? 1u : 0u) << l;
      any7 = any7 || in[base + l] == 7;
      all40 = all40 && in[base + l] < 40;
    }
    const int xor16w16 = (lane ^ 16) >= (lane & ~15) + 16 ? lane : (lane ^ 16);
    const int down2 = lane + 2 < 32 ? lane + 2 : lane;
    const long long want[emu_test::kWarpCases] = {
        at((lane * 7 + 3) % 32),
        at((lane & ~7) + ((lane + 5) & 7)),
        at(0),
        lane >= 3 ? at(lane - 3) : at(lane),
        (lane & 7) >= 2 ? at(lane - 2) : at(lane),
        lane + 5 < 32 ? at(lane + 5) : at(lane),
        (lane & 15) + 1 < 16 ? at(lane + 1) : at(lane),
        at(lane ^ 1),
        at(lane ^ 16),
        at(lane ^ 4),
        at(xor16w16),
        (long long)ballot,
        any7 ? 1 : 0,
        all40 ? 1 : 0,
        lane < 16 ? at(15 - lane) : at(47 - lane),
        at(down2),
        (at(31 - lane) << 40) + at(31 - lane),
        lane >= 1 ? at(lane - 1) * 3 : at(lane) * 3,
    };
    for (int c = 0; c < emu_test::kWarpCases; ++c) {
      INFO("thread " << t << " case " << c);
      REQUIRE(out[std::size_t(c) * T + t] == want[c]);
    }
  }
}

TEST_CASE("emu: votes and __activemask on partial warps", "[emu][warp]") {
  for (int threads : {1, 5, 31, 32, 33, 48, 64}) {
    CAPTURE(threads);
    DeviceBuffer<unsigned> out(std::size_t(threads) * 4);
    emu_test::warp_votes(threads, out.get());
    const auto v = out.download();
    for (int t = 0; t < threads; ++t) {
      const int base = t / 32 * 32, lanes = std::min(32, threads - base);
      const unsigned exists = lanes == 32 ? ~0u : (1u << lanes) - 1u;
      CHECK(v[t * 4 + 0] == (exists & 0xaaaaaaaau));
      CHECK(v[t * 4 + 1] == (lanes > 5 ? 1u : 0u));
      CHECK(v[t * 4 + 2] == (base + lanes <= 40 ? 1u : 0u));
      // __activemask is approximate in the emulator (lanes that have not returned), exact on a GPU
      // here (convergent code): check only what holds in both.
      CHECK((v[t * 4 + 3] >> (t % 32) & 1u) == 1u);
      CHECK((v[t * 4 + 3] & ~exists) == 0u);
    }
  }
}

TEST_CASE("emu: every atomic operation", "[emu][atomics]") {
  constexpr int n = 1003;  // 8 blocks of 128, the last one partial
  emu_test::AtomicResults init{};
  init.max_i = INT_MIN;
  init.min_i = INT_MAX;
  init.min_u = UINT_MAX;
  init.and_u = 0xffffffffu;
  init.exch_i = -1;
  DeviceBuffer<emu_test::AtomicResults> dr(std::vector<emu_test::AtomicResults>{init});
  DeviceBuffer<int> dold(n);
  emu_test::atomics(n, dr.get(), dold.get());
  const auto r = dr.download()[0];
  CHECK(r.add_i == 2 * n);
  CHECK(r.add_u == unsigned(n));
  CHECK(r.add_ull == (unsigned long long)n << 33);
  CHECK(r.add_f == 0.5f * n);
  CHECK(r.add_d == 0.25 * n);
  CHECK(r.sub_i == -3 * n);
  CHECK(r.max_i == n - 1 - 100);
  CHECK(r.min_i == 50 - (n - 1));
  CHECK(r.max_u == unsigned(n - 1) * 7u);
  CHECK(r.min_u == 5u);
  CHECK(r.and_u == 0u);
  CHECK(r.or_u == 0xffffffffu);
  CHECK(r.xor_u == 0x7cu);  // bit b toggled by #{t < n : t % 7 == b} threads: odd for b = 2..6
  CHECK(r.inc_u == unsigned(n % 10));
  CHECK(r.dec_u == unsigned((10 - n % 10) % 10));
  CHECK(r.cas_wins == 1);
  CHECK((r.cas_i >= 1 && r.cas_i <= n));
  // The exchanged values form a chain: the old values plus the final one are {-1, 0, ..., n-1}.
  auto olds = dold.download();
  olds.push_back(r.exch_i);
  std::sort(olds.begin(), olds.end());
  for (int i = 0; i <= n; ++i) REQUIRE(olds[i] == i - 1);
}

TEST_CASE("emu: math intrinsics", "[emu][math]") {
  std::vector<float> x = emu_test::random_floats(200, 11);
  for (auto& v : x) v *= 2.f;
  x.insert(x.end(), {0.f, -0.f, 1.f, -1.f, 0.5f, 1e-3f, -1.5f, 2.f});
  const int n = int(x.size());
  DeviceBuffer<float> dx(x), dout(std::size_t(n) * emu_test::kMathCases);
  emu_test::math_intrinsics(dx.get(), n, dout.get());
  const auto out = dout.download();
  for (int i = 0; i < n; ++i) {
    const double v = x[i];
    const double want[emu_test::kMathCases] = {
        std::exp(v),
        std::log(std::fabs(v) + 1),
        v / 3,
        1 / std::sqrt(std::fabs(v) + 0.5),
        v * 2 + 1,
        v,
        std::min(v, 0.25),
        std::max(v, 0.25),
        std::clamp(v, 0.0, 1.0),
        std::tanh(v),
        std::pow(std::fabs(v) + 1, 1.5),
        std::sin(v) + std::cos(v),
        std::min(v, 0.5) + std::max(-1, int(float(v) * 4.f)),
        std::sqrt(std::fabs(v)),
        std::exp(-v * v),
        std::signbit(x[i]) ? 1.0 : 0.0,
    };
    for (int c = 0; c < emu_test::kMathCases; ++c) {
      INFO("x = " << v << " case " << c);
      REQUIRE(std::fabs(out[std::size_t(i) * emu_test::kMathCases + c] - want[c]) <= 1e-5 * std::fabs(want[c]) + 2e-6);
    }
  }
}

TEST_CASE("emu: bit intrinsics", "[emu][math]") {
  const std::vector<unsigned> v = {0u,   1u,    0x80000000u, 0xffffffffu, 12345u,
                                   0x00f0f000u, 999u, 1000u, 1001u, 0xdeadbeefu};
  const int n = int(v.size());
  DeviceBuffer<unsigned> dv(v);
  DeviceBuffer<long long> dout(std::size_t(n) * emu_test::kBitCases);
  emu_test::bit_intrinsics(dv.get(), n, dout.get());
  const auto out = dout.download();
  auto brev32 = [](unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
  };
  for (int i = 0; i < n; ++i) {
    const unsigned x = v[i];
    const long long want[emu_test::kBitCases] = {
        std::popcount(x),
        std::countl_zero(x),
        x ? std::countr_zero(x) + 1 : 0,
        brev32(x),
        2 * std::popcount(x),
        std::countl_zero(std::uint64_t(x)),
        (long long)((std::uint64_t(x) * 0x9e3779b9ull) >> 32),
        brev32(x),
        x ? std::countr_zero(x) + 21 : 0,
        x > 1000u ? x - 1000u : 1000u - x,
    };
    for (int c = 0; c < emu_test::kBitCases; ++c) {
      INFO("x = " << x << " case " << c);
      REQUIRE(out[std::size_t(i) * emu_test::kBitCases + c] == want[c]);
    }
  }
}

TEST_CASE("emu: vector types and dynamic shared memory", "[emu][smem]") {
  STATIC_REQUIRE(sizeof(float4) == 16);
  STATIC_REQUIRE(alignof(float4) == 16);
  STATIC_REQUIRE(alignof(float2) == 8);
  STATIC_REQUIRE(alignof(int4) == 16);
  STATIC_REQUIRE(alignof(double2) == 16);
  STATIC_REQUIRE(sizeof(uint3) == 12);
  const int n4 = 1000;
  const auto x = emu_test::random_floats(std::size_t(n4) * 4, 5);
  DeviceBuffer<float> din(x), dout(x.size());
  emu_test::scale_float4(din.get(), dout.get(), n4, 2.5f);
  const auto y = dout.download();
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(y[i] == x[i] * 2.5f);

  const int n = 1000;  // 7 full blocks of 128 and a partial one of 104
  std::vector<double> d(n);
  for (int i = 0; i < n; ++i) d[i] = i * 1.5;
  DeviceBuffer<double> dd(d), drev(n);
  emu_test::reverse_in_blocks(dd.get(), drev.get(), n);
  const auto rev = drev.download();
  for (int i = 0; i < n; ++i) {
    const int base = i / 128 * 128, count = std::min(128, n - base);
    REQUIRE(rev[i] == d[base + count - 1 - (i - base)]);
  }
}
