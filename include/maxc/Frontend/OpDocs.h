// The op reference (docs/ops.md), generated from the op registry: operand
// order and names, the dtypes each operand accepts (found by asking each
// op's verifier, so they cannot drift from the code), result dtypes and
// attributes. `maxc ops` prints the same signatures.
#pragma once

#include <string>

namespace maxc {

/// "embedding(table: T[V,D], ids: I[...]) -> T[...,D]  T: f16 bf16 f32 f64 i8 i32 i64 bool; I: i8 i32 i64",
/// one line; "" for an op without a documented signature.
std::string op_signature(const std::string &op);

/// The whole of docs/ops.md.
std::string ops_markdown();

} // namespace maxc
