// Host copies of device tensors, declared for a scope by the code that uploaded them. Some ops need
// index values on the host (the distinct ids a DeFINE unit runs on, the adaptive-softmax cluster
// sizes that shape its tail GEMMs); reading them back from the device is a blocking device-to-host
// copy per batch. The training task uploaded those ids from host memory a moment before: it
// declares the pair here for the forward pass, and those ops read the host copy instead.
#pragma once

#include <utility>
#include <vector>

#include "core/tensor.h"

namespace define::kernels {

// For its lifetime (on this thread), each device tensor of `pairs` (second) is known to hold the
// values of its host tensor (first): same dtype and shape, contiguous (pairs whose second tensor is
// on the CPU are ignored). The device tensors must not be written while the scope lives. Scopes
// nest.
class HostMirrorScope {
 public:
  explicit HostMirrorScope(std::vector<std::pair<Tensor, Tensor>> pairs);
  ~HostMirrorScope();
  HostMirrorScope(const HostMirrorScope&) = delete;
  HostMirrorScope& operator=(const HostMirrorScope&) = delete;

 private:
  friend Tensor host_mirror(const Tensor& t);
  std::vector<std::pair<Tensor, Tensor>> pairs_;
  const HostMirrorScope* outer_;
};

// The host copy of `t` an enclosing scope declared, with t's shape: t must be contiguous, on a
// device, and view exactly the elements of a declared device tensor (that tensor or a reshape of
// it). Otherwise an undefined tensor: the caller copies from the device as before.
Tensor host_mirror(const Tensor& t);

}  // namespace define::kernels
