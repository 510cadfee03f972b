// Decompose: rewrites composite ops into the primitives the code generators
// lower (softmax → max, sub, exp, sum, div; layer_norm → mean, ...; linear →
// matmul + add; embedding → gather; global_avg_pool2d → mean). f16/bf16
// normalizations compute in f32 and cast back, as the reference does in
// higher precision. Subgraphs are decomposed too, keeping their names, so
// dedup survives; their parameters bound to constants at every call site get
// the compile-time weight layout of root constants (MatmulLayout.h). A
// batch_norm of a constant-weight conv2d folds into the conv's weights
// (FoldBatchNorm.h).
#pragma once

#include "maxc/IR/Graph.h"

#include <memory>

namespace maxc {

std::unique_ptr<Graph> decompose(const Graph &graph);

/// True for ops decompose() rewrites (code generators never see them).
bool is_composite_op(const std::string &op);

} // namespace maxc
