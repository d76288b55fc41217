#include "autograd/autocast.h"

#include <atomic>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/views.h"

namespace define::autocast {
namespace {

thread_local std::optional<DType> g_lower;
std::atomic<std::uint64_t> g_lowered{0};

struct CachedCast {
  std::uint64_t version = 0;
  DType dtype = DType::Float32;
  Tensor source;  // keeps the key's impl alive while cached
  Tensor cast;
};
thread_local std::unordered_map<const void*, CachedCast> g_cache;

// float16 < bfloat16 are not ordered: either with the other is float32.
DType wider(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
  return DType::Float32;
}

}  // namespace

std::optional<DType> lower_dtype() { return g_lower; }

Scope::Scope(std::optional<DType> dtype) : previous_(g_lower) { g_lower = dtype; }
Scope::~Scope() {
  g_lower = previous_;
  if (!g_lower) g_cache.clear();  // leaving mixed precision: no 16-bit weight copy outlives it
}

Tensor gemm_input(const Tensor& t) {
  if (!g_lower || !t.defined() || !is_floating(t.dtype()) || t.dtype() == *g_lower) return t;
  if (t.dtype() == DType::Float64) return t;  // float64 is a reference computation: never lowered
  // Only casts with a graph are cached: one made with grad mode off (a recomputed block's first
  // run) must not stand in for one whose gradient is needed later.
  if (!(t.is_leaf() && t.requires_grad() && GradMode::enabled())) {
    g_lowered.fetch_add(1, std::memory_order_relaxed);
    return to_dtype(t, *g_lower);
  }
  CachedCast& c = g_cache[t.impl_ptr().get()];
  if (c.cast.defined() && c.version == t.version() && c.dtype == *g_lower) return c.cast;
  g_lowered.fetch_add(1, std::memory_order_relaxed);
  c = {t.version(), *g_lower, t, to_dtype(t, *g_lower)};
  return c.cast;
}

Tensor float_input(const Tensor& t) {
  if (!t.defined() || !is_float16(t.dtype())) return t;
  return to_dtype(t, DType::Float32);
}

std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.dtype() == b.dtype() || !is_floating(a.dtype()) || !is_floating(b.dtype()) ||
      !(is_float16(a.dtype()) || is_float16(b.dtype())))
    return {a, b};
  const DType d = wider(a.dtype(), b.dtype());
  return {to_dtype(a, d), to_dtype(b, d)};
}

std::vector<Tensor> promote_all(const std::vector<Tensor>& ts) {
  std::optional<DType> d;
  bool any16 = false;
  for (const Tensor& t : ts) {
    if (!t.defined() || !is_floating(t.dtype())) continue;
    d = d ? wider(*d, t.dtype()) : t.dtype();
    any16 = any16 || is_float16(t.dtype());
  }
  if (!d || !any16) return ts;
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.defined() && is_floating(t.dtype()) ? to_dtype(t, *d) : t);
  return out;
}

std::uint64_t lowered_casts() { return g_lowered.load(std::memory_order_relaxed); }

void clear_cache() { g_cache.clear(); }

}  // namespace define::autocast
