// The `recurrence` op's cell description, shared by its reference kernel
// (lib/Ops/Recurrence.cpp), its decomposition into unrolled steps
// (lib/Transforms/DecomposeRecurrence.cpp), the CPU kernel
// (lib/Codegen/Cpu/RecurrenceEmitter.cpp) and the ONNX importer.
//
// recurrence: one direction of an LSTM, GRU or RNN layer over a sequence,
// after the input projection (X @ W^T + biases, one GEMM for every step):
//   operands  proj [S, B, G*H]   (G = 4 lstm (gates i o f c), 3 gru (z r h),
//                                 1 rnn; biases added, except GRU
//                                 linear_before_reset's Rb of the h gate)
//             r    [G*H/K, H, K] (R^T in column blocks: r[b, k, j] =
//                                 R[b*K + j, k]; K divides H)
//             h0   [B, H]
//             c0   [B, H]        (lstm)
//             p    [3*H]         (lstm with `peephole`: P's i, o, f parts)
//             rbh  [H]           (gru with linear_before_reset)
//             lens [B] integer   (with `masked`: rows past their length keep
//                                 their state, their Y is zero)
//   results   Y [S, B, H], Y_h [B, H], Y_c [B, H] (lstm)
// S may be symbolic. `reverse` runs the steps from S - 1 down (with lens,
// from each row's own last step).
#pragma once

#include <string>
#include <vector>

namespace maxc {
class Attrs;
}

namespace maxc::recurrence {

enum class Cell { lstm, gru, rnn };

/// The activation functions ONNX's recurrent ops list.
enum class Act { relu, tanh, sigmoid, affine, leaky_relu, thresholded_relu, scaled_tanh, hard_sigmoid, elu, softsign, softplus };

struct Activation {
  Act act = Act::tanh;
  double alpha = 0, beta = 0;
};

/// The ONNX spelling ("Sigmoid", "LeakyRelu", ...) of an activation and back
/// (case-insensitive; false when unknown).
const char *act_name(Act a);
bool parse_act(const std::string &name, Act *out);
/// Every name, comma-separated (for error messages).
std::string act_names();
/// Whether the activation reads alpha / beta, and their ONNX defaults.
bool act_has_alpha(Act a);
bool act_has_beta(Act a);
double act_default_alpha(Act a);
double act_default_beta(Act a);
/// The function in double (the reference's).
double act_apply(const Activation &a, double x);

/// Gates per cell: 4, 3, 1; activations per cell: 3, 2, 1.
int gates_of(Cell c);
size_t acts_of(Cell c);
const char *cell_name(Cell c);
Cell parse_cell(const std::string &name); // throws maxc::Error on anything else

/// A recurrence node's activations (attribute `activations`, comma-separated
/// ONNX names, empty: the cell's defaults) with their alpha and beta (the
/// `activation_alpha`/`activation_beta` lists, else the defaults). Throws
/// maxc::Error (InvalidAttribute) for an unknown name or a wrong count.
std::vector<Activation> node_activations(const Attrs &attrs, Cell cell);

/// The column block K of r for hidden size H: the largest divisor of H that
/// is at most 128 (the CPU kernel keeps K accumulators in registers).
long block_of(long hidden);

} // namespace maxc::recurrence
