// Denormal floats flushed to zero on the CPU, for the programs (`define`, the training benchmarks).
//
// A float below 1.2e-38 (double: 2.2e-308) is denormal, and on x86 (Intel cores at least) an
// arithmetic instruction that reads or makes one can take a microcode assist, dozens of times slower.
// Training makes them: as an LSTM's gates saturate, their derivatives (and so the gate gradients
// that the weight-gradient GEMM reads) fall below that range, and an LSTM slowed to about half its
// speed as it trained; flushed, it kept its speed with the same losses (docs/results.md). Flushing
// changes results only where a value would have been smaller than 1.2e-38 in magnitude. PyTorch
// offers the same switch as torch.set_flush_denormal(True), which the training benchmarks' peers call.
//
// The switch is the MXCSR register's FTZ (results) and DAZ (inputs) bits, which belong to each
// thread: it is set on the calling thread and on every OpenMP worker, and workers created later
// copy it from the thread that creates them. No-op on other architectures.
#pragma once

namespace define::kernels::cpu {

// Sets (on = true) or clears flushing on the calling thread and the OpenMP workers of a region of
// omp_get_max_threads() threads. Call first thing in main(), after prefer_passive_omp_wait().
void flush_denormals(bool on);

// Whether the calling thread flushes denormals (both bits set).
bool denormals_flushed();

}  // namespace define::kernels::cpu
