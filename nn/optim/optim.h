// Everything of nn/optim in one include: optimizers, clipping and learning-rate schedules.
#pragma once

#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/optim/ntasgd.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/schedule.h"
#include "nn/optim/sgd.h"
