// ONNX Loop and Scan → maxc ops, unrolled at import like the recurrent
// layers (OnnxRecurrent.cpp) when the number of iterations is known then
// (Loop: a trip count that is a constant or folds, and conditions that fold
// in every iteration; Scan: a static sequence length). A Loop whose trip
// count or condition is known only at run time (or that runs past
// kMaxIterations) becomes one `loop` node instead (run_time_loop), without
// scan outputs.
// Each iteration runs the body subgraph through the importer (BodyHost). In
// a graph trace, an iteration that takes any traced value is a subgraph call
// whose arguments are the traced loop-carried values, the traced outer
// values the body captures, the iteration number (Loop) and, for each scan
// input, the whole input with the iteration's index (the body gathers its
// slice): iterations of one shape share one definition, so the compiler sees
// one body, not N. A body that needs the iteration number's value at import
// (a Slice bound, say) is retraced with it as a constant per iteration.
// Iterations on known values alone fold at import.
#include "OnnxLoop.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Realization/EagerRealizationContext.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Support/Error.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace maxc::onnx_import {
namespace {

/// The most iterations a Loop or Scan is unrolled to.
constexpr int64_t kMaxIterations = 4096;

[[noreturn]] void bad(ErrorCode code, const std::string &what) { throw Error(code, what); }

const onnx::GraphProto &body_of(const OnnxNode &node) {
  const onnx::AttributeProto *a = node.attr("body");
  if (!a || !a->has_g())
    bad(ErrorCode::OnnxGraph, node.op() + " has no body graph");
  return a->g();
}

/// A scalar integer or boolean value known at import.
std::optional<int64_t> known_scalar(const Val &v) {
  if (v.kind == Val::Kind::known && v.data.numel() == 1)
    return is_float(v.data.dtype()) ? int64_t(v.data.get_f64(0) != 0) : v.data.get_i64(0);
  if (v.kind == Val::Kind::sym && v.dims.size() == 1 && v.dims[0].is_static())
    return v.dims[0].value();
  return std::nullopt;
}

Val known_val(HostTensor data) {
  Val v;
  v.kind = Val::Kind::known;
  v.data = std::move(data);
  return v;
}

Val traced_val(Tensor t) {
  Val v;
  v.kind = Val::Kind::traced;
  v.tensor = std::move(t);
  return v;
}

Val known_scalar_val(DType dtype, int64_t value) {
  HostTensor t(dtype, {});
  t.set_i64(0, value);
  return known_val(std::move(t));
}

Shape shape_of(const Val &v) {
  if (v.kind == Val::Kind::known)
    return Shape(v.data.shape().begin(), v.data.shape().end());
  if (v.kind == Val::Kind::sym)
    return v.scalar ? Shape{} : Shape{Dim(int64_t(v.dims.size()))};
  return v.tensor.shape();
}

int64_t normalized_axis(int64_t axis, int64_t rank, const std::string &what) {
  if (axis < -rank || axis >= rank)
    bad(ErrorCode::OnnxAttribute, what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

/// x's slice `index` along `axis` (the axis removed): known values fold.
Val slice_at(const Val &x, int64_t index, int64_t axis, BodyHost &host) {
  Tensor idx = Tensor::from_i64(DType::i64, {}, {index});
  if (x.kind == Val::Kind::known) {
    EagerRealizationContext eager;
    return known_val(ops::gather(Tensor::from_host(x.data), idx, axis).realize().host());
  }
  return traced_val(ops::gather(host.tensor(x), idx, axis));
}

/// The pieces stacked along a new axis `axis` (in order): known pieces fold.
Val stack(const std::vector<Val> &pieces, int64_t axis, BodyHost &host) {
  bool known = std::all_of(pieces.begin(), pieces.end(), [](const Val &v) { return v.kind == Val::Kind::known; });
  std::vector<Tensor> parts;
  if (known) {
    EagerRealizationContext eager;
    for (const Val &v : pieces)
      parts.push_back(ops::unsqueeze(Tensor::from_host(v.data), {axis}));
    return known_val(concat_tree(parts, axis).realize().host());
  }
  for (const Val &v : pieces)
    parts.push_back(host.tensor(v));
  const Shape piece = parts.at(0).shape();
  for (const Tensor &p : parts)
    if (p.shape() != piece)
      bad(ErrorCode::OnnxAttribute, "the iterations' scan outputs have different shapes (" + shape_to_string(piece) +
                                        " and " + shape_to_string(p.shape()) + ")");
  if (axis == int64_t(piece.size())) { // a new last axis: each piece unsqueezed
    for (Tensor &p : parts)
      p = ops::unsqueeze(p, {axis});
    return traced_val(concat_tree(parts, axis));
  }
  // Concatenated along `axis`, then that axis split in (pieces, its size):
  // the same elements without a reshape per piece.
  Shape shape = piece;
  shape.insert(shape.begin() + axis, Dim(int64_t(parts.size())));
  return traced_val(ops::reshape(concat_tree(parts, axis), shape));
}

/// One body input of an iteration.
struct BodyIn {
  enum class Kind { plain, counter, gather } kind = Kind::plain;
  Val val;           // plain: the value; gather: the whole scan input
  int64_t index = 0; // counter: the iteration number; gather: the slice
  int64_t axis = 0;  // gather: the scan axis
};

/// Runs one iteration of `body`: a subgraph call where a graph is traced and
/// any input or capture is traced, else in place (folding known values).
/// `counter_as_arg`: a counter input is a call argument (else a constant).
std::vector<Val> run_iteration(BodyHost &host, const onnx::GraphProto &body, const std::vector<BodyIn> &inputs,
                               const std::vector<std::pair<std::string, Tensor>> &captures, bool counter_as_arg,
                               const std::string &name, const std::string &where) {
  auto *graph_ctx = dynamic_cast<GraphRealizationContext *>(RealizationContext::current());
  bool any_traced = !captures.empty();
  for (const BodyIn &in : inputs)
    any_traced = any_traced || in.val.kind == Val::Kind::traced;
  if (!graph_ctx || !any_traced) {
    std::vector<Val> vals;
    for (const BodyIn &in : inputs)
      vals.push_back(in.kind == BodyIn::Kind::plain     ? in.val
                     : in.kind == BodyIn::Kind::counter ? known_scalar_val(DType::i64, in.index)
                                                        : slice_at(in.val, in.index, in.axis, host));
    return host.run_body(body, vals, {}, false, where);
  }
  // Arguments: traced plain inputs, counters (as arguments), gathers (the
  // source and the index), then the captures.
  std::vector<Tensor> args;
  for (const BodyIn &in : inputs) {
    if (in.kind == BodyIn::Kind::plain && in.val.kind == Val::Kind::traced)
      args.push_back(in.val.tensor);
    else if (in.kind == BodyIn::Kind::counter && counter_as_arg)
      args.push_back(Tensor::from_i64(DType::i64, {}, {in.index}));
    else if (in.kind == BodyIn::Kind::gather) {
      args.push_back(host.tensor(in.val));
      args.push_back(Tensor::from_i64(DType::i64, {}, {in.index}));
    }
  }
  for (const auto &c : captures)
    args.push_back(c.second);
  std::vector<Val> outs;
  std::vector<size_t> traced_outs; // which outputs the call returns
  SubgraphBody fn = [&](GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &) {
    size_t k = 0;
    std::vector<Val> vals;
    for (const BodyIn &in : inputs) {
      if (in.kind == BodyIn::Kind::plain)
        vals.push_back(in.val.kind == Val::Kind::traced ? traced_val(a[k++]) : in.val);
      else if (in.kind == BodyIn::Kind::counter)
        vals.push_back(counter_as_arg ? traced_val(a[k++])
                                      : known_scalar_val(DType::i64, in.index));
      else {
        vals.push_back(traced_val(ops::gather(a[k], a[k + 1], in.axis)));
        k += 2;
      }
    }
    std::map<std::string, Val> overrides;
    for (const auto &c : captures)
      overrides[c.first] = traced_val(a[k++]);
    outs = host.run_body(body, vals, overrides, true, where);
    traced_outs.clear();
    std::vector<TensorTree> leaves;
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].kind == Val::Kind::traced) {
        traced_outs.push_back(i);
        leaves.emplace_back(outs[i].tensor);
      }
    return TensorTree::list(std::move(leaves));
  };
  CallOptions call;
  call.name = name;
  std::vector<Tensor> results = graph_ctx->call(call, fn, args).flatten();
  for (size_t i = 0; i < traced_outs.size(); ++i)
    outs[traced_outs[i]] = traced_val(results.at(i));
  return outs;
}

std::string body_name(const OnnxNode &node) { return node.op() == "Loop" ? "loop_body" : "scan_body"; }

/// Scan's iterations (the opset 9+ form, or one batch row of opset 8's):
/// the final states, then the scan outputs.
std::vector<Val> scan_rows(const OnnxNode &node, BodyHost &host, const onnx::GraphProto &body, std::vector<Val> states,
                           const std::vector<Val> &xs, const std::vector<int64_t> &in_axes,
                           const std::vector<int64_t> &in_dirs, const std::vector<int64_t> &out_axes,
                           const std::vector<int64_t> &out_dirs, const std::string &where) {
  const std::string &op = node.op();
  const size_t outs_k = out_axes.size();
  int64_t steps = -1;
  std::vector<int64_t> axes;
  for (size_t j = 0; j < xs.size(); ++j) {
    Shape shape = shape_of(xs[j]);
    int64_t axis = normalized_axis(in_axes[j], int64_t(shape.size()), op + " scan_input_axes");
    const Dim &d = shape[size_t(axis)];
    if (!d.is_static())
      bad(ErrorCode::OnnxAttribute, op + " scan input " + std::to_string(j) + " has the symbolic sequence length " +
                                        d.to_string() + ": Scan is unrolled and needs a static length; pin it with --dim " +
                                        d.to_string() + "=N");
    if (steps >= 0 && d.value() != steps)
      bad(ErrorCode::OnnxAttribute, op + " scan inputs have different sequence lengths (" + std::to_string(steps) +
                                        " and " + std::to_string(d.value()) + ")");
    steps = d.value();
    axes.push_back(axis);
  }
  if (steps > kMaxIterations)
    bad(ErrorCode::OnnxAttribute, op + " has " + std::to_string(steps) + " iterations; at most " +
                                      std::to_string(kMaxIterations) + " are unrolled");
  if (steps == 0 && outs_k > 0)
    bad(ErrorCode::OnnxAttribute, op + " has a sequence length of 0: its scan outputs' shapes are unknown");
  std::vector<std::pair<std::string, Tensor>> captures = host.traced_captures(body);
  std::vector<std::vector<Val>> pieces(outs_k, std::vector<Val>(size_t(std::max<int64_t>(steps, 0))));
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<BodyIn> inputs;
    for (Val &s : states)
      inputs.push_back({BodyIn::Kind::plain, s, 0, 0});
    for (size_t j = 0; j < xs.size(); ++j)
      inputs.push_back({BodyIn::Kind::gather, xs[j], in_dirs[j] ? steps - 1 - t : t, axes[j]});
    std::vector<Val> out = run_iteration(host, body, inputs, captures, false, body_name(node), where);
    for (size_t i = 0; i < states.size(); ++i)
      states[i] = out[i];
    for (size_t k = 0; k < outs_k; ++k)
      pieces[k][size_t(out_dirs[k] ? steps - 1 - t : t)] = out[states.size() + k];
  }
  std::vector<Val> result = states;
  for (size_t k = 0; k < outs_k; ++k) {
    const Val &first = pieces[k].at(0);
    int64_t rank = int64_t(shape_of(first).size());
    result.push_back(stack(pieces[k], normalized_axis(out_axes[k], rank + 1, op + " scan_output_axes"), host));
  }
  return result;
}

std::vector<int64_t> per_value(const OnnxNode &node, const std::string &attr, size_t n) {
  std::vector<int64_t> v = node.attr_ints(attr);
  if (v.empty())
    return std::vector<int64_t>(n, 0);
  if (v.size() != n)
    bad(ErrorCode::OnnxAttribute, node.op() + " " + attr + " has " + std::to_string(v.size()) + " entries, expected " +
                                      std::to_string(n));
  return v;
}

std::string where_of(const OnnxNode &node) {
  const auto &p = node.proto();
  return "the body of " + node.op() + " '" + (p.name().empty() ? (p.output_size() ? p.output(0) : "?") : p.name()) + "'";
}

/// A Loop whose trip count or condition is known only at run time (or that
/// runs more iterations than are unrolled): one `loop` node (ops::loop)
/// whose body is traced once, with the iteration number, the condition, the
/// carried values and the traced outer values it reads as inputs. Its scan
/// outputs, which would have a run-time length, are refused (`why` says why
/// the Loop is not unrolled); a carried value must keep its type.
std::vector<Val> run_time_loop(const OnnxNode &node, BodyHost &host, const onnx::GraphProto &body, size_t n,
                               size_t scans, const std::string &why, ErrorCode code = ErrorCode::OnnxNotFoldable) {
  auto *graph_ctx = dynamic_cast<GraphRealizationContext *>(RealizationContext::current());
  if (!graph_ctx)
    bad(code, why);
  for (size_t k = 0; k < scans; ++k)
    if (node.wants_output(n + k))
      bad(code, why + "; a Loop run at run time cannot make scan outputs (output " + std::to_string(n + k) + ") yet");
  const std::string where = where_of(node);
  auto scalar = [&](size_t i, DType dtype, int64_t absent) {
    if (!node.has(i))
      return Tensor::from_i64(dtype, {}, {absent});
    Tensor t = host.tensor(node.val(i));
    if (t.shape().size() > 1 || (t.shape().size() == 1 && !(t.shape()[0] == Dim(1))))
      bad(ErrorCode::OnnxAttribute, std::string("Loop's ") + (i == 0 ? "trip count" : "condition") +
                                        " must hold one value, got " + shape_to_string(t.shape()));
    return t.shape().empty() ? t : ops::reshape(t, Shape{});
  };
  Tensor trip = scalar(0, DType::i64, std::numeric_limits<int64_t>::max());
  Tensor cond = scalar(1, DType::boolean, 1);
  std::vector<Tensor> carried;
  for (size_t i = 0; i < n; ++i)
    carried.push_back(host.tensor(node.val(2 + i)));
  std::vector<std::pair<std::string, Tensor>> captures = host.traced_captures(body);
  std::vector<Tensor> capture_tensors;
  for (const auto &c : captures)
    capture_tensors.push_back(c.second);
  BranchBody fn = [&](const std::vector<Tensor> &a) {
    std::vector<Val> vals;
    for (size_t i = 0; i < 2 + n; ++i)
      vals.push_back(traced_val(a[i]));
    std::map<std::string, Val> overrides;
    for (size_t j = 0; j < captures.size(); ++j)
      overrides[captures[j].first] = traced_val(a[2 + n + j]);
    std::vector<Val> outs = host.run_body(body, vals, overrides, true, where);
    std::vector<Tensor> results;
    for (size_t i = 0; i < 1 + n; ++i) {
      Tensor t = host.tensor(outs[i]);
      if (i == 0) { // the next condition: a one-element bool
        if (t.shape().size() == 1 && t.shape()[0] == Dim(1))
          t = ops::reshape(t, Shape{});
        if (t.dtype() != DType::boolean)
          t = ops::not_equal(t, ops::scalar(0, t.dtype()));
      } else if (t.dtype() != carried[i - 1].dtype()) {
        bad(ErrorCode::OnnxAttribute, where + ": loop-carried value " + std::to_string(i - 1) + " enters as " +
                                          std::string(dtype_name(carried[i - 1].dtype())) + " and leaves as " +
                                          std::string(dtype_name(t.dtype())));
      }
      results.push_back(t);
    }
    return results;
  };
  std::vector<Tensor> outs;
  {
    NodeNameScope named(*graph_ctx, node.proto().name().empty() ? node.proto().output(0) : node.proto().name());
    outs = ops::loop(trip, cond, carried, fn, capture_tensors, "loop");
  }
  std::vector<Val> result(node.num_outputs());
  for (size_t k = 0; k < n && k < node.num_outputs(); ++k)
    if (node.wants_output(k))
      result[k] = traced_val(outs[k]);
  return result;
}

} // namespace

std::vector<Val> loop(const OnnxNode &node, BodyHost &host) {
  const onnx::GraphProto &body = body_of(node);
  if (node.num_inputs() < 2)
    bad(ErrorCode::OnnxGraph, "Loop takes a trip count and a condition (either may be empty), then the loop-carried "
                              "values; got " + std::to_string(node.num_inputs()) + " inputs");
  const size_t n = node.num_inputs() - 2;
  if (size_t(body.input_size()) != n + 2)
    bad(ErrorCode::OnnxGraph, "Loop's body has " + std::to_string(body.input_size()) + " inputs, expected " +
                              std::to_string(n + 2) + " (iteration number, condition, " + std::to_string(n) +
                              " loop-carried values)");
  if (size_t(body.output_size()) < n + 1)
    bad(ErrorCode::OnnxGraph, "Loop's body has " + std::to_string(body.output_size()) + " outputs, expected at least " +
                              std::to_string(n + 1) + " (condition, " + std::to_string(n) + " loop-carried values)");
  const size_t scans = size_t(body.output_size()) - n - 1;
  if (node.num_outputs() > n + scans)
    bad(ErrorCode::OnnxGraph, "Loop has " + std::to_string(node.num_outputs()) + " outputs; its body makes " +
                              std::to_string(n + scans));
  // What keeps the Loop from being unrolled at import, if anything: then it
  // runs as a `loop` node (run_time_loop), which the CPU backend runs.
  auto at_run_time = [&](const std::string &why) { return run_time_loop(node, host, body, n, scans, why); };
  auto needs = [&](size_t index, const std::string &what) -> std::string {
    try {
      host.needs_import_value(node, index, what);
    } catch (const Error &e) {
      return e.message();
    }
    return what + " is known only at run time";
  };
  std::optional<int64_t> trip;
  if (node.has(0)) {
    trip = known_scalar(node.val(0));
    if (!trip)
      return at_run_time(needs(0, "the trip count M"));
    if (*trip > kMaxIterations)
      return run_time_loop(node, host, body, n, scans,
                           "Loop has a trip count of " + std::to_string(*trip) + "; at most " +
                               std::to_string(kMaxIterations) + " iterations are unrolled",
                           ErrorCode::OnnxAttribute);
  }
  bool cond = true;
  if (node.has(1)) {
    std::optional<int64_t> c = known_scalar(node.val(1));
    if (!c)
      return at_run_time(needs(1, "the loop condition"));
    cond = *c != 0;
  }
  std::vector<Val> carried;
  for (size_t i = 0; i < n; ++i) {
    if (!node.has(2 + i))
      bad(ErrorCode::OnnxGraph, "Loop's loop-carried value " + std::to_string(i) + " is missing");
    carried.push_back(node.val(2 + i));
  }
  const std::string where = where_of(node);
  std::vector<std::pair<std::string, Tensor>> captures = host.traced_captures(body);
  std::vector<std::vector<Val>> pieces(scans);
  bool counter_as_arg = true;
  int64_t i = 0;
  for (; (!trip || i < *trip) && cond; ++i) {
    if (i >= kMaxIterations) // the unrolled iterations are left unread (dead code)
      return run_time_loop(node, host, body, n, scans,
                           "Loop has run " + std::to_string(kMaxIterations) +
                               " iterations and its condition is still true; at most " +
                               std::to_string(kMaxIterations) + " iterations are unrolled",
                           ErrorCode::OnnxAttribute);
    std::vector<BodyIn> inputs{{BodyIn::Kind::counter, {}, i, 0}, {BodyIn::Kind::plain, known_scalar_val(DType::boolean, cond), 0, 0}};
    for (Val &v : carried)
      inputs.push_back({BodyIn::Kind::plain, v, 0, 0});
    std::vector<Val> out;
    try {
      out = run_iteration(host, body, inputs, captures, counter_as_arg, body_name(node), where);
    } catch (const Error &e) {
      // A body that needs the iteration number at import: a constant per iteration.
      if (!counter_as_arg || e.code() != ErrorCode::OnnxNotFoldable)
        throw;
      counter_as_arg = false;
      out = run_iteration(host, body, inputs, captures, counter_as_arg, body_name(node), where);
    }
    std::optional<int64_t> next = known_scalar(out[0]);
    if (!next) { // from the start, as a run-time loop (the iterations traced so far are left unread)
      return run_time_loop(node, host, body, n, scans,
                           "the condition the body computes ('" + body.output(0).name() + "') in iteration " +
                               std::to_string(i) + " depends on values known only at run time");
    }
    cond = *next != 0;
    for (size_t k = 0; k < n; ++k)
      carried[k] = out[1 + k];
    for (size_t k = 0; k < scans; ++k)
      pieces[k].push_back(out[1 + n + k]);
  }
  std::vector<Val> result(node.num_outputs());
  for (size_t k = 0; k < node.num_outputs(); ++k) {
    if (!node.wants_output(k))
      continue;
    if (k < n) {
      result[k] = carried[k];
      continue;
    }
    if (i == 0)
      bad(ErrorCode::OnnxAttribute, "Loop runs no iteration: the shape of its scan output " +
                                        std::to_string(k - n) + " is unknown");
    result[k] = stack(pieces[k - n], 0, host);
  }
  return result;
}

std::vector<Val> scan(const OnnxNode &node, BodyHost &host) {
  const onnx::GraphProto &body = body_of(node);
  const int64_t m = node.attr_int("num_scan_inputs", 0);
  const bool batched = node.opset() < 9; // opset 8: sequence_lens, then [batch, ...] states and inputs
  const size_t first = batched ? 1 : 0;
  if (m < 1 || size_t(m) + first > node.num_inputs())
    bad(ErrorCode::OnnxAttribute, "Scan num_scan_inputs " + std::to_string(m) + " does not fit its " +
                                      std::to_string(node.num_inputs()) + " inputs");
  const size_t ns = node.num_inputs() - first - size_t(m);
  if (size_t(body.input_size()) != ns + size_t(m))
    bad(ErrorCode::OnnxGraph, "Scan's body has " + std::to_string(body.input_size()) + " inputs, expected " +
                              std::to_string(ns + size_t(m)));
  if (size_t(body.output_size()) < ns)
    bad(ErrorCode::OnnxGraph, "Scan's body has " + std::to_string(body.output_size()) + " outputs, fewer than its " +
                              std::to_string(ns) + " state variables");
  const size_t k = size_t(body.output_size()) - ns;
  if (node.num_outputs() > ns + k)
    bad(ErrorCode::OnnxGraph, "Scan has " + std::to_string(node.num_outputs()) + " outputs; its body makes " +
                              std::to_string(ns + k));
  std::vector<Val> states, xs;
  for (size_t i = 0; i < ns + size_t(m); ++i) {
    if (!node.has(first + i))
      bad(ErrorCode::OnnxGraph, "Scan input " + std::to_string(first + i) + " is missing");
    (i < ns ? states : xs).push_back(node.val(first + i));
  }
  const std::string where = where_of(node);
  std::vector<Val> result;
  if (!batched) {
    std::vector<int64_t> in_axes = per_value(node, "scan_input_axes", size_t(m));
    std::vector<int64_t> in_dirs = per_value(node, "scan_input_directions", size_t(m));
    std::vector<int64_t> out_axes = per_value(node, "scan_output_axes", k);
    std::vector<int64_t> out_dirs = per_value(node, "scan_output_directions", k);
    result = scan_rows(node, host, body, states, xs, in_axes, in_dirs, out_axes, out_dirs, where);
  } else {
    // Opset 8: each batch row scans on its own (axis 1 of the inputs).
    std::vector<int64_t> dirs = per_value(node, "directions", size_t(m));
    Shape probe = shape_of(xs.at(0));
    if (probe.size() < 2)
      bad(ErrorCode::OnnxAttribute, "Scan (opset 8) scan inputs need a batch and a sequence axis");
    const Dim batch = probe[0], seq = probe[1];
    if (!batch.is_static())
      bad(ErrorCode::OnnxAttribute, "Scan (opset 8) has the symbolic batch size " + batch.to_string() +
                                        "; pin it with --dim " + batch.to_string() + "=N");
    if (node.has(0)) { // sequence_lens: only full lengths are supported
      std::vector<int64_t> lens;
      if (node.val(0).kind == Val::Kind::known)
        lens = node.ints(0);
      bool full = seq.is_static() && int64_t(lens.size()) == batch.value() &&
                  std::all_of(lens.begin(), lens.end(), [&](int64_t l) { return l == seq.value(); });
      if (!full)
        bad(ErrorCode::OnnxAttribute, "Scan (opset 8) sequence_lens shorter than the sequence are not supported "
                                      "(sequence_lens must be a constant holding the full length for every row)");
    }
    std::vector<std::vector<Val>> rows(ns + k);
    for (int64_t b = 0; b < batch.value(); ++b) {
      std::vector<Val> row_states, row_xs;
      for (const Val &s : states)
        row_states.push_back(slice_at(s, b, 0, host));
      for (const Val &x : xs)
        row_xs.push_back(slice_at(x, b, 0, host));
      std::vector<Val> r = scan_rows(node, host, body, row_states, row_xs, std::vector<int64_t>(size_t(m), 0), dirs,
                                     std::vector<int64_t>(k, 0), std::vector<int64_t>(k, 0), where);
      for (size_t i = 0; i < r.size(); ++i)
        rows[i].push_back(r[i]);
    }
    if (batch.value() == 0)
      bad(ErrorCode::OnnxAttribute, "Scan (opset 8) has a batch of 0");
    for (auto &r : rows)
      result.push_back(stack(r, 0, host));
  }
  result.resize(node.num_outputs());
  for (size_t i = 0; i < result.size(); ++i)
    if (!node.wants_output(i))
      result[i] = Val{};
  return result;
}

} // namespace maxc::onnx_import
