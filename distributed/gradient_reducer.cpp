#include "distributed/gradient_reducer.h"

#include <zlib.h>
#include <algorithm>
#include <chrono>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "distributed/planted_bugs.h"
#include "kernels/copy.h"

namespace define::dist {
namespace {

constexpr const char* kOp = "distributed";

constexpr std::size_t kFirstBucketBytes = std::size_t{1} << 20;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The flat buffer's elements [offset, offset + numel) viewed as `like`'s shape.
Tensor slice_as(const Tensor& flat, std::int64_t offset, const Tensor& like) {
  return reshape(narrow(flat, 0, offset, like.numel()), like.shape());
}

}  // namespace

GradientReducer::GradientReducer(Communicator& comm, const optim::NamedParameters& params, std::size_t bucket_bytes,
                                 std::optional<DType> reduce_dtype)
    : comm_(comm) {
  if (reduce_dtype && !is_floating(*reduce_dtype))
    fail(kOp, "gradients cannot be all-reduced in {}: give a floating-point dtype", dtype_name(*reduce_dtype));
  for (const auto& p : params)
    if (p.second.requires_grad()) params_.push_back(p);
  if (params_.empty()) fail(kOp, "the model has no trainable parameters to reduce");
  const Device device = params_[0].second.device();
  // Layout fingerprint: names, shapes and dtypes, in order; every rank must agree.
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto& [name, t] : params_) {
    if (t.device() != device)
      fail(kOp, "parameters on two devices ({} on {}, {} on {}): data-parallel training needs one device per rank",
           params_[0].first, device.str(), name, t.device().str());
    const std::string key = name + " " + shape_str(t.shape()) + " " + std::string(dtype_name(t.dtype())) + ";";
    crc = crc32(crc, reinterpret_cast<const Bytef*>(key.data()), static_cast<uInt>(key.size()));
  }
  comm_.require_equal(crc, "the model's parameter layout (names, shapes, dtypes)");

  // Buckets in reverse registration order, one dtype each, closed at bucket_bytes.
  bucket_of_.assign(params_.size(), 0);
  std::vector<std::size_t> current;
  std::size_t bytes = 0;
  auto close = [&] {
    if (current.empty()) return;
    Bucket b;
    std::int64_t n = 0;
    for (std::size_t i : current) {
      b.offsets.push_back(n);
      n += params_[i].second.numel();
      bucket_of_[i] = buckets_.size();
    }
    b.members = std::move(current);
    const DType own = params_[b.members[0]].second.dtype();
    b.flat = empty({n}, {.dtype = reduce_dtype && is_floating(own) ? *reduce_dtype : own, .device = device});
    buckets_.push_back(std::move(b));
    current.clear();
    bytes = 0;
  };
  for (std::size_t k = params_.size(); k-- > 0;) {
    const Tensor& t = params_[k].second;
    if (!current.empty() && t.dtype() != params_[current[0]].second.dtype()) close();
    current.push_back(k);
    param_of_[t.impl()] = k;
    bytes += static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
    // The first bucket is small (as DDP's 1 MB one): the last layers' gradients are ready first,
    // and a small bucket starts communicating while most of backward is still to come.
    if (bytes >= (buckets_.empty() ? std::min(bucket_bytes, kFirstBucketBytes) : bucket_bytes)) close();
  }
  close();
  seen_.assign(params_.size(), 0);
  used_ = zeros({static_cast<std::int64_t>(params_.size())}, {.dtype = DType::Int64});
}

GradientReducer::~GradientReducer() = default;

std::int64_t GradientReducer::begin_step(std::int64_t local_tokens) {
  for (Bucket& b : buckets_) {
    if (b.pending) fail(kOp, "begin_step while the previous step's reductions are still in flight");
    b.ready = 0;
    b.started = false;
  }
  std::fill(seen_.begin(), seen_.end(), 0);
  next_ = 0;
  watching_ = false;
  first_start_ = -1;
  const std::int64_t global = comm_.sum(local_tokens);
  if (global <= 0) fail(kOp, "a step with no target tokens on any rank");
  weight_ = static_cast<double>(local_tokens) / static_cast<double>(global);
  return global;
}

void GradientReducer::watch_backward(const Tensor& loss) {
  watching_ = true;
  guard_ = std::make_unique<LeafGradientObserverGuard>(this);
  // Without a graph to walk (a loss that is a leaf) nothing is known to be unused: every bucket
  // waits for backward or finish(), as it would without the walk.
  if (!loss.defined() || !loss.grad_fn()) return;
  // The accumulators backward will reach: every node on a path from the loss.
  std::unordered_set<const Node*> reached;
  std::vector<std::shared_ptr<Node>> todo{loss.grad_fn()};
  while (!todo.empty()) {
    std::shared_ptr<Node> n = std::move(todo.back());
    todo.pop_back();
    if (!reached.insert(n.get()).second) continue;
    for (const Edge& e : n->next_edges)
      if (e.node && !reached.count(e.node.get())) todo.push_back(e.node);
  }
  for (std::size_t k = 0; k < params_.size(); ++k) {
    const auto& meta = params_[k].second.impl()->autograd;
    const std::shared_ptr<Node> acc = meta ? meta->grad_accumulator.lock() : nullptr;
    if (!acc || !reached.count(acc.get())) gradient_ready(params_[k].second.impl());  // no gradient this pass
  }
}

void GradientReducer::gradient_ready(const TensorImpl* leaf) {
  if (!watching_) return;
  const auto it = param_of_.find(leaf);
  if (it == param_of_.end()) return;  // a leaf that is not a parameter (e.g. an input)
  const std::size_t k = it->second;
  if (seen_[k]) return;
  seen_[k] = 1;
  Bucket& b = buckets_[bucket_of_[k]];
  ++b.ready;
  if (planted_bugs().buckets_in_ready_order) {
    if (b.ready == b.members.size()) {
      start(b);
      ++timing_.buckets_started_in_backward;
    }
  } else {
    // Every rank issues the buckets' collectives in the same order, the buckets' own: a bucket
    // whose gradients are ready waits for the ones before it. A parameter this rank's batch did not
    // use (an adaptive band without a token here) holds back the buckets after its own until
    // finish(), on this rank only, instead of reordering the collectives against the other ranks.
    while (next_ < buckets_.size() && buckets_[next_].ready == buckets_[next_].members.size()) {
      start(buckets_[next_++]);
      ++timing_.buckets_started_in_backward;
    }
  }
  poll();
}

void GradientReducer::start(Bucket& b) {
  NoGradGuard no_grad;
  for (std::size_t j = 0; j < b.members.size(); ++j) {
    const Tensor& p = params_[b.members[j]].second;
    const Tensor g = p.grad();
    const Tensor dst = slice_as(b.flat, b.offsets[j], p);
    if (g.defined()) {
      kernels::copy_into(dst, weight_ == 1.0 ? g : mul(g, weight_));
      used_.data<std::int64_t>()[b.members[j]] = 1;
    } else {
      kernels::fill(dst, 0.0);
      used_.data<std::int64_t>()[b.members[j]] = 0;
    }
  }
  if (first_start_ < 0) first_start_ = now_s();
  b.started = true;
  b.pending = comm_.start_all_reduce_sum(b.flat);
}

void GradientReducer::poll() {
  for (Bucket& b : buckets_)
    if (b.pending) b.pending->test();
}

void GradientReducer::finish() {
  guard_.reset();
  watching_ = false;
  for (Bucket& b : buckets_)  // in bucket order, as in backward
    if (!b.started) start(b);
  next_ = buckets_.size();
  const double wait_start = now_s();
  for (Bucket& b : buckets_) {
    b.pending->wait();
    b.pending.reset();
  }
  // Which parameters some rank used: the others keep an undefined gradient, as in one process.
  comm_.all_reduce_sum(used_);
  const double end = now_s();
  timing_.wait_s += end - wait_start;
  timing_.comm_window_s += end - first_start_;
  timing_.buckets += static_cast<std::int64_t>(buckets_.size());

  NoGradGuard no_grad;
  const std::int64_t* used = used_.data<std::int64_t>();
  for (const Bucket& b : buckets_)
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      const Tensor& p = params_[b.members[j]].second;
      const Tensor sum = slice_as(b.flat, b.offsets[j], p);
      const Tensor g = p.grad();
      if (used[b.members[j]] == 0) {
        if (g.defined()) p.set_grad(Tensor());
      } else if (g.defined()) {
        kernels::copy_into(g, sum);
      } else {
        p.set_grad(sum.dtype() == p.dtype() ? clone(sum) : kernels::cast(sum, p.dtype()));
      }
    }
}

}  // namespace define::dist
