// Every differentiable op of define, in one include. Op families live in their own headers
// (forward and backward formulas side by side in the matching .cpp).
#pragma once

#if __has_include("autograd/elementwise.h")  // TEMP while families land
#include "autograd/elementwise.h"
#endif
#if __has_include("autograd/embedding.h")  // TEMP while families land
#include "autograd/embedding.h"
#endif
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#if __has_include("autograd/index.h")  // TEMP while families land
#include "autograd/index.h"
#endif
#if __has_include("autograd/layer_norm.h")  // TEMP while families land
#include "autograd/layer_norm.h"
#endif
#if __has_include("autograd/matmul.h")  // TEMP while families land
#include "autograd/matmul.h"
#endif
#if __has_include("autograd/dropout.h")  // TEMP while families land
#include "autograd/dropout.h"
#endif
#if __has_include("autograd/reduce.h")  // TEMP while families land
#include "autograd/reduce.h"
#endif
#if __has_include("autograd/softmax.h")  // TEMP while families land
#include "autograd/softmax.h"
#endif
#include "autograd/views.h"
#include "core/factory.h"
#include "core/tensor.h"
