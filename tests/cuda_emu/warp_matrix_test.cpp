// The warp-level matrix instructions (kernels/cuda/mma.cuh over cuda_emu/emu_mma.hpp): mma.sync's
// D fragments lane by lane against a CPU product, ldmatrix's registers lane by lane for every
// form, the two composed into a tile product from shared memory (bit-identical under every
// schedule), and the mistakes the emulator refuses: missing or diverged lanes, bad addresses, an
// architecture without the instruction, shared memory past the architecture's limit.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/float16.h"
#include "emu_test_support.hpp"
#include "kernels/warp_matrix.cuh"

using Catch::Matchers::Contains;
using cuda_emu::Schedule;
using emu_test::ConfigGuard;
using emu_test::DeviceBuffer;
using emu_test::launch_error;
using emu_test::MatrixBug;
using emu_test::MmaKind;

namespace {

std::uint16_t to_bits(float v, bool bf16) { return bf16 ? define::BFloat16(v).bits : define::Half(v).bits; }
float from_bits(std::uint16_t b, bool bf16) {
  return bf16 ? static_cast<float>(define::BFloat16::from_bits(b)) : static_cast<float>(define::Half::from_bits(b));
}

// Two problems (one per warp) of one kind: A (16 x K), B (K x 8) as 16-bit patterns, C (16 x 8).
struct MmaProblem {
  MmaKind kind;
  int k;
  bool bf16;
  std::vector<std::uint16_t> a, b;
  std::vector<float> c;
};

// exact: small multiples of 1/4 and 1/8, whose products and sums float holds exactly (so every
// summation order gives the float64 result); otherwise values in [-1, 1) rounded to the format.
MmaProblem make_problem(MmaKind kind, bool exact, std::uint32_t seed) {
  MmaProblem p{kind, emu_test::mma_k(kind), emu_test::mma_bf16(kind), {}, {}, {}};
  const auto ra = emu_test::random_floats(std::size_t(2) * 16 * p.k, seed);
  const auto rb = emu_test::random_floats(std::size_t(2) * p.k * 8, seed + 1);
  const auto rc = emu_test::random_floats(std::size_t(2) * 16 * 8, seed + 2);
  for (float v : ra) p.a.push_back(to_bits(exact ? std::round(v * 12) / 4 : v, p.bf16));
  for (float v : rb) p.b.push_back(to_bits(exact ? std::round(v * 12) / 8 : v, p.bf16));
  for (float v : rc) p.c.push_back(exact ? std::round(v * 64) : v);
  return p;
}

// Runs the problem on the emulated device: lane_d[(warp * 32 + lane) * 4 + i].
std::vector<float> run_mma(const MmaProblem& p) {
  DeviceBuffer<std::uint16_t> da(p.a), db(p.b);
  DeviceBuffer<float> dc(p.c), dd(64 * 4);
  emu_test::mma_fragments(p.kind, da.get(), db.get(), dc.get(), dd.get());
  return dd.download();
}

// D's element of lane `lane`, register i (PTX ISA: row groupID + 8 * (i >> 1), column
// 2 * threadID_in_group + (i & 1)).
int d_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
int d_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

// C + A * B of warp w's problem at (row, col): in float64, and in float32 in the emulator's
// documented order (C first, then k ascending, one fmaf each).
double reference64(const MmaProblem& p, int w, int row, int col) {
  double acc = p.c[std::size_t(w) * 128 + row * 8 + col];
  for (int k = 0; k < p.k; ++k) {
    acc += double(from_bits(p.a[std::size_t(w) * 16 * p.k + row * p.k + k], p.bf16)) *
           double(from_bits(p.b[std::size_t(w) * p.k * 8 + k * 8 + col], p.bf16));
  }
  return acc;
}
float reference32(const MmaProblem& p, int w, int row, int col) {
  float acc = p.c[std::size_t(w) * 128 + row * 8 + col];
  for (int k = 0; k < p.k; ++k) {
    acc = std::fma(from_bits(p.a[std::size_t(w) * 16 * p.k + row * p.k + k], p.bf16),
                   from_bits(p.b[std::size_t(w) * p.k * 8 + k * 8 + col], p.bf16), acc);
  }
  return acc;
}
double magnitude(const MmaProblem& p, int w, int row, int col) {
  double sum = std::fabs(p.c[std::size_t(w) * 128 + row * 8 + col]);
  for (int k = 0; k < p.k; ++k) {
    sum += std::fabs(double(from_bits(p.a[std::size_t(w) * 16 * p.k + row * p.k + k], p.bf16)) *
                     double(from_bits(p.b[std::size_t(w) * p.k * 8 + k * 8 + col], p.bf16)));
  }
  return sum;
}

const char* kind_name(MmaKind kind) {
  switch (kind) {
    case MmaKind::m16n8k8_f16:
      return "m16n8k8.f16";
    case MmaKind::m16n8k8_bf16:
      return "m16n8k8.bf16";
    case MmaKind::m16n8k16_f16:
      return "m16n8k16.f16";
    case MmaKind::m16n8k16_bf16:
      return "m16n8k16.bf16";
  }
  return "?";
}

constexpr MmaKind kAllKinds[] = {MmaKind::m16n8k8_f16, MmaKind::m16n8k8_bf16, MmaKind::m16n8k16_f16,
                                 MmaKind::m16n8k16_bf16};

// The four 8x8 matrices of the ldmatrix tests: matrix i, row r, column j holds a pattern naming
// all three.
std::vector<std::uint16_t> ldmatrix_input() {
  std::vector<std::uint16_t> m(4 * 64);
  for (int i = 0; i < 4; ++i)
    for (int r = 0; r < 8; ++r)
      for (int j = 0; j < 8; ++j) m[(i * 8 + r) * 8 + j] = static_cast<std::uint16_t>(0x3000 + i * 256 + r * 16 + j);
  return m;
}

// Register i of lane l (PTX ISA, ldmatrix): elements (l / 4, 2 * (l % 4)) and the next column of
// matrix i, low half first; with .trans, elements (2 * (l % 4), l / 4) and the next row.
std::uint32_t ldmatrix_expected(const std::vector<std::uint16_t>& m, int lane, int i, bool trans) {
  const int group = lane / 4, in_group = lane % 4;
  auto at = [&](int r, int j) { return std::uint32_t(m[(i * 8 + r) * 8 + j]); };
  if (trans) return at(2 * in_group, group) | at(2 * in_group + 1, group) << 16;
  return at(group, 2 * in_group) | at(group, 2 * in_group + 1) << 16;
}

std::string bug_error(MatrixBug bug, int arch) {
  ConfigGuard g(Schedule::forward);
  cuda_emu::config().arch = arch;
  DeviceBuffer<std::uint16_t> rows(64);
  DeviceBuffer<std::uint32_t> out(48 * 4);
  return launch_error([&] { emu_test::matrix_bug(bug, rows.get(), out.get()); });
}

}  // namespace

TEST_CASE("emu mma: every lane's D fragment is the matrix product at the ISA's place", "[emu][mma]") {
  ConfigGuard g;
  cuda_emu::config().arch = 80;
  for (MmaKind kind : kAllKinds) {
    CAPTURE(kind_name(kind));
    const MmaProblem p = make_problem(kind, true, 7);
    const auto d = run_mma(p);
    int wrong = 0;
    for (int w = 0; w < 2; ++w)
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          const double want = reference64(p, w, d_row(lane, i), d_col(lane, i));
          if (double(d[(w * 32 + lane) * 4 + i]) != want) {
            if (++wrong <= 5)
              UNSCOPED_INFO("warp " << w << " lane " << lane << " d[" << i << "] = " << d[(w * 32 + lane) * 4 + i]
                                    << ", want " << want);
          }
        }
    CHECK(wrong == 0);
  }
}

TEST_CASE("emu mma: float32 accumulation, C first then k ascending", "[emu][mma]") {
  ConfigGuard g;
  cuda_emu::config().arch = 80;
  for (MmaKind kind : kAllKinds) {
    CAPTURE(kind_name(kind));
    const MmaProblem p = make_problem(kind, false, 11);
    const auto d = run_mma(p);
    int not_ordered = 0, far = 0;
    for (int w = 0; w < 2; ++w)
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          const int row = d_row(lane, i), col = d_col(lane, i);
          const float got = d[(w * 32 + lane) * 4 + i];
          if (got != reference32(p, w, row, col)) ++not_ordered;
          // K + 1 roundings of float32 at most, each below 2^-24 of the running magnitude.
          if (std::fabs(double(got) - reference64(p, w, row, col)) > (p.k + 1) * 0x1p-24 * magnitude(p, w, row, col))
            ++far;
        }
    CHECK(not_ordered == 0);
    CHECK(far == 0);
  }
}

TEST_CASE("emu mma: NaN and infinity propagate", "[emu][mma]") {
  ConfigGuard g;
  cuda_emu::config().arch = 75;
  MmaProblem p = make_problem(MmaKind::m16n8k8_f16, true, 3);
  p.a[0] = 0x7C00;                       // A[0][0] = +inf in warp 0
  p.c[128 + 3 * 8 + 5] = std::nanf("");  // warp 1, C[3][5]
  const auto d = run_mma(p);
  // Row 0 of warp 0: +inf * B[0][j] is +inf, -inf or NaN (B[0][j] == 0) plus finite terms.
  for (int lane = 0; lane < 4; ++lane)
    for (int i = 0; i < 2; ++i) {
      const float b0 = from_bits(p.b[d_col(lane, i)], false);
      const float got = d[lane * 4 + i];
      if (b0 == 0) {
        CHECK(std::isnan(got));
      } else {
        CHECK(got == (b0 > 0 ? INFINITY : -INFINITY));
      }
    }
  // Warp 1's C[3][5] is held by lane 3 * 4 + 5 / 2 = 14, register 1.
  CHECK(std::isnan(d[(32 + 14) * 4 + 1]));
  CHECK_FALSE(std::isnan(d[(32 + 14) * 4 + 0]));
}

TEST_CASE("emu ldmatrix: x1 x2 x4 and .trans, every lane's registers", "[emu][mma][ldmatrix]") {
  const auto m = ldmatrix_input();
  DeviceBuffer<std::uint16_t> din(m);
  for (int arch : {75, 90}) {
    ConfigGuard g;
    cuda_emu::config().arch = arch;
    for (int num : {1, 2, 4})
      for (bool trans : {false, true}) {
        CAPTURE(arch, num, trans);
        DeviceBuffer<std::uint32_t> dout(32 * 4);
        emu_test::ldmatrix_fragments(num, trans, false, din.get(), dout.get());
        const auto out = dout.download();
        int wrong = 0;
        for (int lane = 0; lane < 32; ++lane)
          for (int i = 0; i < 4; ++i) {
            const std::uint32_t want = i < num ? ldmatrix_expected(m, lane, i, trans) : 0u;
            if (out[lane * 4 + i] != want && ++wrong <= 5)
              UNSCOPED_INFO("lane " << lane << " r[" << i << "] = " << std::hex << out[lane * 4 + i] << ", want "
                                    << want);
          }
        CHECK(wrong == 0);
      }
  }
}

TEST_CASE("emu ldmatrix: unused lanes' addresses must be valid on sm_75 only", "[emu][mma][ldmatrix]") {
  const auto m = ldmatrix_input();
  DeviceBuffer<std::uint16_t> din(m);
  DeviceBuffer<std::uint32_t> dout(32 * 4);
  {
    ConfigGuard g;
    cuda_emu::config().arch = 80;
    for (int num : {1, 2}) {
      emu_test::ldmatrix_fragments(num, false, true, din.get(), dout.get());
      const auto out = dout.download();
      for (int lane = 0; lane < 32; ++lane) CHECK(out[lane * 4] == ldmatrix_expected(m, lane, 0, false));
    }
  }
  ConfigGuard g(Schedule::forward);  // lane 16 is the first to give nullptr
  cuda_emu::config().arch = 75;
  const std::string e = launch_error([&] { emu_test::ldmatrix_fragments(2, true, true, din.get(), dout.get()); });
  CHECK_THAT(e, Contains("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"));
  CHECK_THAT(e, Contains("lane 16"));
  CHECK_THAT(e, Contains("null row address"));
  CHECK_THAT(e, Contains("on sm_75 and older every lane's address must be valid"));
  CHECK_THAT(bug_error(MatrixBug::unused_lanes_null, 75), Contains("lane 8"));
  CHECK(bug_error(MatrixBug::unused_lanes_null, 80) == "(no error)");
}

TEST_CASE("emu mma: ldmatrix + mma tile product from shared memory, the same under every schedule",
          "[emu][mma][ldmatrix]") {
  for (bool bf16 : {false, true})
    for (bool k8 : {true, false})
      for (bool b_transposed : {false, true}) {
        CAPTURE(bf16, k8, b_transposed);
        const auto ra = emu_test::random_floats(32 * 16, 31), rb = emu_test::random_floats(16 * 16, 32);
        std::vector<std::uint16_t> a, b(16 * 16);
        for (float v : ra) a.push_back(to_bits(std::round(v * 12) / 4, bf16));
        for (int k = 0; k < 16; ++k)
          for (int n = 0; n < 16; ++n) {
            const std::uint16_t bits = to_bits(std::round(rb[k * 16 + n] * 12) / 8, bf16);
            b[b_transposed ? n * 16 + k : k * 16 + n] = bits;
          }
        std::vector<double> want(32 * 16, 0.0);
        for (int i = 0; i < 32; ++i)
          for (int n = 0; n < 16; ++n)
            for (int k = 0; k < 16; ++k)
              want[i * 16 + n] += double(from_bits(a[i * 16 + k], bf16)) *
                                  double(from_bits(b[b_transposed ? n * 16 + k : k * 16 + n], bf16));
        DeviceBuffer<std::uint16_t> da(a), db(b);
        std::vector<float> first;
        const std::pair<Schedule, std::uint64_t> schedules[] = {
            {Schedule::forward, 0}, {Schedule::reverse, 0}, {Schedule::random, 5}, {Schedule::race, 5}};
        for (auto [schedule, seed] : schedules) {
          CAPTURE(int(schedule));
          ConfigGuard g(schedule, seed);
          cuda_emu::config().arch = k8 && !bf16 ? 75 : 80;  // the sm_75 path needs only sm_75
          cuda_emu::config().debug = true;                  // shared memory starts as NaN
          DeviceBuffer<float> dd(32 * 16);
          emu_test::mma_tile(k8, bf16, b_transposed, da.get(), db.get(), dd.get());
          const auto d = dd.download();
          int wrong = 0;
          for (int i = 0; i < 32 * 16; ++i) wrong += double(d[i]) != want[i];
          CHECK(wrong == 0);
          if (first.empty()) {
            first = d;
          } else {
            CHECK(d == first);
          }
        }
      }
}

TEST_CASE("emu ldmatrix: a lane reads its row when it arrives, so a missing __syncwarp shows",
          "[emu][mma][ldmatrix][debug]") {
  ConfigGuard g(Schedule::forward);
  cuda_emu::config().arch = 75;
  auto run = [](bool syncwarp) {
    DeviceBuffer<std::uint32_t> dout(32 * 4);
    emu_test::ldmatrix_after_writes(syncwarp, dout.get());
    return dout.download();
  };
  std::vector<std::uint16_t> m(4 * 64);
  for (int row = 0; row < 32; ++row)
    for (int j = 0; j < 8; ++j) m[row * 8 + j] = static_cast<std::uint16_t>((row * 8 + j) | 0x4000);
  std::vector<std::uint32_t> want(32 * 4);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) want[lane * 4 + i] = ldmatrix_expected(m, lane, i, false);
  CHECK(run(true) == want);
  // Forward order: lane 0 reads row 0 before lane 31 has written it (lanes 0-3 receive it).
  const auto stale = run(false);
  CHECK(stale != want);
  for (int lane = 0; lane < 4; ++lane) CHECK(stale[lane * 4] == 0u);
  for (int lane = 4; lane < 32; ++lane) CHECK(stale[lane * 4] == want[lane * 4]);
}

TEST_CASE("emu mma: lanes that are missing or diverge fail the launch", "[emu][mma][debug]") {
  std::string e = bug_error(MatrixBug::lane_returns, 80);
  CHECK_THAT(e, Contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
  CHECK_THAT(e, Contains("lane 31"));
  CHECK_THAT(e, Contains("returned"));
  {
    ConfigGuard g(Schedule::reverse);  // lane 31 returns first: the others find it gone
    cuda_emu::config().arch = 80;
    DeviceBuffer<std::uint16_t> rows(64);
    DeviceBuffer<std::uint32_t> out(48 * 4);
    e = launch_error([&] { emu_test::matrix_bug(MatrixBug::lane_returns, rows.get(), out.get()); });
    CHECK_THAT(e, Contains("lane 31 of warp 0 has returned"));
  }
  e = bug_error(MatrixBug::divergent_call_sites, 80);
  CHECK_THAT(e, Contains("divergent mma.sync.aligned.m16n8k16"));
  CHECK_THAT(e, Contains("warp_matrix.cu:"));
  e = bug_error(MatrixBug::different_instructions, 80);
  CHECK_THAT(e, Contains("calls ldmatrix.sync.aligned.m8n8.x4.shared.b16 while other lanes of mask 0xffffffff wait in "
                         "ldmatrix.sync.aligned.m8n8.x2.shared.b16"));
  e = bug_error(MatrixBug::lane_at_barrier, 80);
  CHECK_THAT(e, Contains("deadlock"));
  CHECK_THAT(e, Contains("in mma.sync.aligned.m16n8k16"));
  CHECK_THAT(e, Contains("at __syncthreads()"));
  e = bug_error(MatrixBug::partial_warp, 80);
  CHECK_THAT(e, Contains("warp 1 has only 16 threads"));
}

TEST_CASE("emu ldmatrix: addresses outside shared memory or misaligned fail the launch",
          "[emu][mma][ldmatrix][debug]") {
  std::string e = bug_error(MatrixBug::global_address, 80);
  CHECK_THAT(e, Contains("ldmatrix.sync.aligned.m8n8.x1.shared.b16"));
  CHECK_THAT(e, Contains("not shared memory"));
  e = bug_error(MatrixBug::misaligned_address, 80);
  CHECK_THAT(e, Contains("lane 9"));
  CHECK_THAT(e, Contains("not 16-byte aligned"));
  e = bug_error(MatrixBug::past_static_array, 80);
  CHECK_THAT(e, Contains("lane 3"));
  CHECK_THAT(e, Contains("bytes 128 to 144 of static shared array small"));
  // nvcc aligns a shared array to its element type only: 16-bit words to 2 bytes. The emulator
  // places it at exactly that (2 mod 16), so a tile that ldmatrix reads must ask for 16.
  e = bug_error(MatrixBug::word_array_unaligned, 80);
  CHECK_THAT(e, Contains("lane 0"));
  CHECK_THAT(e, Contains("not 16-byte aligned"));
  CHECK(bug_error(MatrixBug::word_array_aligned, 80) == "(no error)");
}

TEST_CASE("emu mma: an architecture without the instruction fails the launch", "[emu][mma][arch]") {
  const MmaProblem k8 = make_problem(MmaKind::m16n8k8_f16, true, 1);
  const MmaProblem k8bf = make_problem(MmaKind::m16n8k8_bf16, true, 1);
  const MmaProblem k16 = make_problem(MmaKind::m16n8k16_f16, true, 1);
  const MmaProblem k16bf = make_problem(MmaKind::m16n8k16_bf16, true, 1);
  auto error_at = [](const MmaProblem& p, int arch) {
    ConfigGuard g;
    cuda_emu::config().arch = arch;
    return launch_error([&] { run_mma(p); });
  };
  std::string e = error_at(k16, 75);
  CHECK_THAT(e, Contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (warp_matrix.cu:"));
  CHECK_THAT(e, Contains("needs sm_80 or newer; the emulated device is sm_75"));
  CHECK_THAT(error_at(k16bf, 75), Contains("needs sm_80"));
  CHECK_THAT(error_at(k8bf, 75), Contains("m16n8k8.row.col.f32.bf16.bf16.f32"));
  CHECK_THAT(error_at(k8bf, 75), Contains("needs sm_80"));
  CHECK_THAT(error_at(k8, 70), Contains("needs sm_75 or newer; the emulated device is sm_70"));
  CHECK(error_at(k8, 75) == "(no error)");
  CHECK(error_at(k16, 86) == "(no error)");
  // ldmatrix on the default architecture, sm_61.
  ConfigGuard g;
  cuda_emu::config().arch = 61;
  const auto m = ldmatrix_input();
  DeviceBuffer<std::uint16_t> din(m);
  DeviceBuffer<std::uint32_t> dout(32 * 4);
  CHECK_THAT(launch_error([&] { emu_test::ldmatrix_fragments(4, false, false, din.get(), dout.get()); }),
             Contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16 (warp_matrix.cu:"));
  CHECK_THAT(launch_error([&] { emu_test::ldmatrix_fragments(4, false, false, din.get(), dout.get()); }),
             Contains("needs sm_75 or newer; the emulated device is sm_61"));
}

TEST_CASE("emu mma: the tile kernel's shared memory counts against the architecture's limit", "[emu][mma][smem]") {
  std::vector<std::uint16_t> a(32 * 16, 0), b(16 * 16, 0);
  DeviceBuffer<std::uint16_t> da(a), db(b);
  DeviceBuffer<float> dd(32 * 16);
  ConfigGuard g;
  cuda_emu::config().arch = 75;
  // Two static tiles: 32 x 24 and 16 x 24 16-bit elements, 2,304 bytes; sm_75 allows 48 KiB a block.
  const unsigned fits = 48 * 1024 - 2304;
  CHECK(launch_error([&] { emu_test::mma_tile(true, false, false, da.get(), db.get(), dd.get(), fits); }) ==
        "(no error)");
  const std::string e =
      launch_error([&] { emu_test::mma_tile(true, false, false, da.get(), db.get(), dd.get(), fits + 16); });
  CHECK_THAT(e, Contains("a block may use on sm_75"));
}

// The sanitizer builds compile the kernels without the access instrumentation the profile records.
#if !defined(__SANITIZE_ADDRESS__)
TEST_CASE("emu ldmatrix: the profile sees each used row as its lane's 16-byte shared read", "[emu][mma][profile]") {
  ConfigGuard g;
  cuda_emu::config().arch = 80;
  const auto m = ldmatrix_input();
  DeviceBuffer<std::uint16_t> din(m);
  DeviceBuffer<std::uint32_t> dout(32 * 4);
  for (int num : {1, 2, 4}) {
    CAPTURE(num);
    cuda_emu::profile_start();
    emu_test::ldmatrix_fragments(num, false, false, din.get(), dout.get());
    const std::vector<cuda_emu::KernelProfile> p = cuda_emu::profile_stop();
    REQUIRE(p.size() == 1);
    CHECK(p[0].shared_load.requests == 1);
    CHECK(p[0].shared_load.lanes == 8 * num);
    CHECK(p[0].shared_load.bytes == 128 * num);
  }
}

TEST_CASE("emu mma: the profile counts 2 M N K FLOPs per mma.sync for the tensor-core limit", "[emu][mma][profile]") {
  ConfigGuard g;
  cuda_emu::config().arch = 80;
  DeviceBuffer<std::uint16_t> da(std::vector<std::uint16_t>(32 * 16, 0)), db(std::vector<std::uint16_t>(16 * 16, 0));
  DeviceBuffer<float> dd(32 * 16);
  for (bool k8 : {true, false}) {
    CAPTURE(k8);
    cuda_emu::profile_start();
    emu_test::mma_tile(k8, false, false, da.get(), db.get(), dd.get());
    const std::vector<cuda_emu::KernelProfile> p = cuda_emu::profile_stop();
    REQUIRE(p.size() == 1);
    CHECK(p[0].tensor_flops == 2.0 * 32 * 16 * 16);  // the tile product, whatever the instruction's K
  }
  // Outside a profile nothing is counted and nothing fails.
  emu_test::mma_tile(true, false, false, da.get(), db.get(), dd.get());
}
#endif
