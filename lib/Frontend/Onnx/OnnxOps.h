// Internal to the ONNX front end: values, node access, and the op mapping
// (ONNX op → maxc ops). See OnnxImporter.cpp for how they are used.
#pragma once

#include "maxc/IR/Dim.h"
#include "maxc/IR/HostTensor.h"
#include "maxc/Tensor/Tensor.h"

#include "onnx.pb.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace maxc::onnx_import {

/// An ONNX value during import.
struct Val {
  enum class Kind { missing, traced, known, sym } kind = Kind::missing;
  Tensor tensor;             // traced
  HostTensor data;           // known
  std::vector<Dim> dims;     // sym: the elements (integer values)
  bool scalar = false;       // sym: rank 0 (else rank 1)
  DType dtype = DType::i64;  // sym: its integer dtype
  std::string initializer;   // known: the initializer it is (a named weight)
  std::string graph_input;   // traced: the graph input it is
  // traced, a KV-cache input made model state (--state): `tensor` is its
  // logical value (a view of the buffer's first rows), `state_buffer` the
  // buffer [capacity, the other dims] its rows grow along `state_axis` in.
  Tensor state_buffer;
  int64_t state_axis = -1;
};

class OnnxNode;

/// What the op mapping needs from the importer.
class NodeHost {
public:
  virtual ~NodeHost() = default;
  /// The value as a tensor of the current context (throws for a sym value
  /// with symbolic elements).
  virtual Tensor tensor_of(const Val &v, const OnnxNode &n, size_t index) = 0;
  /// Throws OnnxNotFoldable: this node needs input `index`'s value, which is
  /// only known at run time (recording graph inputs that could be pinned).
  [[noreturn]] virtual void needs_value(const Val &v, const OnnxNode &n, size_t index) = 0;
  /// A dim whose value is the integer scalar `value`, computed at run time
  /// from input `index` of `n` (a shape, starts, k ... known only then):
  /// a new symbol bound at run time (ops::bind_dim), named after the node's
  /// output and `label`. Its bound: --max-dim SYMBOL=N or --max-dim
  /// INPUT=N, else `bound` (what the op implies), else element `element`
  /// of the value the run will give the graph input (maxc run); none is an
  /// error naming --max-dim.
  /// The value the run will give the graph input `v` is (maxc run's file).
  virtual std::optional<HostTensor> run_value(const Val &v) = 0;
  virtual Dim runtime_dim(const OnnxNode &n, size_t index, const Tensor &value, const std::string &label,
                          std::optional<int64_t> bound, int64_t element) = 0;
  /// The value the importer derived from the initializer `value` for the
  /// op mapping (`what`: "colsum:<b_zp>", a MatMulInteger weight's column
  /// sums with that zero point, integer_gemm_column_sums), as the current context sees it: a block
  /// parameter inside a repeated block's body, where the weight is one
  /// too. nullptr where none was derived.
  virtual const Val *companion(const std::string &value, const std::string &what) = 0;
};

/// One node: inputs, attributes, typed accessors.
class OnnxNode {
public:
  OnnxNode(const onnx::NodeProto &proto, int64_t opset, std::vector<const Val *> inputs, NodeHost &host)
      : proto_(proto), opset_(opset), inputs_(std::move(inputs)), host_(host) {}
  const std::string &op() const { return proto_.op_type(); }
  int64_t opset() const { return opset_; }
  const onnx::NodeProto &proto() const { return proto_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return static_cast<size_t>(proto_.output_size()); }
  /// Output i is requested (present and named).
  bool wants_output(size_t i) const { return i < num_outputs() && !proto_.output(static_cast<int>(i)).empty(); }
  bool has(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Val &val(size_t i) const;
  std::string input_name(size_t i) const {
    return i < static_cast<size_t>(proto_.input_size()) ? proto_.input(static_cast<int>(i)) : std::string();
  }
  /// Input i as a tensor (required).
  Tensor in(size_t i) const;
  /// Input i's data at import time (known or fully static sym).
  HostTensor known(size_t i) const;
  std::vector<int64_t> ints(size_t i) const;
  std::vector<double> reals(size_t i) const;
  /// Input i as dims (integer known or sym values), e.g. a Reshape target.
  std::vector<Dim> dims(size_t i) const;
  /// Input i is a traced integer tensor (values known only at run time).
  bool is_runtime(size_t i) const { return has(i) && val(i).kind == Val::Kind::traced; }
  /// Input i as dims, elements known only at run time included: each is a
  /// symbol bound at run time (NodeHost::runtime_dim) with the bound
  /// `bound(k)` gives for element k (nullopt: none from the op).
  std::vector<Dim> runtime_dims(size_t i, const std::function<std::optional<int64_t>(size_t)> &bound = {}) const;
  /// Input i's value if known at import, else the value the run will give
  /// the graph input it is (maxc run's file; NodeHost::run_value).
  std::optional<HostTensor> value_hint(size_t i) const;
  /// Element k of the rank-0/1 integer input i as an i64 scalar tensor.
  Tensor element(size_t i, int64_t k) const;
  /// A run-time dim of value `value` (an integer scalar computed from input
  /// i): NodeHost::runtime_dim.
  Dim bind(size_t i, const Tensor &value, const std::string &label, std::optional<int64_t> bound,
           int64_t element = -1) const {
    return host_.runtime_dim(*this, i, value, label, bound, element);
  }

  /// NodeHost::companion of input i.
  const Val *companion(size_t i, const std::string &what) const {
    return has(i) ? host_.companion(input_name(i), what) : nullptr;
  }
  /// A value of the current context (NodeHost::tensor_of), reported as
  /// input i where it fails.
  Tensor tensor(const Val &v, size_t i) const { return host_.tensor_of(v, *this, i); }

  /// A node of the same host and opset as this one, of `proto` (which must
  /// outlive it) reading `inputs`: one op mapped through another's mapping
  /// (com.microsoft DynamicQuantizeLSTM as an LSTM on dequantized weights).
  OnnxNode with(const onnx::NodeProto &proto, std::vector<const Val *> inputs) const {
    return OnnxNode(proto, opset_, std::move(inputs), host_);
  }

  const onnx::AttributeProto *attr(const std::string &name) const;
  bool has_attr(const std::string &name) const { return attr(name) != nullptr; }
  int64_t attr_int(const std::string &name, int64_t fallback) const;
  double attr_float(const std::string &name, double fallback) const;
  std::string attr_string(const std::string &name, const std::string &fallback) const;
  std::vector<int64_t> attr_ints(const std::string &name, std::vector<int64_t> fallback = {}) const;
  std::vector<double> attr_floats(const std::string &name) const;

private:
  const onnx::NodeProto &proto_;
  int64_t opset_;
  std::vector<const Val *> inputs_;
  NodeHost &host_;
};

bool is_supported_op(const std::string &op);
/// Ops that may be evaluated at import time when their inputs are known.
bool is_deterministic(const std::string &op);
/// Every op is_supported_op accepts, sorted (for docs and the runner).
std::vector<std::string> supported_ops();

/// Ops computed from shapes alone (Shape, Size, Constant, ...): their
/// results as known or sym values; nullopt for other ops.
std::optional<std::vector<Val>> fold_shape_op(const OnnxNode &node);
/// Arithmetic on sym values (Gather, Concat, Add, Equal, ... on dims);
/// nullopt when the node is not such a computation.
std::optional<std::vector<Val>> fold_symbolic(const OnnxNode &node);
/// Records the node through maxc ops in the current context: one tensor per
/// output (null tensors for outputs it does not compute).
std::vector<Tensor> map_node(const OnnxNode &node);

/// d's value; a symbolic d is an error naming `what` (pin it with --dim).
int64_t static_dim(const Dim &d, const std::string &what);

/// A scalar constant of `dtype` (shorthand in the importer's compositions).
Tensor sc(double v, DType dtype);
/// A dim as an i64 scalar: a constant when static, its run-time value
/// (`dim_values`) else.
Tensor dim_scalar(const Dim &d);

/// A float attribute of a unary op (alpha, beta, ...) by name, or `fallback`.
using FloatAttr = std::function<double(const std::string &name, double fallback)>;
/// The elementwise unary op `op` (ONNX name: Relu, Elu, HardSigmoid, ...) on x,
/// its float attributes read through `attr` (the node's own, or an RNN's
/// activation_alpha/beta); `node` for the rest (IsInf's flags).
Tensor unary_op(const std::string &op, const Tensor &x, const OnnxNode &node, const FloatAttr &attr);
/// The pieces concatenated along `axis` as a tree of concats of at most 16
/// each (OnnxRecurrent.cpp).
Tensor concat_tree(std::vector<Tensor> xs, int64_t axis);
/// LSTM, GRU and RNN, unrolled over a static sequence length (OnnxRecurrent.cpp).
std::vector<Tensor> recurrent(const OnnxNode &node);
/// Conv's mapping on the given operands (1-D and 2-D): the node's
/// kernel_shape, strides, pads, auto_pad, dilations and group.
/// `exact`: the conv2d's `exact` attribute (integer-valued operands whose
/// partial sums the dtype holds exactly: no Winograd).
Tensor conv_of(const OnnxNode &node, const Tensor &x, const Tensor &w, const std::optional<Tensor> &bias,
               bool exact = false);
/// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
/// ConvInteger, QLinearMatMul and QLinearConv (OnnxQuantized.cpp).
bool is_quantized_op(const std::string &op);
std::vector<Tensor> quantized(const OnnxNode &node);
/// sum_k (b[k, n] - zp[n]) for a MatMulInteger weight b [K, N] (u8 or i8)
/// and its zero point (none: 0; one element, or N), as i32 [N]: the
/// integer GEMM's zero-point correction (a_zp * colsum), which a repeated
/// block receives per instance as a parameter (NodeHost::companion "colsum")
/// so that its weights can stay parameters. nullopt for other operands.
std::optional<HostTensor> integer_gemm_column_sums(const HostTensor &b, const HostTensor *zp);
/// ONNX Runtime's contrib integer ops QLinearAdd, QLinearGlobalAveragePool
/// and QGemm, with its CPU arithmetic (OnnxQuantized.cpp).
bool is_quantized_contrib_op(const std::string &op);
std::vector<Tensor> quantized_contrib(const OnnxNode &node);
/// QLinearAdd with these constants is computed exactly by maxc (its f64
/// emulation of ONNX Runtime's FMA kernel; OnnxQuantized.cpp).
bool qlinear_add_exact(float a_scale, int64_t a_zp, float b_scale, int64_t b_zp, float c_scale, int64_t c_zp,
                       bool u8);
/// ONNX Runtime's QDQ groups (DQ → Conv/MatMul/Gemm/Add/GlobalAveragePool
/// → Q, DQ → MaxPool/Reshape/... → Q) rewritten into the integer ops it runs
/// them as, before import (OnnxQdq.cpp); returns the number of groups.
int fuse_qdq(onnx::ModelProto &model, const std::string &model_dir);
/// Ops composed of core ops (OnnxComposite.cpp): Asin ... Atanh, the signal
/// windows, OneHot, GatherND, LRN, ReverseSequence.
bool is_composite_op(const std::string &op);
std::vector<Tensor> composite(const OnnxNode &node);
/// ONNX Runtime's contrib ops maxc imports (OnnxContrib.cpp): com.microsoft
/// MatMulNBits.
bool is_contrib_op(const std::string &domain, const std::string &op);
std::vector<Tensor> contrib(const OnnxNode &node);

} // namespace maxc::onnx_import
