// One registration function per op family; each lives in its own file.
#pragma once

namespace maxc {
class OpRegistry;
void register_elementwise_ops(OpRegistry &registry);   // Elementwise.cpp: unary, binary, compare, where, cast
void register_creation_ops(OpRegistry &registry);      // Creation.cpp: constant, full, iota, range
void register_reduction_ops(OpRegistry &registry);     // Reduction.cpp: sum mean max min prod argmax argmin softmax log_softmax
void register_normalization_ops(OpRegistry &registry); // Normalization.cpp: layer_norm rms_norm batch_norm
void register_linalg_ops(OpRegistry &registry);        // Linalg.cpp: matmul linear
void register_convolution_ops(OpRegistry &registry);   // Convolution.cpp: conv2d conv_transpose2d pools
void register_shape_ops(OpRegistry &registry);         // Shape.cpp: reshape transpose ... gather pad tile
void register_structural_ops(OpRegistry &registry);
void register_state_ops(OpRegistry &registry);         // State.cpp: buffer_prefix buffer_append (model state)
void register_recurrence_ops(OpRegistry &registry);  // Recurrence.cpp: recurrence (LSTM/GRU/RNN; Ops/Recurrence.h)
void register_quantized_ops(OpRegistry &registry);     // MatmulNbits.cpp: matmul_nbits (weight-only quantized)
void register_top_k_ops(OpRegistry &registry);         // TopK.cpp: top_k (Ops/TopK.h)
void register_attention_ops(OpRegistry &registry);     // Attention.cpp: attention (fused; Transforms/FuseAttention)    // Structural.cpp: call allreduce_sum
} // namespace maxc
