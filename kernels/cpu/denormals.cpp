#include "kernels/cpu/denormals.h"

#include <omp.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define DEFINE_HAS_MXCSR 1
#endif

namespace define::kernels::cpu {
namespace {

#ifdef DEFINE_HAS_MXCSR
constexpr unsigned kFlushBits = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)
#endif

void set_this_thread(bool on) {
#ifdef DEFINE_HAS_MXCSR
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(on ? (csr | kFlushBits) : (csr & ~kFlushBits));
#else
  (void)on;
#endif
}

}  // namespace

void flush_denormals(bool on) {
  set_this_thread(on);
#pragma omp parallel
  set_this_thread(on);
}

bool denormals_flushed() {
#ifdef DEFINE_HAS_MXCSR
  return (_mm_getcsr() & kFlushBits) == kFlushBits;
#else
  return false;
#endif
}

}  // namespace define::kernels::cpu
