// Tensor: a handle to shared storage plus view metadata (shape, strides, element offset, dtype).
// Views (reshape, transpose, slices, expand, ...) share storage and never copy; see
// autograd/views.h for the differentiable view functions and core/factory.h for constructors.
//
// Tensor methods here never record autograd history: they are the raw metadata machinery.
// Differentiable operations are the free functions of the autograd layer (define.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/device.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace define {

class Node;  // autograd graph node, defined in autograd/node.h
class Tensor;

// Autograd bookkeeping, allocated only for tensors that take part in differentiation.
struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<class TensorImpl> grad;  // accumulated gradient (leaf tensors, or retained)
  std::shared_ptr<Node> grad_fn;           // producer node for non-leaf tensors
  std::uint32_t output_nr = 0;             // which output of grad_fn this tensor is
  std::weak_ptr<Node> grad_accumulator;    // the leaf's AccumulateGrad node, created on demand
  bool retains_grad = false;               // non-leaf that keeps its .grad
};

class TensorImpl {
 public:
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  std::int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  std::shared_ptr<AutogradMeta> autograd;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  const Shape& shape() const { return checked().shape; }
  const Strides& strides() const { return checked().strides; }
  std::int64_t size(std::int64_t dim) const;
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t offset() const { return checked().offset; }
  std::int64_t dim() const { return static_cast<std::int64_t>(checked().shape.size()); }
  std::int64_t numel() const { return numel_of(checked().shape); }
  DType dtype() const { return checked().dtype; }
  Device device() const { return checked().storage->device(); }
  bool is_contiguous() const { return define::is_contiguous(shape(), strides()); }
  const std::shared_ptr<Storage>& storage() const { return checked().storage; }
  bool shares_storage_with(const Tensor& o) const { return storage() == o.storage(); }
  // True when no other handle can see these elements: this is the only handle on its metadata,
  // that metadata the only view of its storage, it covers the whole storage contiguously, and it
  // carries no autograd history. Such a tensor can be taken over or written in place (the
  // backward engine adopts gradients that pass this instead of copying them).
  bool is_exclusive() const;

  // Pointer to the first element (device pointer for CUDA tensors). Checks the dtype.
  template <typename T>
  T* data() const {
    if (dtype_of_v<T> != dtype())
      fail("Tensor::data", "requested {} but the tensor is {}", dtype_name(dtype_of_v<T>),
           dtype_name(dtype()));
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  // In-place modification counter shared by all views of the storage.
  std::uint64_t version() const { return storage()->version(); }
  void bump_version() const { storage()->bump_version(); }

  // Autograd metadata (raw access; the autograd layer gives it meaning).
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on = true);
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  std::shared_ptr<Node> grad_fn() const;
  AutogradMeta& autograd_meta() const;  // creates the metadata on first use
  bool has_autograd_meta() const { return impl_ && impl_->autograd != nullptr; }

  // A new tensor over the same storage with the given view metadata and no autograd history.
  Tensor as_strided(const Shape& shape, const Strides& strides, std::int64_t offset) const;
  // Same data, fresh metadata, no autograd history (the raw half of detach()).
  Tensor alias() const { return as_strided(shape(), strides(), offset()); }

  // Host-side element access (copies device tensors to the host first).
  template <typename T> std::vector<T> to_vector() const;
  template <typename T> T item() const;
  double item_double() const;  // any dtype, as double

  std::string str() const;  // shape, dtype, device and (for small tensors) values

 private:
  const TensorImpl& checked() const {
    if (!impl_) fail("Tensor", "operation on an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

// Element-size-generic strided copy on host memory: dst (contiguous) <- src (any strides).
void copy_strided_host(void* dst, const void* src, const Shape& shape, const Strides& src_strides,
                       std::size_t elem_size);

}  // namespace define
