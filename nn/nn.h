// Every nn module and layer of define, in one include.
#pragma once

#include "nn/container.h"
#include "nn/define_unit.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/embedding_dropout.h"
#include "nn/glt.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/locked_dropout.h"
#include "nn/module.h"
#include "nn/projective_embedding.h"
#include "nn/weight_drop.h"
