// Precision policy: f16 and bf16 computed in f32 (the CPU backend's, which
// has f32 kernels only — GEMM panels, convolutions, row kernels — and
// computed 16-bit models element by element: an f16 segmentation model ran
// 60× slower than ONNX Runtime, which on the CPU also runs such nodes in
// f32 between casts).
//
// promote_low_precision rebuilds a graph (its subgraph bodies too, keeping
// their names, so dedup survives) with every f16/bf16 value, constant and
// dtype attribute made f32: 16-bit constants are widened once at compile
// time (exactly: every f16/bf16 value is an f32), the root's 16-bit inputs
// are cast to f32 where they enter and its 16-bit outputs cast back where
// they leave, so the interface (the header's types) does not change.
// Values between ops stay f32: the roundings to 16 bits the model spells
// between ops are skipped, which makes results closer to the exact ones,
// not bit-identical to a 16-bit evaluation (DESIGN.md "precision policy").
#pragma once

#include "maxc/IR/Graph.h"

#include <memory>

namespace maxc {

/// `graph` with f16/bf16 computed in f32 as above, or null when it has no
/// 16-bit float value, or when it cannot be rebuilt that way (a graph whose
/// nodes define symbols needs its node order kept: left as it is).
std::unique_ptr<Graph> promote_low_precision(const Graph &graph);

} // namespace maxc
