// Tensor core: views share storage and never copy, strides and offsets are right, the version
// counter is shared by views, and bad metadata is refused with named errors.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "kernels/copy.h"
#include "support/common.h"

using namespace define;
using Catch::Contains;
using define::test::values;

namespace {
Tensor iota(const Shape& s) { return kernels::cast(arange(numel_of(s)), DType::Float32).as_strided(s, contiguous_strides(s), 0); }
}  // namespace

TEST_CASE("tensor: factories, shape and strides", "[core]") {
  Tensor t = zeros({2, 3, 4});
  CHECK(t.shape() == Shape{2, 3, 4});
  CHECK(t.strides() == Strides{12, 4, 1});
  CHECK(t.numel() == 24);
  CHECK(t.dim() == 3);
  CHECK(t.dtype() == DType::Float32);
  CHECK(t.is_contiguous());
  CHECK(t.size(-1) == 4);
  CHECK(full({2}, 2.5, {DType::Float64}).to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(arange(4, {DType::Int32}).to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(scalar_tensor(3).dim() == 0);
  CHECK(scalar_tensor(3).item<float>() == 3.0f);
  CHECK(empty({0, 5}).numel() == 0);
  REQUIRE_THROWS_WITH(empty({2, -1}), Contains("empty: negative dimension in shape [2,-1]"));
  REQUIRE_THROWS_WITH(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), Contains("from_vector: 3 values do not fill shape [2,2]"));
  REQUIRE_THROWS_WITH(t.data<double>(), Contains("requested float64 but the tensor is float32"));
  REQUIRE_THROWS_WITH(t.size(3), Contains("dim 3 out of range for a 3-d tensor"));
  REQUIRE_THROWS_WITH(Tensor().shape(), Contains("undefined tensor"));
}

TEST_CASE("tensor: views share storage without copying", "[core][views]") {
  Tensor x = iota({2, 3});
  Tensor t = transpose(x, 0, 1);
  CHECK(t.shares_storage_with(x));
  CHECK(t.shape() == Shape{3, 2});
  CHECK(t.strides() == Strides{1, 3});
  CHECK_FALSE(t.is_contiguous());
  CHECK(values(t) == std::vector<double>{0, 3, 1, 4, 2, 5});

  Tensor p = permute(iota({2, 3, 4}), {2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Strides{1, 12, 4});

  Tensor n = narrow(x, 1, 1, 2);
  CHECK(n.shares_storage_with(x));
  CHECK(n.offset() == 1);
  CHECK(values(n) == std::vector<double>{1, 2, 4, 5});
  CHECK(values(select(x, 0, 1)) == std::vector<double>{3, 4, 5});
  CHECK(values(select(x, 1, -1)) == std::vector<double>{2, 5});

  Tensor e = expand(iota({3, 1}), {3, 4});
  CHECK(e.strides() == Strides{1, 0});
  CHECK(values(e) == std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
  CHECK(expand(iota({3}), {2, -1}).shape() == Shape{2, 3});

  Tensor r = reshape(x, {3, 2});
  CHECK(r.shares_storage_with(x));  // contiguous: a view
  Tensor rc = reshape(t, {6});      // transposed: needs a copy
  CHECK_FALSE(rc.shares_storage_with(x));
  CHECK(values(rc) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(reshape(x, {-1}).shape() == Shape{6});
  CHECK(view(iota({2, 3, 4}), {6, 4}).shape() == Shape{6, 4});
  // Merging dims that are not contiguous with each other is not a view.
  REQUIRE_THROWS_WITH(view(t, {6}), Contains("view: a tensor of shape [3,2] with strides [1,3] cannot be viewed as [6]"));
  // Splitting a transposed dim is still a view.
  Tensor tv = view(transpose(iota({4, 6}), 0, 1), {2, 3, 4});  // [6,4] strides [1,6]
  CHECK(tv.strides() == Strides{3, 1, 6});

  CHECK(unsqueeze(x, 0).shape() == Shape{1, 2, 3});
  CHECK(unsqueeze(x, -1).shape() == Shape{2, 3, 1});
  CHECK(squeeze(iota({1, 3, 1})).shape() == Shape{3});
  CHECK(squeeze(iota({1, 3, 1}), 2).shape() == Shape{1, 3});
  CHECK(flatten(iota({2, 3, 4}), 1).shape() == Shape{2, 12});

  Tensor c = contiguous(t);
  CHECK(c.is_contiguous());
  CHECK(values(c) == values(t));
  CHECK(contiguous(x).impl() == x.impl());  // already contiguous: no copy

  REQUIRE_THROWS_WITH(reshape(x, {4, 2}), Contains("reshape: cannot reshape [2,3] (6 elements) into [4,2] (8 elements)"));
  REQUIRE_THROWS_WITH(reshape(x, {-1, -1}), Contains("reshape: only one dimension can be -1"));
  REQUIRE_THROWS_WITH(transpose(x, 0, 2), Contains("transpose: dim 2 out of range for a 2-d tensor"));
  REQUIRE_THROWS_WITH(permute(x, {0, 0}), Contains("permute: dim 0 appears twice"));
  REQUIRE_THROWS_WITH(narrow(x, 1, 2, 2), Contains("narrow: range [2, 4) is outside dim 1 of size 3"));
  REQUIRE_THROWS_WITH(expand(iota({2, 3}), {4, 3}), Contains("expand: cannot expand [2,3] to [4,3]"));
  REQUIRE_THROWS_WITH(select(x, 0, 2), Contains("select: index 2 out of range for dim 0 of size 2"));
  REQUIRE_THROWS_WITH(x.as_strided({3, 3}, {3, 1}, 0), Contains("as_strided: view [3,3] with strides [3,1] at offset 0 exceeds storage of 6 elements"));
}

TEST_CASE("tensor: version counter is shared by views and bumped by in-place ops", "[core][version]") {
  Tensor x = zeros({2, 3});
  Tensor v = transpose(x, 0, 1);
  CHECK(x.version() == 0);
  copy_(v, ones({3, 2}));
  CHECK(x.version() == 1);
  CHECK(v.version() == 1);
  CHECK(values(x) == std::vector<double>(6, 1.0));
  Tensor independent = clone(x);
  copy_(x, zeros({2, 3}));
  CHECK(independent.version() == 0);
  CHECK(x.version() == 2);
}

TEST_CASE("tensor: dtype casts and device copies", "[core]") {
  Tensor x = from_vector(std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK(to_dtype(x, DType::Float64).to_vector<double>() == std::vector<double>{1.5, -2.0, 3.25});
  CHECK(to_dtype(x, DType::Int64).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, -2, 3});
  Tensor y = to_device(x, Device::cpu());
  CHECK(y.impl() == x.impl());  // same device: no copy
  if (!has_device(DeviceType::CUDA)) {
    REQUIRE_THROWS_WITH(to_device(x, Device::cuda()), Contains("device: no CUDA device"));
  }
  CHECK(zeros({2}, {DType::Float16}).to_vector<Half>()[1].bits == 0);  // 16-bit tensors: core/float16.h
}

TEST_CASE("tensor: copy_ broadcasts and casts into strided destinations", "[core]") {
  Tensor dst = zeros({3, 2});
  Tensor dt = transpose(dst, 0, 1);  // [2,3] view
  copy_(dt, from_vector(std::vector<double>{1, 2, 3}, {3}));
  CHECK(values(dst) == std::vector<double>{1, 1, 2, 2, 3, 3});
  REQUIRE_THROWS_WITH(copy_(dst, zeros({4})), Contains("copy: shapes [3,2] and [4] cannot be broadcast"));
  REQUIRE_THROWS_WITH(copy_(dst, zeros({3, 1, 2})), Contains("copy: source of shape [3,1,2] cannot be broadcast to destination [3,2]"));
}
