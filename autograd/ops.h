// Every differentiable op of define, in one include. Op families live in their own headers
// (forward and backward formulas side by side in the matching .cpp).
#pragma once

#include "autograd/adaptive_softmax.h"
#include "autograd/attention.h"
#include "autograd/elementwise.h"
#include "autograd/embedding.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/grouped_linear.h"
#include "autograd/index.h"
#include "autograd/layer_norm.h"
#include "autograd/lstm.h"
#include "autograd/matmul.h"
#include "autograd/dropout.h"
#include "autograd/reduce.h"
#include "autograd/rel_attention.h"
#include "autograd/softmax.h"
#include "autograd/split_mix.h"
#include "autograd/views.h"
#include "core/factory.h"
#include "core/tensor.h"
