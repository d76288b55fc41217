// Crash points: named places where a test can make the process die as a power cut or `kill -9`
// would, to prove that what was saved survives (tests/cli/crash_safety_test.cpp).
//
// DEFINE_CRASH_AT="<point>:<n>" kills the process with SIGKILL the n-th time (from 1) it reaches
// crash_point("<point>"). Without the variable a crash point is one comparison.
// Points: "atomic_write" (nn/safetensors.cpp: half of a file's bytes are in its temporary file),
// "train_step" (train/training_loop.cpp: before each training step).
#pragma once

namespace define {

void crash_point(const char* name);

}  // namespace define
