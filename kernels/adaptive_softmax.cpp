// Entry points of the adaptive-softmax family: the cluster partition (host), argument checks,
// contiguous operands, output allocation and backend dispatch. The backends see contiguous
// tensors only and bounds already validated against every shape.
#include "kernels/adaptive_softmax.h"

#include <algorithm>
#include <limits>

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/float16_compute.h"
#include "kernels/copy.h"
#include "kernels/cpu/adaptive_softmax.h"
#include "kernels/host_mirror.h"
#include "kernels/ref/adaptive_softmax.h"
#include "kernels/softmax.h"

namespace define::kernels {
namespace {

// The CUDA kernels pass the bounds by value in a fixed array (see adaptive_softmax.cu); every
// backend enforces the same limit so a model does not work on one device and fail on another.
constexpr std::size_t kMaxAdaptiveClusters = 32;

std::int64_t head_width(const std::vector<std::int64_t>& bounds) {
  return bounds.front() + static_cast<std::int64_t>(bounds.size()) - 1;
}
std::int64_t tail_width(const std::vector<std::int64_t>& bounds, std::size_t i) { return bounds[i + 1] - bounds[i]; }

// Cluster of word t in [0, V): 0 for the shortlist, i + 1 for tail i.
std::size_t cluster_of(const std::vector<std::int64_t>& bounds, std::int64_t t) {
  return static_cast<std::size_t>(std::upper_bound(bounds.begin(), bounds.end(), t) - bounds.begin());
}

// Targets (any int dtype, any strides, any device) as host int64. Device targets the caller
// uploaded come with their host copy (HostMirrorScope); others are copied back, waiting for the
// device.
std::vector<std::int64_t> host_indices(const Tensor& t) {
  const Tensor c = contiguous(t);
  const Tensor mirror = host_mirror(c);
  const Tensor host = c.device().is_cpu() ? c : mirror.defined() ? mirror : copy_to_device(c, Device::cpu());
  std::vector<std::int64_t> out(static_cast<std::size_t>(host.numel()));
  DEFINE_DISPATCH_INDEX(host.dtype(), "adaptive_softmax", [&] {
    const scalar_t* p = host.data<scalar_t>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::int64_t>(p[i]);
  });
  return out;
}

void check_target(const char* op, const Tensor& target) {
  if (!target.defined()) fail(op, "target is an undefined tensor");
  check_index(op, target);
  check_dim(op, target, 1);
}

// head [N, c_0 + T] floating, 2-d.
void check_head(const char* op, const Tensor& head, const std::vector<std::int64_t>& bounds) {
  if (!head.defined()) fail(op, "head logits are an undefined tensor");
  check_floating(op, head);
  check_dim(op, head, 2);
  if (head.size(1) != head_width(bounds))
    fail(op, "head logits {} must have c_0 + T = {} + {} = {} columns", shape_str(head.shape()), bounds.front(),
         bounds.size() - 1, head_width(bounds));
}

// tails[i] [rows_i, c_{i+1} - c_i] (rows_i < 0: any), same dtype and device as the head.
void check_tails(const char* op, const Tensor& head, const std::vector<Tensor>& tails,
                 const std::vector<std::int64_t>& bounds, const std::vector<std::int64_t>& rows) {
  if (tails.size() + 1 != bounds.size())
    fail(op, "{} tail logits given for {} tail clusters", tails.size(), bounds.size() - 1);
  for (std::size_t i = 0; i < tails.size(); ++i) {
    const Tensor& t = tails[i];
    if (!t.defined()) fail(op, "tail {} logits are an undefined tensor", i);
    check_same_device(op, {head, t});
    check_same_dtype(op, {head, t});
    if (t.dim() != 2 || t.size(1) != tail_width(bounds, i) || (rows[i] >= 0 && t.size(0) != rows[i]))
      fail(op, "tail {} logits {} must be [{}, {}] (words [{}, {}))", i, shape_str(t.shape()),
           rows[i] >= 0 ? std::to_string(rows[i]) : std::string("rows"), tail_width(bounds, i), bounds[i],
           bounds[i + 1]);
  }
}

std::vector<Tensor> contiguous_all(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(contiguous(t));
  return out;
}

// Checks that tail_rows is exactly the partition of the non-ignored rows by the cluster of their
// target (each such row listed once, by the tail its target falls in), and every target is in
// range. On the host: a wrong partition would read outside the tail logits.
void check_partition(const char* op, const std::vector<std::int64_t>& target, const std::vector<Tensor>& tail_rows,
                     const std::vector<std::int64_t>& bounds, std::int64_t ignore_index) {
  const std::int64_t vocab = bounds.back();
  std::vector<std::int64_t> expected(bounds.size(), 0);
  for (std::int64_t t : target) {
    if (t == ignore_index) continue;
    if (t < 0 || t >= vocab) fail(op, "target {} out of range for {} classes", t, vocab);
    ++expected[cluster_of(bounds, t)];
  }
  const std::int64_t n = static_cast<std::int64_t>(target.size());
  std::vector<char> seen(target.size(), 0);
  for (std::size_t i = 0; i < tail_rows.size(); ++i) {
    const std::vector<std::int64_t> rows = host_indices(tail_rows[i]);
    if (static_cast<std::int64_t>(rows.size()) != expected[i + 1])
      fail(op, "tail {} lists {} rows but {} targets fall in [{}, {})", i, rows.size(), expected[i + 1], bounds[i],
           bounds[i + 1]);
    for (std::int64_t r : rows) {
      if (r < 0 || r >= n) fail(op, "tail {} lists row {}, outside [0, {})", i, r, n);
      const std::int64_t t = target[static_cast<std::size_t>(r)];
      if (t == ignore_index || cluster_of(bounds, t) != i + 1)
        fail(op, "row {} (target {}) is listed for tail {} [{}, {})", r, t, i, bounds[i], bounds[i + 1]);
      if (seen[static_cast<std::size_t>(r)]++) fail(op, "row {} is listed twice for tail {}", r, i);
    }
  }
}

void check_tail_rows(const char* op, const Tensor& target, const std::vector<Tensor>& tail_rows, std::size_t tails) {
  if (tail_rows.size() != tails) fail(op, "{} row lists given for {} tail clusters", tail_rows.size(), tails);
  for (std::size_t i = 0; i < tail_rows.size(); ++i) {
    const Tensor& r = tail_rows[i];
    if (!r.defined() || r.dtype() != DType::Int64 || r.dim() != 1)
      fail(op, "tail {} rows must be a 1-d int64 tensor", i);
    check_same_device(op, {target, r});
  }
}

std::vector<std::int64_t> row_counts(const std::vector<Tensor>& tail_rows) {
  std::vector<std::int64_t> n;
  for (const Tensor& r : tail_rows) n.push_back(r.size(0));
  return n;
}

}  // namespace

void check_adaptive_bounds(const char* op, const std::vector<std::int64_t>& bounds) {
  if (bounds.empty()) fail(op, "bounds must hold at least the vocabulary size");
  if (bounds.size() > kMaxAdaptiveClusters + 1)
    fail(op, "at most {} tail clusters are supported, got {}", kMaxAdaptiveClusters, bounds.size() - 1);
  if (bounds.front() < 1) fail(op, "the shortlist must hold at least one word, got c_0 = {}", bounds.front());
  for (std::size_t i = 1; i < bounds.size(); ++i)
    if (bounds[i] <= bounds[i - 1])
      fail(op, "bounds must be strictly increasing, got {} after {}", bounds[i], bounds[i - 1]);
}

namespace {

// 16-bit logits: the whole family runs widened (kernels/float16_compute.h); losses and log-sum-exp
// rows stay float32, gradients and log-probabilities come back in the logits' dtype.
std::vector<Tensor> widen_all(const std::vector<Tensor>& ts, const Tensor& like) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(widen(t, like));
  return out;
}
std::vector<Tensor> narrow_all(const std::vector<Tensor>& ts, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(narrow(t, dtype));
  return out;
}

}  // namespace

AdaptivePartition adaptive_partition(const Tensor& target, const std::vector<std::int64_t>& bounds,
                                     std::int64_t ignore_index, const char* op) {
  check_target(op, target);
  check_adaptive_bounds(op, bounds);
  const std::vector<std::int64_t> t = host_indices(target);
  const std::int64_t vocab = bounds.back();
  std::vector<std::vector<std::int64_t>> rows(bounds.size());
  for (std::size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore_index) continue;
    if (t[r] < 0 || t[r] >= vocab) fail(op, "target {} out of range for {} classes", t[r], vocab);
    rows[cluster_of(bounds, t[r])].push_back(static_cast<std::int64_t>(r));
  }
  AdaptivePartition p;
  std::vector<std::int64_t> position(t.size(), -1);
  std::int64_t next = 0;
  for (std::size_t c = 0; c < rows.size(); ++c) {
    const std::int64_t first_word = c == 0 ? 0 : bounds[c - 1];
    const Shape shape{static_cast<std::int64_t>(rows[c].size())};
    std::vector<std::int64_t> local;
    local.reserve(rows[c].size());
    for (std::int64_t r : rows[c]) {
      position[static_cast<std::size_t>(r)] = next++;
      local.push_back(t[static_cast<std::size_t>(r)] - first_word);
    }
    p.counts.push_back(shape[0]);
    p.rows.push_back(from_vector<std::int64_t>(rows[c], shape, target.device()));
    p.local.push_back(from_vector<std::int64_t>(local, shape, target.device()));
  }
  p.position = from_vector<std::int64_t>(position, {static_cast<std::int64_t>(t.size())}, target.device());
  return p;
}

AdaptiveSoftmaxRows adaptive_softmax_rows(const Tensor& head_in, const std::vector<Tensor>& tails_in,
                                          const std::vector<Tensor>& tail_rows_in, const Tensor& target_in,
                                          const std::vector<std::int64_t>& bounds, std::int64_t ignore_index) {
  const char* op = "adaptive_softmax";
  if (any_float16({head_in})) {
    AdaptiveSoftmaxRows r = adaptive_softmax_rows(widen(head_in, head_in), widen_all(tails_in, head_in), tail_rows_in,
                                                  target_in, bounds, ignore_index);
    return {narrow(r.loss, DType::Float32), narrow(r.head_lse, DType::Float32), narrow_all(r.tail_lse, DType::Float32)};
  }
  check_adaptive_bounds(op, bounds);
  check_head(op, head_in, bounds);
  check_target(op, target_in);
  check_same_device(op, {head_in, target_in});
  if (target_in.size(0) != head_in.size(0))
    fail(op, "target of shape {} does not match head logits of shape {}", shape_str(target_in.shape()),
         shape_str(head_in.shape()));
  check_tail_rows(op, target_in, tail_rows_in, bounds.size() - 1);
  check_tails(op, head_in, tails_in, bounds, row_counts(tail_rows_in));
  // On a device the loss kernels check targets and rows as they read them (no copy to the host).
  if (target_in.device().is_cpu()) check_partition(op, host_indices(target_in), tail_rows_in, bounds, ignore_index);

  const Tensor head = contiguous(head_in), target = contiguous(target_in);
  const std::vector<Tensor> tails = contiguous_all(tails_in), tail_rows = contiguous_all(tail_rows_in);
  const TensorOptions like{head.dtype(), head.device()};
  const std::int64_t n = head.size(0);
  AdaptiveSoftmaxRows r{empty({n}, like), empty({n}, like), {}};
  for (const Tensor& t : tails) r.tail_lse.push_back(empty({t.size(0)}, like));
  if (n > 0)
    DEFINE_BACKEND_CALL(op, head, adaptive_softmax_forward, head, tails, tail_rows, target, bounds, ignore_index,
                        r.loss, r.head_lse, r.tail_lse);
  return r;
}

AdaptiveSoftmaxGrads adaptive_softmax_backward(const Tensor& head_in, const std::vector<Tensor>& tails_in,
                                               const AdaptiveSoftmaxRows& saved,
                                               const std::vector<Tensor>& tail_rows_in, const Tensor& target_in,
                                               const std::vector<std::int64_t>& bounds, const Tensor& grad_loss_in,
                                               const Tensor& total_weight, std::int64_t ignore_index) {
  const char* op = "adaptive_softmax_backward";
  if (any_float16({head_in})) {
    const AdaptiveSoftmaxRows wide_saved{widen(saved.loss, head_in), widen(saved.head_lse, head_in),
                                         widen_all(saved.tail_lse, head_in)};
    AdaptiveSoftmaxGrads g = adaptive_softmax_backward(
        widen(head_in, head_in), widen_all(tails_in, head_in), wide_saved, tail_rows_in, target_in, bounds,
        widen(grad_loss_in, head_in), widen(total_weight, head_in), ignore_index);
    return {narrow(g.grad_head, head_in.dtype()), narrow_all(g.grad_tails, head_in.dtype())};
  }
  check_adaptive_bounds(op, bounds);
  check_head(op, head_in, bounds);
  check_target(op, target_in);
  check_tail_rows(op, target_in, tail_rows_in, bounds.size() - 1);
  check_tails(op, head_in, tails_in, bounds, row_counts(tail_rows_in));
  const std::int64_t n = head_in.size(0);
  if (target_in.size(0) != n || saved.head_lse.shape() != Shape{n} || saved.tail_lse.size() != tails_in.size())
    fail(op, "saved row statistics do not match head logits of shape {}", shape_str(head_in.shape()));
  if (grad_loss_in.numel() != 1 && grad_loss_in.shape() != Shape{n})
    fail(op, "loss gradient of shape {} is neither a scalar nor [{}]", shape_str(grad_loss_in.shape()), n);
  if (total_weight.numel() != 1) fail(op, "total_weight must have one element, got {}", shape_str(total_weight.shape()));
  check_same_device(op, {head_in, target_in, grad_loss_in, total_weight, saved.head_lse});
  check_same_dtype(op, {head_in, grad_loss_in, total_weight, saved.head_lse});

  const Tensor head = contiguous(head_in), target = contiguous(target_in), grad_loss = contiguous(grad_loss_in);
  const Tensor weight = contiguous(total_weight), head_lse = contiguous(saved.head_lse);
  const std::vector<Tensor> tails = contiguous_all(tails_in), tail_rows = contiguous_all(tail_rows_in);
  const std::vector<Tensor> tail_lse = contiguous_all(saved.tail_lse);
  AdaptiveSoftmaxGrads g{empty(head.shape(), {head.dtype(), head.device()}), {}};
  for (const Tensor& t : tails) g.grad_tails.push_back(empty(t.shape(), {t.dtype(), t.device()}));
  if (n > 0)
    DEFINE_BACKEND_CALL(op, head, adaptive_softmax_backward, head, tails, head_lse, tail_lse, tail_rows, target,
                        bounds, ignore_index, grad_loss, weight, g.grad_head, g.grad_tails);
  return g;
}

AdaptiveLogProb adaptive_log_prob(const Tensor& head_in, const std::vector<Tensor>& tails_in,
                                  const std::vector<std::int64_t>& bounds) {
  const char* op = "adaptive_log_prob";
  if (any_float16({head_in})) {
    AdaptiveLogProb r = adaptive_log_prob(widen(head_in, head_in), widen_all(tails_in, head_in), bounds);
    return {narrow(r.out, head_in.dtype()), narrow(r.head_lp, head_in.dtype())};
  }
  check_adaptive_bounds(op, bounds);
  check_head(op, head_in, bounds);
  check_tails(op, head_in, tails_in, bounds, std::vector<std::int64_t>(tails_in.size(), head_in.size(0)));
  const Tensor head = contiguous(head_in);
  const std::vector<Tensor> tails = contiguous_all(tails_in);
  const std::int64_t n = head.size(0);
  const TensorOptions like{head.dtype(), head.device()};
  AdaptiveLogProb r{empty({n, bounds.back()}, like), empty(head.shape(), like)};
  if (n > 0) DEFINE_BACKEND_CALL(op, head, adaptive_log_prob, head, tails, bounds, r.out, r.head_lp);
  return r;
}

AdaptiveLogProbGrads adaptive_log_prob_backward(const AdaptiveLogProb& saved, const Tensor& grad_out_in,
                                                const std::vector<std::int64_t>& bounds) {
  const char* op = "adaptive_log_prob_backward";
  if (any_float16({saved.out, grad_out_in})) {
    const Tensor& like = saved.out;
    AdaptiveLogProbGrads g = adaptive_log_prob_backward({widen(saved.out, like), widen(saved.head_lp, like)},
                                                        widen(grad_out_in, like), bounds);
    return {narrow(g.grad_head, like.dtype()), narrow_all(g.grad_tails, like.dtype())};
  }
  check_adaptive_bounds(op, bounds);
  check_head(op, saved.head_lp, bounds);
  const std::int64_t n = saved.head_lp.size(0);
  if (saved.out.shape() != Shape{n, bounds.back()} || grad_out_in.shape() != saved.out.shape())
    fail(op, "gradient of shape {} does not match log-probabilities of shape {}", shape_str(grad_out_in.shape()),
         shape_str(saved.out.shape()));
  check_same_device(op, {saved.head_lp, saved.out, grad_out_in});
  check_same_dtype(op, {saved.head_lp, saved.out, grad_out_in});
  const Tensor out = contiguous(saved.out), head_lp = contiguous(saved.head_lp), grad_out = contiguous(grad_out_in);
  const TensorOptions like{out.dtype(), out.device()};
  AdaptiveLogProbGrads g;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i) g.grad_tails.push_back(empty({n, tail_width(bounds, i)}, like));
  const Tensor grad_head_lp = empty(head_lp.shape(), like);
  if (n == 0) {
    g.grad_head = grad_head_lp;
    return g;
  }
  DEFINE_BACKEND_CALL(op, out, adaptive_log_prob_backward, out, head_lp, grad_out, bounds, g.grad_tails, grad_head_lp);
  // The head's own log-softmax: dhead = dlp - softmax(head) * sum(dlp), the softmax family's kernel.
  g.grad_head = log_softmax_backward(head_lp, grad_head_lp, 1);
  return g;
}

}  // namespace define::kernels
