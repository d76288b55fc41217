#include "kernels/host_mirror.h"

namespace define::kernels {
namespace {

thread_local const HostMirrorScope* innermost = nullptr;

}  // namespace

HostMirrorScope::HostMirrorScope(std::vector<std::pair<Tensor, Tensor>> pairs) : outer_(innermost) {
  for (auto& [host, device] : pairs) {
    if (device.device().is_cpu()) continue;  // training on the CPU: nothing to mirror
    if (!host.device().is_cpu() || host.dtype() != device.dtype() || host.shape() != device.shape() ||
        !host.is_contiguous() || !device.is_contiguous())
      fail("HostMirrorScope", "a host tensor {} and its device copy {} must be contiguous and alike",
           shape_str(host.shape()), shape_str(device.shape()));
    pairs_.emplace_back(std::move(host), std::move(device));
  }
  innermost = this;
}

HostMirrorScope::~HostMirrorScope() { innermost = outer_; }

Tensor host_mirror(const Tensor& t) {
  if (!t.defined() || t.device().is_cpu() || !t.is_contiguous()) return {};
  for (const HostMirrorScope* s = innermost; s; s = s->outer_)
    for (const auto& [host, device] : s->pairs_)
      if (device.device() == t.device() && device.dtype() == t.dtype() && device.raw_data() == t.raw_data() &&
          device.numel() == t.numel())
        return host.as_strided(t.shape(), t.strides(), host.offset());
  return {};
}

}  // namespace define::kernels
