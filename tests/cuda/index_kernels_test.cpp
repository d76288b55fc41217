// The CUDA index kernels (kernels/cuda/index.cu) on the emulated device, against the reference
// (kernels/ref/index.cpp), for odd shapes the op harness (tests/ops/index_test.cpp, mode emu)
// does not reach: every dim of 2-d and 3-d tensors, indices smaller than x, strided operands,
// integer values, and index_add/scatter_add with many collisions and several radix passes.
// gather/index_select copy values, so they must equal the reference exactly. The adding ops
// use no atomics: their results must be bit-identical under the emulator's forward, reverse and
// random schedules, and equal to the CPU path bit for bit where that path sums in the same order
// (index_add always; scatter_add when index and src have the same shape and index matches out
// outside dim).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/factory.h"
#include "cuda_emu/emu_profile.hpp"
#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/devices.h"
#include "kernels/embedding.h"
#include "kernels/index.h"
#include "support/emulated_device.h"

using namespace define;
using namespace define::test;

namespace {


// The same values in a transposed (non-contiguous) layout on `device`: t's last two dims swapped
// in memory.
Tensor transposed_layout(const Tensor& t, Device device) {
  const Shape& s = t.shape();
  Shape swapped = s;
  std::swap(swapped[s.size() - 1], swapped[s.size() - 2]);
  Tensor base = empty(swapped, {t.dtype(), device});
  Strides st = base.strides();
  std::swap(st[s.size() - 1], st[s.size() - 2]);
  Tensor view = base.as_strided(s, st, 0);
  kernels::copy_into(view, copy_to_device(t, device));
  return view;
}


// An op's operands; on_emu copies them to the emulated device, x and src in a transposed
// layout when `strided` (tensors of 2 or more dims).
struct Inputs {
  Tensor x, index, src;
};

Inputs on_emu(const Inputs& in, bool strided) {
  const auto place = [&](const Tensor& t) {
    if (!t.defined()) return t;
    return strided && t.dim() >= 2 ? transposed_layout(t, kernel_test_device()) : to_test_device(t);
  };
  return {place(in.x), to_test_device(in.index), place(in.src)};
}

}  // namespace

TEST_CASE("cuda index: gather and index_select equal the reference exactly", "[cuda][index][family:index]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(3);
  const Tensor x2 = rand_uniform({33, 257}, -1, 1, {}, gen);
  const Tensor x3 = rand_uniform({5, 33, 7}, -1, 1, {.dtype = DType::Float64}, gen);
  const Tensor xi = rand_int({31, 33}, 1000, {.dtype = DType::Int64}, gen);  // int64 values
  struct GatherCase {
    std::string name;
    Tensor x;
    std::int64_t dim;
    Shape index_shape;
  };
  const std::vector<GatherCase> gathers = {
      {"2-d dim 0", x2, 0, {40, 257}},        {"2-d dim 1 smaller", x2, 1, {31, 300}},
      {"3-d dim 0 smaller", x3, 0, {9, 31, 1}}, {"3-d dim 1", x3, 1, {5, 65, 7}},
      {"3-d dim 2 smaller", x3, -1, {4, 33, 3}}, {"int64 values", xi, 1, {31, 33}},
  };
  for (const auto& c : gathers) {
    const std::int64_t d = c.dim < 0 ? c.dim + c.x.dim() : c.dim;
    for (DType id_dtype : {DType::Int64, DType::Int32}) {
      const Tensor index = rand_int(c.index_shape, c.x.shape()[d], {.dtype = id_dtype}, gen);
      const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::gather(c.x, c.dim, index); });
      for (bool strided : {false, true}) {
        const Inputs e = on_emu({c.x, index, Tensor()}, strided);
        // The index in a transposed layout too, when strided.
        const Tensor ei = strided ? transposed_layout(index, kernel_test_device()) : e.index;
        check_identical(kernels::gather(e.x, c.dim, ei), ref,
                        "gather " + c.name + (strided ? " strided" : "") + " " + std::string(dtype_name(id_dtype)));
      }
    }
  }
  struct SelectCase {
    Tensor x;
    std::int64_t dim;
  };
  for (const SelectCase& c : std::vector<SelectCase>{{x2, 0}, {x2, -1}, {x3, 0}, {x3, 1}, {x3, 2}, {xi, 1}}) {
    const std::int64_t d = c.dim < 0 ? c.dim + c.x.dim() : c.dim;
    const Tensor index = rand_int({67}, c.x.shape()[d], {.dtype = DType::Int32}, gen);
    const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::index_select(c.x, c.dim, index); });
    for (bool strided : {false, true}) {
      const Inputs e = on_emu({c.x, index, Tensor()}, strided);
      // When strided, the index too: a stride-3 view.
      Tensor strided_index = empty({3 * 67}, {DType::Int32, kernel_test_device()}).as_strided({67}, {3}, 1);
      kernels::copy_into(strided_index, e.index);
      check_identical(kernels::index_select(e.x, c.dim, strided ? strided_index : e.index), ref,
                      "index_select " + shape_str(c.x.shape()) + " dim " + std::to_string(c.dim) +
                          (strided ? " strided" : ""));
    }
  }
}

TEST_CASE("cuda index: index_select and the embedding lookup by whole rows in 16-byte pieces",
          "[cuda][index][family:index]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(11);
  // Rows whose bytes are a multiple of 16 from aligned tensors take gather_rows_kernel
  // (kernels/cuda/gather_rows.cuh); the same rows one element off alignment take the element-wise
  // gather. Both copy values: equal to the reference exactly.
  const auto kernels_of = [](const std::function<void()>& f) {
    std::vector<std::string> names;
#if !defined(__SANITIZE_ADDRESS__)
    ::cuda_emu::profile_start();
    f();
    for (const auto& launch : ::cuda_emu::profile_stop())
      names.push_back(launch.kernel.substr(0, launch.kernel.find('<')));
#else
    f();
#endif
    return names;
  };
  struct Table {
    DType dtype;
    std::int64_t width;  // 16 bytes a row or a multiple
  };
  for (const auto& [dtype, width] : {Table{DType::Float32, 64}, Table{DType::Float64, 6}, Table{DType::Float16, 24},
                                     Table{DType::Int64, 2}, Table{DType::Float32, 4}}) {
    const std::string what = std::string(dtype_name(dtype)) + " width " + std::to_string(width);
    const Tensor x = dtype == DType::Int64 ? rand_int({50, width}, 1000, {.dtype = dtype}, gen)
                                           : kernels::cast(rand_uniform({50, width}, -1, 1, {}, gen), dtype);
    for (DType id_dtype : {DType::Int32, DType::Int64}) {
      const Tensor index = rand_int({301}, 50, {.dtype = id_dtype}, gen);  // repeats, more rows than x
      const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::index_select(x, 0, index); });
      const Tensor ex = to_test_device(x), ei = to_test_device(index);
      Tensor got;
      const std::vector<std::string> ran = kernels_of([&] { got = kernels::index_select(ex, 0, ei); });
      check_identical(got, ref, "index_select by rows " + what);
#if !defined(__SANITIZE_ADDRESS__)
      CHECK(ran == std::vector<std::string>{"gather_rows_kernel"});
#endif
      // A strided index (every third element of a buffer).
      Tensor strided = empty({3 * 301}, {id_dtype, kernel_test_device()}).as_strided({301}, {3}, 2);
      kernels::copy_into(strided, ei);
      check_identical(kernels::index_select(ex, 0, strided), ref, "index_select by rows, strided index " + what);
      // x one element past a 16-byte boundary: contiguous but unaligned, the element-wise kernel.
      Tensor shifted = empty({50 * width + 1}, {dtype, kernel_test_device()}).as_strided({50, width}, {width, 1}, 1);
      kernels::copy_into(shifted, ex);
      const std::vector<std::string> ran_shifted =
          kernels_of([&] { check_identical(kernels::index_select(shifted, 0, ei), ref, "unaligned " + what); });
#if !defined(__SANITIZE_ADDRESS__)
      CHECK(ran_shifted == std::vector<std::string>{"gather_kernel"});
#endif
    }
    if (dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Float16) {
      const Tensor ids = rand_int({3, 67}, 50, {.dtype = DType::Int64}, gen);
      const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::embedding(x, ids); });
      Tensor got;
      const std::vector<std::string> ran =
          kernels_of([&] { got = kernels::embedding(to_test_device(x), to_test_device(ids)); });
      check_identical(got, ref, "embedding by rows " + what);
#if !defined(__SANITIZE_ADDRESS__)
      // (16-bit tables may be cast around the lookup; the lookup itself is the row gather.)
      CHECK(std::count(ran.begin(), ran.end(), "gather_rows_kernel") == 1);
      CHECK(std::count(ran.begin(), ran.end(), "embedding_kernel") == 0);
#endif
    }
  }
}

TEST_CASE("cuda index: scatter_add is deterministic and matches the reference", "[cuda][index][family:index]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(5);
  struct ScatterCase {
    std::string name;
    Shape x, index, src;
    std::int64_t dim;
    std::int64_t high;  // index values in [0, high)
    bool same_order_as_cpu;  // the CPU fast path applies (else it falls back to the reference)
  };
  const std::vector<ScatterCase> cases = {
      {"2-d dim 0, 3 rows, heavy collisions", {3, 257}, {600, 257}, {600, 257}, 0, 3, true},
      {"2-d dim 1", {33, 31}, {33, 65}, {33, 65}, 1, 31, true},
      {"3-d dim 1, smaller index", {5, 33, 7}, {4, 40, 6}, {5, 41, 7}, 1, 33, false},
      {"3-d dim 2", {3, 4, 33}, {3, 4, 257}, {3, 4, 257}, 2, 33, true},
      {"1-d, one column", {257}, {3000}, {3000}, 0, 257, true},
      {"1-d, 7 rows, src longer", {7}, {2049}, {2100}, 0, 7, false},
      {"2-d, one column", {4, 33}, {1, 2100}, {2, 2100}, 1, 33, false},
  };
  for (const auto& c : cases) {
    for (DType dtype : {DType::Float32, DType::Int64}) {
      const bool integral = dtype == DType::Int64;
      const Tensor x = integral ? rand_int(c.x, 100, {.dtype = dtype}, gen) : rand_uniform(c.x, -1, 1, {}, gen);
      const Tensor src = integral ? rand_int(c.src, 100, {.dtype = dtype}, gen) : rand_uniform(c.src, -1, 1, {}, gen);
      const Tensor index = rand_int(c.index, c.high, {.dtype = DType::Int32}, gen);
      const Tensor ref =
          on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::scatter_add(x, c.dim, index, src); });
      const Tensor cpu =
          on_cpu_backend(kernels::Backend::Cpu, [&] { return kernels::scatter_add(x, c.dim, index, src); });
      for (bool strided : {false, true}) {
        const std::string what =
            "scatter_add " + c.name + " " + std::string(dtype_name(dtype)) + (strided ? " strided" : "");
        const Inputs e = on_emu({x, index, src}, strided);
        const Tensor got = run_all_schedules([&] { return kernels::scatter_add(e.x, c.dim, e.index, e.src); }, what);
        if (integral) check_identical(got, ref, what + ": vs reference");
        else check_close(got, ref, 1e-5, 1e-5, what + ": vs reference");
        if (c.same_order_as_cpu) check_identical(got, cpu, what + ": vs cpu path");
      }
    }
  }
}

TEST_CASE("cuda index: index_add is deterministic and matches the reference", "[cuda][index][family:index]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(9);
  struct AddCase {
    std::string name;
    Shape x;
    std::int64_t dim, n;  // n index entries
    // float32 rows are summed in float, in index order, like the CPU path: 2049 terms in one
    // row drift up to ~5e-5 from the double-accumulating reference.
    double atol = 1e-5;
  };
  const std::vector<AddCase> cases = {
      {"dim 0, 300 rows, 5000 entries", {300, 3}, 0, 5000},
      {"dim 0, 1 row", {1, 33}, 0, 2049, 1e-4},
      {"dim 1 of 3-d", {3, 33, 5}, 1, 257},
      {"last dim, 7 rows", {31, 7}, -1, 2100},
      {"dim 0, 40000 rows", {40000, 2}, 0, 31},
  };
  for (const auto& c : cases) {
    const std::int64_t d = c.dim < 0 ? c.dim + static_cast<std::int64_t>(c.x.size()) : c.dim;
    Shape src_shape = c.x;
    src_shape[d] = c.n;
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int32}) {
      const bool integral = dtype == DType::Int32;
      const Tensor x = integral ? rand_int(c.x, 100, {.dtype = dtype}, gen) : rand_uniform(c.x, -1, 1, {.dtype = dtype}, gen);
      const Tensor src =
          integral ? rand_int(src_shape, 100, {.dtype = dtype}, gen) : rand_uniform(src_shape, -1, 1, {.dtype = dtype}, gen);
      const Tensor index = rand_int({c.n}, c.x[d], {.dtype = DType::Int64}, gen);
      const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::index_add(x, c.dim, index, src); });
      const Tensor cpu = on_cpu_backend(kernels::Backend::Cpu, [&] { return kernels::index_add(x, c.dim, index, src); });
      for (bool strided : {false, true}) {
        if (strided && dtype != DType::Float32) continue;  // layouts: float32 only, to keep the test short
        const std::string what = "index_add " + c.name + " " + std::string(dtype_name(dtype)) + (strided ? " strided" : "");
        const Inputs e = on_emu({x, index, src}, strided);
        const Tensor got = run_all_schedules([&] { return kernels::index_add(e.x, c.dim, e.index, e.src); }, what);
        if (integral) check_identical(got, ref, what + ": vs reference");
        else check_close(got, ref, c.atol, 1e-5, what + ": vs reference");
        check_identical(got, cpu, what + ": vs cpu path");
      }
    }
  }
}

// The radix sort behind index_add at the sizes where its paths part: more than 64 tiles of 2,048
// positions (the scan kernel sums the tiles' counts; with fewer the scatter kernel does), keys over
// 17 bits (three 8-bit passes), every position of a tile in one digit, keys in falling order, a
// last tile of one position, and keys far apart (long runs of empty rows between groups). Each
// row's terms are summed in position order, so a float32 result equal to the CPU path's bit for
// bit, with hundreds of terms a row, shows the sort kept the order.
TEST_CASE("cuda index: index_add's radix sort over many tiles, three passes and one-digit tiles",
          "[cuda][index][family:index]") {
  REQUIRE(kernels::register_devices().emu);
  Generator gen(21);
  std::mt19937_64 key_gen(21);
  constexpr std::int64_t kRows = 70000;
  struct SortCase {
    std::string name;
    std::int64_t n;
    std::function<std::int64_t(std::int64_t, std::mt19937_64&)> key;  // the key of position i
  };
  const auto spread = [](std::int64_t, std::mt19937_64& g) {  // 300 keys over every digit
    return static_cast<std::int64_t>(g() % 300) * 233;
  };
  const std::vector<SortCase> cases = {
      {"140,000 positions, 300 keys over 17 bits", 140000, spread},
      {"140,000 positions, one key", 140000, [](std::int64_t, std::mt19937_64&) { return kRows - 1; }},
      {"140,000 positions, falling keys", 140000,
       [](std::int64_t i, std::mt19937_64&) { return (140000 - 1 - i) / 2 % kRows; }},
      {"4,097 positions (a last tile of one), 300 keys", 4097, spread},
      // Every group's first position also starts the 34 empty rows before it: runs longer than a
      // thread of the group-starts kernel writes alone, in every lane of a warp.
      {"2,000 positions, keys 35 apart", 2000, [](std::int64_t i, std::mt19937_64&) { return i * 35; }},
  };
  for (const auto& c : cases) {
    std::vector<std::int64_t> keys(static_cast<std::size_t>(c.n));
    for (std::int64_t i = 0; i < c.n; ++i) keys[static_cast<std::size_t>(i)] = c.key(i, key_gen);
    const Tensor index = from_vector(keys, {c.n});
    for (DType dtype : {DType::Float32, DType::Int32}) {
      const bool integral = dtype == DType::Int32;
      const Tensor x =
          integral ? rand_int({kRows, 1}, 100, {.dtype = dtype}, gen) : rand_uniform({kRows, 1}, -1, 1, {}, gen);
      const Tensor src =
          integral ? rand_int({c.n, 1}, 100, {.dtype = dtype}, gen) : rand_uniform({c.n, 1}, -1, 1, {}, gen);
      const Tensor ref = on_cpu_backend(kernels::Backend::Ref, [&] { return kernels::index_add(x, 0, index, src); });
      const Tensor cpu = on_cpu_backend(kernels::Backend::Cpu, [&] { return kernels::index_add(x, 0, index, src); });
      const std::string what = "index_add " + c.name + " " + std::string(dtype_name(dtype));
      const Inputs e = on_emu({x, index, src}, false);
      const Tensor got = run_all_schedules([&] { return kernels::index_add(e.x, 0, e.index, e.src); }, what);
      if (integral)
        check_identical(got, ref, what + ": vs reference");
      else
        check_close(got, ref, 1e-3, 1e-5, what + ": vs reference");
      check_identical(got, cpu, what + ": vs cpu path");
    }
  }
}
