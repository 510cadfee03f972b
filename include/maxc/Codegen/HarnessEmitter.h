// Small C programs around a compiled model (`maxc compile --emit
// test-harness,bench-harness`): tfcompile's gen_test / gen_benchmark idea,
// without a build system. Both are single C99 files that declare the model's
// entry points themselves (no header needed) and link with the object:
//
//   cc -O2 NAME_test.c NAME.o -lm -o NAME_test
//   ./NAME_test IN1.npy ... EXPECTED_OUT1.npy ... [--rtol R] [--atol A] [--dim NAME=N]
//     loads .npy inputs (v1-3, little-endian, C order; dtype and static dims
//     checked against the model, symbolic dims taken from the inputs), runs
//     NAME_run, compares every output with the expected .npy (|a-e| <= atol +
//     rtol*|e|, per-dtype defaults) and prints PASS or FAIL with the largest
//     errors. Exit 0 PASS, 1 FAIL, 2 usage or file problems.
//
//   cc -O2 NAME_bench.c NAME.o -lm -o NAME_bench
//   ./NAME_bench [-n N] [--warmup W] [--dim NAME=N]
//     runs the model W (10) + N (100) times on deterministic pseudo-random
//     inputs (symbolic dims 1 unless given) and prints p50/p90/p99 latency in
//     milliseconds and runs per second.
//
// bf16 has no NumPy dtype: the test harness reads bf16 inputs from float32
// (.npy '<f4', rounded to nearest even) and compares bf16 outputs with
// float32 expectations.
#pragma once

#include "maxc/Codegen/ModelAbi.h"

#include <string>

namespace maxc {

/// The C prototype of NAME_run, with parameter names:
/// "int32_t mlp_run(const float *x, float *logits, int64_t batch, void *workspace)".
/// With `gpu`, the amdgpu backend's: "int32_t mlp_run(mlp_context *ctx, ..., void *workspace, void *stream)".
std::string c_run_prototype(const ModelInterface &interface, bool gpu = false);

/// NAME_test.c. Throws maxc::Error (Internal) for an interface it cannot
/// describe (a shape using a symbol that is not one of the interface's dims).
std::string emit_test_harness(const ModelInterface &interface);

/// NAME_bench.c. Throws like emit_test_harness.
std::string emit_bench_harness(const ModelInterface &interface);

} // namespace maxc
