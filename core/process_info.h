// Facts about this process that benchmarks, tests and the training log all report.
#pragma once

#include <cstdint>

namespace define {

// Resident-set high-water mark of this process (VmHWM of /proc/self/status), in bytes; 0 where
// unavailable (not Linux).
std::int64_t peak_rss_bytes();

}  // namespace define
