#include "core/storage.h"

namespace define {

Storage::Storage(std::size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = device_interface(device.type).allocate(nbytes, device.index);
}

Storage::~Storage() {
  if (data_) device_interface(device_.type).deallocate(data_, nbytes_, device_.index);
}

}  // namespace define
