// Umbrella header: the maxc C++ API.
#pragma once

#include "maxc/IR/Attribute.h"
#include "maxc/IR/DType.h"
#include "maxc/IR/Dim.h"
#include "maxc/IR/Graph.h"
#include "maxc/IR/HostTensor.h"
#include "maxc/IR/Printer.h"
#include "maxc/IR/TensorType.h"
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/EagerRealizationContext.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Realization/RealizationContext.h"
#include "maxc/Support/Error.h"
#include "maxc/Tensor/Tensor.h"
#include "maxc/Tensor/TensorTree.h"
