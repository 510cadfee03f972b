// The ONNX importer: reads a ModelProto, folds shape computations on
// symbolic dims and traces every other node through the Tensor API inside a
// GraphRealizationContext (docs/ONNX.md).
//
// Each ONNX value is one of
//   known   — data at import time (initializers, Constant, folded results),
//   sym     — an integer scalar/vector whose elements are Dim polynomials
//             (Shape of a tensor with symbolic dims, and arithmetic on it),
//   traced  — a value of the graph being recorded.
// A node whose inputs are all known and small is evaluated at import time
// (the same op mapping, run in an EagerRealizationContext); a node reading a
// sym value either folds it (Gather, Concat, Add, ... on dims) or uses it as
// a shape (Reshape, Expand, ConstantOfShape, Range); anything else that
// needs a value known only at run time is an error naming the node.
#include "OnnxLoop.h"
#include "OnnxOps.h"
#include "OnnxTensor.h"

#include "maxc/Frontend/OnnxLoader.h"
#include "maxc/Frontend/Npy.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/EagerRealizationContext.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Support/CNames.h"

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cerrno>
#include <deque>
#include <optional>
#include <set>

namespace maxc {

bool looks_like_onnx(const std::string &bytes) {
  // JSON is text; an ONNX ModelProto starts with a binary field tag (0x08,
  // ir_version, in every exporter's output). A UTF-8 byte order mark is text.
  if (bytes.empty() || bytes.rfind("\xEF\xBB\xBF", 0) == 0)
    return false;
  unsigned char c = static_cast<unsigned char>(bytes[0]);
  return (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r') || c >= 0x7f;
}

namespace onnx_import {

namespace {

constexpr int64_t kMaxOpset = 20;
/// Nodes whose known inputs hold at most this many elements in all are
/// evaluated at import time; integer and bool values (index arithmetic,
/// masks: what a scatter's or gather's indices are computed by, which the
/// importer can then turn into tables) up to kFoldLimitIntegers.
constexpr int64_t kFoldLimit = 1 << 16;
constexpr int64_t kFoldLimitIntegers = 1 << 22;
/// Initializers of at most this many elements that nodes outside a block
/// read too stay constants inside the block (add_block).
constexpr int64_t kSharedConstantLimit = 16;

/// The name of graph input `in`'s dim `i`: its dim_param, "<input>_dim<i>"
/// where the exporter left it unknown (no dim_param and no dim_value,
/// dim_value -1 or dim_param "?", which paddle2onnx and older exporters
/// write: two "?" dims are not the same size, and ONNX Runtime reads them
/// so), or "" for a static dim.
std::string input_dim_param(const onnx::ValueInfoProto &in, int i) {
  const auto &d = in.type().tensor_type().shape().dim(i);
  if (d.has_dim_param() && !d.dim_param().empty() && d.dim_param() != "?")
    return d.dim_param();
  return d.has_dim_value() && d.dim_value() != -1 ? "" : in.name() + "_dim" + std::to_string(i);
}

class Importer : public NodeHost, public BodyHost {
public:
  Importer(const onnx::ModelProto &model, const std::string &path, const LoadOptions &options,
           DiagnosticEngine &diags, const OnnxImportOptions &onnx, OnnxImportInfo &info, LoadedModel &out)
      : model_(model), graph_proto_(model.graph()), path_(path), options_(options), diags_(&diags), onnx_(onnx),
        info_(info), out_(out) {
    dir_ = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  }

  std::unique_ptr<Graph> run() {
    read_opsets();
    if (diags_->has_errors())
      return nullptr;
    // The model's name (the default C prefix and header name) is the file's
    // stem: ONNX graph names are exporter constants ("torch_jit",
    // "main_graph"), so two exported models would clash on them.
    std::string stem = path_.substr(path_.rfind('/') == std::string::npos ? 0 : path_.rfind('/') + 1);
    stem = stem.substr(0, stem.rfind('.'));
    std::string graph_name = CNameMangler().mangle(stem, "model");
    auto graph = std::make_unique<Graph>(graph_name);
    std::vector<Val> outputs;
    {
      GraphRealizationContext ctx(*graph);
      root_ = &ctx;
      read_initializers();
      find_state_pairs();
      read_inputs(*graph);
      std::vector<int> order = topological_order();
      if (diags_->has_errors())
        return nullptr;
      alias_initializers(order);
      // Repeated layers are looked for in graphs without subgraphs (If):
      // a branch's captures are not yet block inputs.
      if (options_.dedup && !has_subgraph_nodes())
        find_blocks(order);
      for (int unit : schedule_units(order)) {
        if (unit >= 0) {
          run_node(graph_proto_.node(unit));
          continue;
        }
        Block &block = blocks_[static_cast<size_t>(-unit - 1)];
        if (block_ready(block))
          run_block(block);
        else { // cannot happen after scheduling; trace its nodes inline to be safe
          block.state = Block::State::inline_nodes;
          for (int i : block.nodes)
            run_node(graph_proto_.node(i));
        }
      }
      if (!diags_->has_errors()) // a --max-dim that bounds nothing is a typo
        for (const auto &[name, bound] : options_.max_dims)
          if (!max_dims_used_.count(name))
            diags_->error(ErrorCode::InvalidArgument, "", "--max-dim " + name,
                          "no dim read at run time is named '" + name + "' or read from a tensor named '" + name +
                              "' (the dims' names are the node's output name with _d0, _len0, _n, _k...)");
      for (const auto &o : graph_proto_.output()) {
        if (state_outputs_.count(o.name()))
          continue; // kept in the state buffer
        auto it = values_.find(o.name());
        if (it == values_.end()) {
          if (!poisoned_.count(o.name()))
            diags_->error(ErrorCode::OnnxGraph, path_, "graph output '" + o.name() + "'",
                         "no node or input produces it");
          outputs.emplace_back();
          continue;
        }
        outputs.push_back(it->second);
      }
      if (!diags_->has_errors()) {
        std::vector<ValueId> ids;
        std::vector<std::string> names;
        std::vector<std::string> output_names;
        for (const auto &o : graph_proto_.output())
          if (!state_outputs_.count(o.name()))
            output_names.push_back(o.name());
        for (size_t i = 0; i < outputs.size(); ++i) {
          const std::string &onnx_name = output_names[i];
          try {
            Tensor t = output_tensor(outputs[i], onnx_name);
            ids.push_back(t.value().id());
          } catch (const Error &e) {
            diags_->error(e.code(), path_, "graph output '" + onnx_name + "'", e.message());
            continue;
          }
          names.push_back(names_.mangle(onnx_name, "output" + std::to_string(i)));
          info_.output_names.push_back(onnx_name);
          if (names.back() != onnx_name)
            out_.source_names[names.back()] = onnx_name;
        }
        if (!diags_->has_errors())
          graph->set_outputs(ids, names);
        if (!diags_->has_errors() && !state_pairs_.empty())
          declare_state(*graph);
      }
      root_ = nullptr;
    }
    if (diags_->has_errors())
      return nullptr;
    return graph;
  }

  // ---- NodeHost ----

  Tensor tensor_of(const Val &v, const OnnxNode &n, size_t index) override {
    switch (v.kind) {
    case Val::Kind::traced:
      return v.tensor;
    case Val::Kind::known:
      if (!v.initializer.empty() && root_ && mode_ == Mode::graph && !in_body_) {
        auto it = initializer_tensors_.find(v.initializer);
        if (it != initializer_tensors_.end())
          return it->second;
        Tensor t = root_->add_source(Tensor::from_host(v.data), constant_names_.mangle(v.initializer, "w"));
        initializer_tensors_.emplace(v.initializer, t);
        return t;
      }
      return Tensor::from_host(v.data);
    case Val::Kind::sym:
      // Shape values with symbolic elements reaching run-time arithmetic
      // ("arange(seq) + past"): their values, read from the dims at run time.
      return ops::dim_values(v.dims, v.dtype, v.scalar);
    case Val::Kind::missing:
      break;
    }
    throw Error(ErrorCode::OnnxGraph, "input " + std::to_string(index) + " is missing");
  }

  void needs_value(const Val &v, const OnnxNode &n, size_t index) override {
    if (!v.graph_input.empty()) {
      if (std::find(info_.needs_value.begin(), info_.needs_value.end(), v.graph_input) == info_.needs_value.end())
        info_.needs_value.push_back(v.graph_input);
      throw Error(ErrorCode::OnnxNotFoldable,
                  "input " + std::to_string(index) + " is the graph input '" + v.graph_input +
                      "', whose value this node needs at compile time (it fixes axes or a rank, so it cannot "
                      "be a run-time dim): fix it with --bind " + v.graph_input +
                      "=VALUES (maxc run does so from its --input file), or make it an initializer or a Constant");
    }
    throw Error(ErrorCode::OnnxNotFoldable, "input " + std::to_string(index) + " ('" + n.input_name(index) +
                                                "') is computed at run time, but this node needs its value at "
                                                "compile time");
  }

  std::optional<HostTensor> run_value(const Val &v) override {
    if (v.graph_input.empty())
      return std::nullopt;
    auto it = options_.input_values.find(v.graph_input);
    return it == options_.input_values.end() ? std::nullopt : std::optional<HostTensor>(it->second);
  }

  const Val *companion(const std::string &value, const std::string &what) override {
    auto it = values_.find(companion_name(value, what));
    return it == values_.end() ? nullptr : &it->second;
  }

  static std::string companion_name(const std::string &value, const std::string &what) {
    return value + "#" + what;
  }

  Dim runtime_dim(const OnnxNode &n, size_t index, const Tensor &value, const std::string &label,
                  std::optional<int64_t> bound, int64_t element) override {
    // A Loop or Scan body is one deduplicated subgraph called per
    // iteration: a symbol has one source, so no run-time dims in there.
    if (in_body_)
      needs_value(n.val(index), n, index);
    std::string base = n.num_outputs() && !n.proto().output(0).empty() ? n.proto().output(0) : n.op();
    std::string symbol = dim_names_.mangle(base + "_" + label, "rt_dim");
    std::string input = n.input_name(index);
    const Val &v = n.val(index);
    // The bound: --max-dim on the symbol or the input, the op's, the value
    // the run gives the graph input.
    std::optional<int64_t> chosen;
    for (const std::string &key : {symbol, input})
      if (auto it = options_.max_dims.find(key); it != options_.max_dims.end()) {
        max_dims_used_.insert(key);
        if (!chosen)
          chosen = it->second;
      }
    if (!chosen)
      chosen = bound;
    if (!chosen && element >= 0 && !v.graph_input.empty())
      if (auto it = options_.input_values.find(v.graph_input); it != options_.input_values.end() &&
                                                                is_integer(it->second.dtype()) &&
                                                                element < it->second.numel())
        chosen = std::max<int64_t>(0, it->second.get_i64(element));
    if (!chosen)
      throw Error(ErrorCode::OnnxNotFoldable,
                  "input " + std::to_string(index) + " ('" + input + "') is known only at run time, and no bound " +
                      "for the dim '" + symbol + "' it gives follows from the op: give one with --max-dim " + input +
                      "=N (every dim read from it) or --max-dim " + symbol + "=N (buffers are sized by it; a " +
                      "larger value at run time fails the run)");
    return ops::bind_dim(value, symbol, *chosen);
  }

  // ---- BodyHost (Loop and Scan, OnnxLoop.cpp) ----

  std::vector<std::pair<std::string, Tensor>> traced_captures(const onnx::GraphProto &body) override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const std::string &n : captured_names(body)) {
      if (poisoned_.count(n))
        throw Error(ErrorCode::OnnxGraph, "'" + n + "', which the body reads, failed to import");
      auto v = values_.find(n);
      if (v == values_.end())
        throw Error(ErrorCode::OnnxGraph, "'" + n + "' is read by the body but defined neither in it nor around it");
      if (v->second.kind == Val::Kind::traced)
        out.emplace_back(n, v->second.tensor);
    }
    return out;
  }

  std::vector<Val> run_body(const onnx::GraphProto &body, const std::vector<Val> &inputs,
                            const std::map<std::string, Val> &overrides, bool in_call,
                            const std::string &where) override {
    if (size_t(body.input_size()) != inputs.size())
      throw Error(ErrorCode::OnnxGraph, where + " has " + std::to_string(body.input_size()) + " inputs, expected " +
                                            std::to_string(inputs.size()));
    if (!body.sparse_initializer().empty())
      throw Error(ErrorCode::OnnxUnsupportedType, where + ": sparse initializers are not supported");
    if (if_depth_ >= kMaxIfDepth)
      throw Error(ErrorCode::OnnxGraph, "subgraphs nest more than " + std::to_string(kMaxIfDepth) + " deep");
    if (++body_runs_ > kMaxBodyRuns) // nested Loops multiply their trip counts
      throw Error(ErrorCode::OnnxAttribute, "Loop and Scan bodies have run " + std::to_string(kMaxBodyRuns) +
                                                " times in all (nested loops multiply); that is as far as maxc unrolls");
    // Every name the body (and subgraphs in it) defines is its own: what it
    // shadows comes back afterwards, and the rest is forgotten, so the next
    // iteration defines them again.
    std::set<std::string> local;
    std::vector<const onnx::GraphProto *> graphs{&body};
    for (size_t g = 0; g < graphs.size() && g < 4096; ++g) {
      for (const auto &in : graphs[g]->input())
        local.insert(in.name());
      for (const auto &t : graphs[g]->initializer())
        local.insert(t.name());
      for (const auto &node : graphs[g]->node()) {
        local.insert(node.output().begin(), node.output().end());
        for (const auto &a : node.attribute()) {
          if (a.has_g())
            graphs.push_back(&a.g());
          for (const auto &sub : a.graphs())
            graphs.push_back(&sub);
        }
      }
    }
    for (const auto &[name, v] : overrides)
      local.insert(name);
    local.erase("");
    std::map<std::string, Val> saved;
    for (const std::string &n : local)
      if (auto it = values_.find(n); it != values_.end()) {
        saved.emplace(n, std::move(it->second));
        values_.erase(it);
      }
    std::set<std::string> saved_poison = poisoned_;
    size_t params_before = out_.params.size();
    DiagnosticEngine scratch, *outer = diags_;
    struct Restore {
      Importer &self;
      std::set<std::string> &local;
      std::map<std::string, Val> &saved;
      std::set<std::string> &poison;
      DiagnosticEngine *outer;
      bool in_call;
      size_t params_before;
      ~Restore() {
        self.diags_ = outer;
        --self.if_depth_;
        self.in_body_ -= in_call ? 1 : 0;
        for (const std::string &n : local) {
          self.values_.erase(n);
          self.defined_.erase(n);
        }
        for (auto &[n, v] : saved)
          self.values_[n] = std::move(v);
        self.poisoned_ = std::move(poison);
        // An If resolved in the body reads its branch's initializers once per run.
        auto &params = self.out_.params;
        std::set<std::string> seen;
        for (size_t i = 0; i < params_before; ++i)
          seen.insert(params[i].name);
        size_t keep = params_before;
        for (size_t i = params_before; i < params.size(); ++i)
          if (seen.insert(params[i].name).second)
            params[keep++] = params[i];
        params.resize(keep);
      }
    } restore{*this, local, saved, saved_poison, outer, in_call, params_before};
    diags_ = &scratch;
    ++if_depth_;
    in_body_ += in_call ? 1 : 0;
    for (const auto &[name, v] : overrides)
      values_[name] = v;
    for (int i = 0; i < body.input_size(); ++i)
      if (!body.input(i).name().empty())
        values_[body.input(i).name()] = inputs[size_t(i)];
    for (const auto &t : body.initializer()) {
      auto cached = body_initializers_.find(&t);
      if (cached == body_initializers_.end())
        cached = body_initializers_.emplace(&t, tensor_from_proto(t, dir_, &out_.files_read)).first;
      Val v;
      v.kind = Val::Kind::known;
      v.data = cached->second;
      values_[t.name()] = v;
    }
    std::vector<int> order = dependency_order(body, where);
    for (int i : order)
      if (!scratch.has_errors())
        run_node(body.node(i));
    auto failure = [&]() -> Error {
      for (const Diagnostic &d : scratch.diagnostics())
        if (d.severity == Severity::error)
          return Error(d.code, (d.pointer.empty() ? "" : d.pointer + ": ") + d.message);
      return Error(ErrorCode::OnnxGraph, where + " failed to import");
    };
    if (scratch.has_errors())
      throw failure();
    std::vector<Val> outs;
    for (const auto &o : body.output()) {
      auto v = values_.find(o.name());
      if (v == values_.end())
        throw Error(ErrorCode::OnnxGraph, where + ": output '" + o.name() + "' is not computed");
      outs.push_back(v->second);
    }
    for (const Diagnostic &d : scratch.diagnostics())
      outer->report(d);
    return outs;
  }

  Tensor tensor(const Val &v) override {
    OnnxNode dummy(onnx::NodeProto::default_instance(), opset_, {}, *this);
    return tensor_of(v, dummy, 0);
  }

  void needs_import_value(const OnnxNode &node, size_t index, const std::string &what) override {
    const std::string name = node.input_name(index);
    std::string message = what + " ('" + name + "') is known only at run time; maxc unrolls " + node.op() +
                          " at import, so it must be a constant or computed from known values";
    std::vector<std::string> behind = graph_inputs_behind(name);
    for (const std::string &in : behind)
      if (std::find(info_.needs_value.begin(), info_.needs_value.end(), in) == info_.needs_value.end())
        info_.needs_value.push_back(in);
    if (!behind.empty()) {
      std::string list;
      for (const std::string &in : behind)
        list += (list.empty() ? "" : ", ") + in;
      message += behind.size() > 1 ? "; it is computed from the graph inputs " + list +
                                         ": fix them with --bind NAME=VALUE if they are settings, not data"
                                   : "; it is computed from the graph input '" + list + "': fix it with --bind " +
                                         list + "=VALUE if it is a setting, not data";
    } else {
      message += " (it depends on computed tensor values, not only on shapes)";
    }
    throw Error(ErrorCode::OnnxNotFoldable, message);
  }

private:
  enum class Mode { graph, eager };

  // ---- model-level reading ----

  void read_opsets() {
    for (const auto &o : model_.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") {
        opset_ = o.version();
        if (o.version() > kMaxOpset)
          diags_->error(ErrorCode::OnnxUnsupportedOp, path_, "opset_import",
                       "the model uses ai.onnx opset " + std::to_string(o.version()) + "; maxc supports opsets up to " +
                           std::to_string(kMaxOpset) + " (ONNX 1.15)");
        else if (o.version() < 1)
          diags_->error(ErrorCode::OnnxFormat, path_, "opset_import", "invalid ai.onnx opset version");
      } else {
        domains_.insert(o.domain());
      }
    }
    if (!graph_proto_.sparse_initializer().empty())
      diags_->error(ErrorCode::OnnxUnsupportedType, path_, "graph", "sparse initializers are not supported");
  }

  bool define(const std::string &name, const std::string &what) {
    if (name.empty())
      return false;
    if (!defined_.insert(name).second) {
      diags_->error(ErrorCode::OnnxGraph, path_, what, "the name '" + name + "' is defined more than once");
      return false;
    }
    return true;
  }

  void read_initializers() {
    for (const auto &t : graph_proto_.initializer())
      read_initializer(t, "initializer '" + t.name() + "'");
  }

  /// One initializer (of the graph or of an If branch being resolved) as a
  /// known value and a weight; `where` names it in diagnostics.
  void read_initializer(const onnx::TensorProto &t, const std::string &where) {
    if (!define(t.name(), where))
      return;
    try {
      Val v;
      v.kind = Val::Kind::known;
      v.data = tensor_from_proto(t, dir_, &out_.files_read);
      v.initializer = t.name();
      out_.params.push_back(ParamSpec{t.name(), v.data.dtype(), v.data.shape(), ""});
      values_[t.name()] = std::move(v);
    } catch (const Error &e) {
      diags_->error(e.code(), path_, where, e.message());
      poisoned_.insert(t.name());
    }
  }

  void read_inputs(Graph &graph) {
    std::map<std::string, std::string> dim_symbols; // dim_param → symbol
    std::set<std::string> known_dims;               // every dim_param and symbol, for --dim
    std::set<std::string> bound_seen;               // inputs pinned with --bind
    // `maxc run --dim past=N` with --state: the dim a cache grows along is
    // the state's length, a run-time value by nature, never pinned.
    std::set<std::string> state_lengths;
    if (options_.dims_may_be_run_values)
      for (const auto &in : graph_proto_.input())
        if (auto pair = state_pairs_.find(in.name()); pair != state_pairs_.end() && in.type().has_tensor_type() &&
                                                        pair->second.axis < in.type().tensor_type().shape().dim_size())
          state_lengths.insert(input_dim_param(in, pair->second.axis));
    for (const auto &in : graph_proto_.input()) {
      if (values_.count(in.name()) || poisoned_.count(in.name()))
        continue; // an initializer listed as input (IR < 4): a weight with a default
      std::string where = "graph input '" + in.name() + "'";
      if (!define(in.name(), where))
        continue;
      info_.declared_inputs.push_back(in.name());
      if (auto pin = onnx_.pinned_inputs.find(in.name()); pin != onnx_.pinned_inputs.end()) {
        Val v;
        v.kind = Val::Kind::known;
        v.data = pin->second;
        values_[in.name()] = v;
        continue;
      }
      try {
        if (!in.type().has_tensor_type())
          throw Error(ErrorCode::OnnxUnsupportedType,
                      "only tensor inputs are supported (sequence, map and optional values are not)");
        const auto &tt = in.type().tensor_type();
        std::optional<DType> dtype = dtype_from_onnx(tt.elem_type());
        if (!dtype)
          throw Error(ErrorCode::OnnxUnsupportedType,
                      "has element type " + onnx_dtype_name(tt.elem_type()) + ", which maxc does not support");
        if (!tt.has_shape())
          throw Error(ErrorCode::OnnxUnsupportedType, "has no shape (its rank must be known)");
        Shape shape;
        for (int i = 0; i < tt.shape().dim_size(); ++i) {
          const auto &d = tt.shape().dim(i);
          std::string param = input_dim_param(in, i);
          if (param.empty()) {
            if (d.dim_value() < 0)
              throw Error(ErrorCode::OnnxTensorData, "dim " + std::to_string(i) + " is negative");
            shape.emplace_back(d.dim_value());
            continue;
          }
          auto it = dim_symbols.find(param);
          if (it == dim_symbols.end())
            it = dim_symbols.emplace(param, dim_names_.mangle(param, "dim" + std::to_string(dim_symbols.size())))
                     .first;
          const std::string &sym = it->second;
          known_dims.insert(sym);
          known_dims.insert(param);
          auto pinned = options_.dims.find(sym);
          if (pinned == options_.dims.end())
            pinned = options_.dims.find(param);
          if (pinned != options_.dims.end() && !state_lengths.count(param)) {
            shape.emplace_back(pinned->second);
            out_.pinned_dims.insert(pinned->first);
          }
          else
            shape.emplace_back(sym);
        }
        checked_numel_shape(shape, *dtype, where);
        if (auto bound = options_.bound_inputs.find(in.name()); bound != options_.bound_inputs.end()) {
          bound_seen.insert(in.name());
          Val v;
          v.kind = Val::Kind::known;
          v.data = bound_value(bound->second, *dtype, shape);
          values_[in.name()] = v;
          continue;
        }
        std::string cname = names_.mangle(in.name(), "input" + std::to_string(graph.input_ids().size()));
        auto pair = state_pairs_.find(in.name());
        ValueId id = graph.add_input(TensorType(*dtype, pair == state_pairs_.end() ? shape : state_buffer_shape(pair->second, shape)), cname);
        Val v;
        v.kind = Val::Kind::traced;
        v.tensor = Tensor::from_graph_value(graph.value(id));
        v.graph_input = in.name();
        if (pair != state_pairs_.end()) {
          state_buffers_.push_back(cname);
          v.state_buffer = v.tensor;
          v.state_axis = pair->second.axis; // its view is made once every input is added
        }
        values_[in.name()] = v;
        info_.input_names.push_back(in.name());
        if (cname != in.name())
          out_.source_names[cname] = in.name();
      } catch (const Error &e) {
        diags_->error(e.code(), path_, where, e.message());
        poisoned_.insert(in.name());
      }
    }
    for (auto &[name, v] : values_) // the state inputs' logical values: views of their buffers
      if (v.state_axis >= 0 && !poisoned_.count(name))
        v.tensor = state_view(v.state_buffer, v.state_axis);
    if (!options_.dims_may_be_run_values)
      report_unknown_dims(options_.dims, known_dims, path_, *diags_);
    for (const auto &[name, text] : options_.bound_inputs)
      if (!bound_seen.count(name) && !poisoned_.count(name)) {
        std::string inputs;
        for (const std::string &n : info_.declared_inputs)
          inputs += (inputs.empty() ? "" : ", ") + n;
        diags_->error(ErrorCode::InvalidArgument, path_, "--bind " + name,
                     "the model has no graph input named '" + name + "' (its inputs: " +
                         (inputs.empty() ? std::string("none") : inputs) + ")");
      }
  }

  /// The value of a graph input pinned with --bind NAME=VALUES: numbers
  /// separated by commas (as many as the input's static shape holds), or a
  /// .npy file of that shape; converted to the input's dtype, which must
  /// hold every number exactly.
  static HostTensor bound_value(const std::string &text, DType dtype, const Shape &shape) {
    if (!shape_is_static(shape))
      throw Error(ErrorCode::InvalidArgument, "--bind: the input's shape " + shape_to_string(shape) +
                                                  " is symbolic; pin its dims with --dim first");
    std::vector<int64_t> sizes;
    for (const Dim &d : shape)
      sizes.push_back(d.value());
    if (text.size() > 4 && text.compare(text.size() - 4, 4, ".npy") == 0) {
      HostTensor t = read_npy(text);
      if (t.shape() != sizes)
        throw Error(ErrorCode::InvalidArgument, "--bind: '" + text + "' has shape " + shape_to_string(Shape(t.shape().begin(), t.shape().end())) +
                                                    "; the input is " + shape_to_string(shape));
      if (t.dtype() != dtype)
        throw Error(ErrorCode::InvalidArgument, "--bind: '" + text + "' holds " + std::string(dtype_name(t.dtype())) +
                                                    "; the input is " + std::string(dtype_name(dtype)));
      return t;
    }
    HostTensor t(dtype, sizes);
    std::vector<std::string> items;
    for (size_t at = 0;;) {
      size_t comma = text.find(',', at);
      items.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos)
        break;
      at = comma + 1;
    }
    if (static_cast<int64_t>(items.size()) != t.numel())
      throw Error(ErrorCode::InvalidArgument, "--bind: got " + std::to_string(items.size()) + " value(s) for an input of shape " +
                                                  shape_to_string(shape) + " (" + std::to_string(t.numel()) + " elements)");
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string &item = items[i];
      char *end = nullptr;
      errno = 0;
      if (is_float(dtype)) {
        double v = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0' || errno == ERANGE)
          throw Error(ErrorCode::InvalidArgument, "--bind: '" + item + "' is not a number");
        t.set_f64(static_cast<int64_t>(i), v);
        continue;
      }
      long long v = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || errno == ERANGE)
        throw Error(ErrorCode::InvalidArgument, "--bind: '" + item + "' is not an integer (the input is " +
                                                    std::string(dtype_name(dtype)) + ")");
      t.set_i64(static_cast<int64_t>(i), v);
      if (t.get_i64(static_cast<int64_t>(i)) != v)
        throw Error(ErrorCode::InvalidArgument, "--bind: " + item + " does not fit in " + std::string(dtype_name(dtype)));
    }
    return t;
  }

  static void checked_numel_shape(const Shape &shape, DType dtype, const std::string &what) {
    std::vector<int64_t> sizes;
    for (const Dim &d : shape)
      if (d.is_static())
        sizes.push_back(d.value());
    checked_numel(sizes, dtype, what);
  }

  /// Kahn's algorithm: `units` in an order where each comes after the ones
  /// it depends on (`pending` counts them, `users` inverts them), first-come
  /// first-served; units on a cycle are left out.
  static std::vector<int> kahn_order(const std::vector<int> &units, std::map<int, size_t> pending,
                                     std::map<int, std::vector<int>> &users) {
    std::deque<int> ready;
    for (int u : units)
      if (pending[u] == 0)
        ready.push_back(u);
    std::vector<int> out;
    while (!ready.empty()) {
      int u = ready.front();
      ready.pop_front();
      out.push_back(u);
      for (int v : users[u])
        if (--pending[v] == 0)
          ready.push_back(v);
    }
    return out;
  }

  /// The graph's node indices in an order where every input is defined
  /// first (ONNX requires sorted graphs, but exporters do not always comply).
  std::vector<int> topological_order() { return dependency_order(graph_proto_, ""); }

  /// Node indices of `graph` (the model's graph, or an If branch being
  /// resolved, `scope` naming it in diagnostics) in an order where each node
  /// comes after the producers of what it reads (reads_of: inputs and a
  /// subgraph's captures); values already known (values_) are ready.
  /// Reports names defined twice, inputs defined nowhere, and a cycle; nodes
  /// on a cycle are left out of the order. Records the nodes' op types.
  std::vector<int> dependency_order(const onnx::GraphProto &graph, const std::string &scope) {
    auto where = [&](const onnx::NodeProto &node) { return scope.empty() ? describe_node(node) : scope + ": " + describe_node(node); };
    size_t errors = diags_->error_count();
    std::map<std::string, int> producer;
    int n = graph.node_size();
    for (int i = 0; i < n; ++i)
      if (std::find(info_.op_types.begin(), info_.op_types.end(), graph.node(i).op_type()) == info_.op_types.end())
        info_.op_types.push_back(graph.node(i).op_type());
    for (int i = 0; i < n; ++i)
      for (const std::string &o : graph.node(i).output())
        if (!o.empty()) {
          if (values_.count(o) || poisoned_.count(o) || producer.count(o) || defined_.count(o))
            diags_->error(ErrorCode::OnnxGraph, path_, where(graph.node(i)),
                         "the name '" + o + "' is defined more than once");
          producer[o] = i;
        }
    std::map<int, size_t> pending;
    std::map<int, std::vector<int>> users;
    for (int i = 0; i < n; ++i) {
      const auto &node = graph.node(i);
      std::set<int> deps;
      for (const std::string &in : reads_of(node)) {
        if (in.empty() || values_.count(in) || poisoned_.count(in))
          continue;
        auto p = producer.find(in);
        if (p == producer.end()) {
          diags_->error(ErrorCode::OnnxGraph, path_, where(node),
                       "input '" + in + "' is not a graph input, an initializer or any node's output" +
                           (scope.empty() ? "" : " in the branch or around it"));
          continue;
        }
        deps.insert(p->second);
      }
      pending[i] = deps.size();
      for (int d : deps)
        users[d].push_back(i);
    }
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i)
      all[i] = i;
    std::vector<int> order = kahn_order(all, pending, users);
    std::set<int> placed(order.begin(), order.end());
    if (static_cast<int>(order.size()) != n && diags_->error_count() == errors)
      for (int i = 0; i < n; ++i)
        if (!placed.count(i)) { // on a cycle, or downstream of one
          diags_->error(ErrorCode::OnnxGraph, path_, where(graph.node(i)),
                       std::string(scope.empty() ? "the graph" : "the branch") + " has a cycle through this node");
          break;
        }
    return order;
  }

  std::string describe_node(const onnx::NodeProto &node) const {
    std::string name = node.name().empty() ? (node.output_size() ? node.output(0) : std::string("?")) : node.name();
    std::string domain = node.domain().empty() || node.domain() == "ai.onnx" ? "" : node.domain() + ".";
    return "node '" + name + "' (" + domain + node.op_type() + ", opset " + std::to_string(opset_) + ")";
  }

  // ---- repeated layers ----
  //
  // Node-name scopes such as "/model/layers.3/..." or "/encoder/layer.3/..."
  // propose candidate blocks (a prefix with a number, at least two numbers
  // seen); each block is traced as a subgraph call whose parameters are its
  // float and narrow-integer initializers (is_block_parameter), and GraphRealizationContext's structural key decides
  // which blocks share a definition — the structure decides, the names only
  // propose.

  struct Block {
    enum class State { pending, inline_nodes, done } state = State::pending;
    std::string scope;            // "/model/layers.3/" (found by name)
    std::string instance;         // "repeat0.3" (found by structure)
    std::vector<int> nodes;       // in traced order
    std::vector<std::string> inputs;  // external non-parameter inputs, first-use order
    std::vector<std::string> params;  // parameter initializers read (is_block_parameter), first-use order
    std::vector<std::string> outputs; // values used after the block
  };

  /// Initializers of these dtypes become block parameters: floats, and
  /// integers narrower than 32 bits (quantized weights and biases). ONNX
  /// spells shapes, axes and indices as int32/int64, and those stay baked
  /// into the block, where the importer folds them.
  static bool is_block_parameter(DType dtype) {
    return is_float(dtype) || (is_integer(dtype) && dtype_info(dtype).bits < 32);
  }

  /// Inputs of integer ops whose initializers stay constants inside a block
  /// (no parameters): the integer kernels need their values at import — the
  /// 8-bit weights and zero points the CPU packs, the requantization's
  /// scales and zero points (constants the kernels read, not values computed
  /// at run time), the scales ONNX Runtime's QLinearAdd /
  /// QLinearGlobalAveragePool arithmetic is computed from.
  static std::vector<int> import_known_inputs(const onnx::NodeProto &node) {
    const std::string &op = node.op_type();
    if (op == "QLinearConv" || op == "QLinearMatMul")
      return {1, 3, 4, 5, 6, 7}; // and the scales and output zero point: the requantization's constants
    if (op == "QGemm")
      return {1, 3, 4, 5, 7, 8};
    if (op == "ConvInteger")
      return {1, 3}; // the 8-bit weight and its zero point (a dynamically quantized model's convs)
    if (op == "MatMulInteger")
      return {1, 3}; // unless they become parameters with their column sums (integer_gemm_companion)
    if (op == "QLinearAdd")
      return {1, 2, 4, 5, 6, 7};
    if (op == "QLinearGlobalAveragePool")
      return {1, 2, 3, 4};
    return {};
  }

  /// A MatMulInteger whose weight B is an 8-bit [K, N] initializer (its
  /// zero point one too, or absent) keeps B and the zero point as block
  /// parameters — one body for all of a dynamically quantized model's
  /// layers — with the column sums of B - b_zp as a third, derived
  /// parameter (NodeHost::companion "colsum"; the CPU packs B per call
  /// site: Cpu/GemmPanels.h). Makes that value; false where it cannot be
  /// made (B and its zero point then stay constants: import_known_inputs).
  bool integer_gemm_companion(const onnx::NodeProto &node) {
    if (node.op_type() != "MatMulInteger" || node.input_size() < 2)
      return false;
    auto initializer = [&](int i) -> const Val * {
      if (i >= node.input_size() || node.input(i).empty())
        return nullptr;
      auto it = values_.find(node.input(i));
      return it != values_.end() && it->second.kind == Val::Kind::known && !it->second.initializer.empty()
                 ? &it->second
                 : nullptr;
    };
    const Val *b = initializer(1), *zp = initializer(3);
    if (!b || (node.input_size() > 3 && !node.input(3).empty() && !zp))
      return false;
    std::string name = companion_name(node.input(1), integer_gemm_sums_key(node));
    if (values_.count(name))
      return derived_.count(name) != 0; // made for another reader of B with this zero point (a real name: no)
    std::optional<HostTensor> sums = integer_gemm_column_sums(b->data, zp ? &zp->data : nullptr);
    if (!sums)
      return false;
    Val v;
    v.kind = Val::Kind::known;
    v.data = std::move(*sums);
    v.initializer = name;
    values_[name] = std::move(v);
    derived_.insert(name);
    return true;
  }

  /// A ConvInteger whose 8-bit weight has at most kSmallIntegerConvWeight
  /// elements keeps it (and its zero point) as block parameters: converted
  /// at run time (a few elements per call) and convolved in f32, exact with
  /// any values (255 · 255 · 64 < 2^24), so blocks that differ only in such
  /// a weight share one body — tf2onnx splits a quantized depthwise conv
  /// into one single-channel ConvInteger per channel (YOLOv10: 120 blocks
  /// of a 3x3 weight each, 120 definitions before).
  bool small_integer_conv(const onnx::NodeProto &node) const {
    if (node.op_type() != "ConvInteger" || node.input_size() < 2)
      return false;
    auto w = values_.find(node.input(1));
    return w != values_.end() && w->second.kind == Val::Kind::known && !w->second.initializer.empty() &&
           w->second.data.numel() <= kSmallIntegerConvWeight;
  }
  static constexpr int64_t kSmallIntegerConvWeight = 64;

  /// The companion key of a MatMulInteger's column sums: they depend on
  /// B's zero point too (OnnxQuantized.cpp, integer_gemm, looks it up so).
  static std::string integer_gemm_sums_key(const onnx::NodeProto &node) {
    return "colsum:" + (node.input_size() > 3 ? node.input(3) : std::string());
  }

  static bool block_scope(const std::string &name, std::string &prefix, std::string &scope) {
    // The first path component "<word>[._]<digits>" followed by '/' or '.'.
    for (size_t i = 0; i < name.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(name[i])) || i == 0)
        continue;
      char sep = name[i - 1];
      if (sep != '.' && sep != '_' && sep != '/')
        continue;
      size_t j = i;
      while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j])))
        ++j;
      if (j >= name.size() || (name[j] != '/' && name[j] != '.'))
        continue;
      if (i < 2)
        continue;
      prefix = name.substr(0, i);
      scope = name.substr(0, j + 1);
      return true;
    }
    return false;
  }

  void find_blocks(const std::vector<int> &order) {
    std::map<std::string, std::map<std::string, std::vector<int>>> by_prefix; // prefix → scope → nodes
    for (int i : order) {
      const auto &node = graph_proto_.node(i);
      if (node.op_type() == "Constant" && node.name().empty())
        continue;
      std::string name = !node.name().empty() ? node.name() : node.output_size() ? node.output(0) : "";
      std::string prefix, scope;
      if (!block_scope(name, prefix, scope))
        continue;
      by_prefix[prefix][scope].push_back(i);
    }
    for (const auto &o : graph_proto_.output())
      if (!state_outputs_.count(o.name())) // a state output lives in its buffer
        graph_outputs_.insert(o.name());
    for (int i : order) {
      const auto &node = graph_proto_.node(i);
      for (const std::string &in : node.input())
        consumers_[in].push_back(i);
      if (integer_gemm_companion(node) || small_integer_conv(node))
        continue;
      for (int k : import_known_inputs(node))
        if (k < node.input_size())
          import_known_.insert(node.input(k));
    }
    for (auto &[prefix, scopes] : by_prefix) {
      if (scopes.size() < 2)
        continue;
      for (auto &[scope, nodes] : scopes) {
        Block block;
        block.scope = scope;
        block.nodes = nodes;
        add_block(std::move(block));
      }
    }
    find_structural_blocks(order);
  }

  /// Completes a block's inputs, parameters and outputs from its nodes and
  /// records it (unless it has no output or fewer than two nodes).
  bool add_block(Block block) {
    std::set<int> members(block.nodes.begin(), block.nodes.end());
    std::set<std::string> produced, seen_in;
    for (int i : block.nodes)
      for (const std::string &o : graph_proto_.node(i).output())
        produced.insert(o);
    for (int i : block.nodes)
      for (const std::string &in : graph_proto_.node(i).input()) {
        if (in.empty() || produced.count(in) || !seen_in.insert(in).second)
          continue;
        auto v = values_.find(in);
        bool param = v != values_.end() && !v->second.initializer.empty() &&
                     is_block_parameter(v->second.data.dtype()) && !import_known_.count(in);
        // A small initializer that nodes outside the block read too (an
        // exponent or epsilon every layer shares: ONNX Runtime's quantizer
        // turns Constant nodes into initializers) has one value for every
        // instance: a constant of the body, which the algebraic rewrites
        // (pow by a constant, the norm patterns' epsilon) can read.
        if (param && v->second.data.numel() <= kSharedConstantLimit)
          for (int c : consumers_[in])
            param = param && members.count(c) != 0;
        (param ? block.params : block.inputs).push_back(in);
      }
    // A MatMulInteger weight's column sums go with it (integer_gemm_companion).
    for (int i : block.nodes) {
      const auto &node = graph_proto_.node(i);
      if (node.op_type() != "MatMulInteger" || node.input_size() < 2)
        continue;
      std::string sums = companion_name(node.input(1), integer_gemm_sums_key(node));
      if (values_.count(sums) &&
          std::find(block.params.begin(), block.params.end(), node.input(1)) != block.params.end() &&
          std::find(block.params.begin(), block.params.end(), sums) == block.params.end())
        block.params.push_back(sums);
    }
    for (int i : block.nodes)
      for (const std::string &o : graph_proto_.node(i).output()) {
        bool outside = graph_outputs_.count(o) != 0;
        for (int c : consumers_[o])
          outside = outside || !members.count(c);
        if (outside && !o.empty())
          block.outputs.push_back(o);
      }
    if (block.outputs.empty() || block.nodes.size() < 2)
      return false;
    size_t id = blocks_.size();
    for (int i : block.nodes)
      block_of_[i] = id;
    blocks_.push_back(std::move(block));
    return true;
  }

  /// The dotted prefix all of `params` share ("layers.3" for
  /// "layers.3.fc1.weight", "layers.3.ln.bias"), or "".
  static std::string param_prefix(const std::vector<std::string> &params) {
    if (params.empty())
      return "";
    std::string prefix = params[0];
    for (const std::string &p : params) {
      size_t k = 0;
      while (k < prefix.size() && k < p.size() && prefix[k] == p[k])
        ++k;
      prefix.resize(k);
    }
    size_t dot = prefix.rfind('.');
    prefix = dot == std::string::npos ? "" : prefix.substr(0, dot);
    for (const std::string &p : params)
      if (p.size() <= prefix.size() + 1) // a parameter named just the prefix
        return "";
    return prefix;
  }

  /// Repeated blocks by structure alone, for nodes no name scope claimed
  /// (anonymized or numbered names like "MatMul_12"): runs of k >= 2
  /// consecutive copies of a node sequence in the graph's order, matched
  /// node by node — op, domain and attributes equal, and each input either
  /// produced exactly one copy later in the sequence (inside the copy, or the
  /// previous copy's result), the same value (a mask or table computed once),
  /// or an initializer/constant of the same type and shape. A contiguous
  /// range of a topological order cannot make a cycle. Among overlapping
  /// runs the one covering most nodes wins (then the shorter copy, then the
  /// earlier start). Whether copies share a definition is decided afterwards,
  /// as for named blocks, by the traced bodies' structural keys.
  void find_structural_blocks(const std::vector<int> &order) {
    // The file's order when it is topological (exporters keep a layer's nodes
    // together), else the computed one; Constant nodes are values, not steps.
    std::map<std::string, int> producer;
    for (int i = 0; i < graph_proto_.node_size(); ++i)
      for (const std::string &o : graph_proto_.node(i).output())
        producer[o] = i;
    std::vector<int> sorted(order);
    std::sort(sorted.begin(), sorted.end());
    bool file_order = true;
    for (int i : sorted)
      for (const std::string &in : graph_proto_.node(i).input()) {
        auto p = producer.find(in);
        file_order = file_order && (p == producer.end() || p->second < i);
      }
    std::vector<int> seq;
    for (int i : file_order ? sorted : order) {
      const auto &node = graph_proto_.node(i);
      if (!(node.op_type() == "Constant" && node.input_size() == 0))
        seq.push_back(i);
    }
    const int n = static_cast<int>(seq.size());
    if (n < 4)
      return;
    std::map<std::string, int> pos; // value → position of its producer in seq
    for (int k = 0; k < n; ++k)
      for (const std::string &o : graph_proto_.node(seq[k]).output())
        if (!o.empty())
          pos[o] = k;
    // Per position: a signature id (op, domain, attributes, arity), and per
    // input its producer's position (-1: not a node in seq) or a type id.
    std::map<std::string, int> ids;
    auto id_of = [&](const std::string &key) { return ids.emplace(key, static_cast<int>(ids.size())).first->second; };
    std::vector<int> sig(n);
    std::vector<std::vector<int>> in_pos(n), in_type(n);
    std::vector<char> barrier(n);
    for (int k = 0; k < n; ++k) {
      const auto &node = graph_proto_.node(seq[k]);
      barrier[k] = block_of_.count(seq[k]) != 0;
      std::string key = node.domain() + "\x1f" + node.op_type() + "\x1f" + std::to_string(node.input_size()) + "/" +
                        std::to_string(node.output_size());
      for (const auto &a : node.attribute())
        key += "\x1f" + a.SerializeAsString();
      sig[k] = id_of(key);
      for (const std::string &in : node.input()) {
        auto p = pos.find(in);
        in_pos[k].push_back(p == pos.end() ? -1 : p->second);
        std::string type = "-";
        if (auto v = values_.find(in); v != values_.end() && v->second.kind == Val::Kind::known)
        {
          type = "k" + std::string(dtype_name(v->second.data.dtype()));
          for (int64_t d : v->second.data.shape())
            type += "," + std::to_string(d);
        }
        else if (v != values_.end())
          type = "t" + in; // a traced graph input: only the same one matches
        in_type[k].push_back(in.empty() ? -1 : id_of(type));
      }
    }
    auto same = [&](int a, int b, int p) {
      if (barrier[a] || barrier[b] || sig[a] != sig[b])
        return false;
      const auto &na = graph_proto_.node(seq[a]), &nb = graph_proto_.node(seq[b]);
      for (size_t j = 0; j < in_pos[a].size(); ++j) {
        if (na.input(static_cast<int>(j)) == nb.input(static_cast<int>(j)))
          continue;
        int pa = in_pos[a][j], pb = in_pos[b][j];
        if (pa >= 0 || pb >= 0) {
          if (pa < 0 || pb < 0 || pb - pa != p)
            return false;
        } else if (in_type[a][j] != in_type[b][j] || in_type[a][j] < 0) {
          return false;
        }
      }
      return true;
    };
    constexpr int kMinCopy = 3; // nodes per copy
    // A bound on node comparisons, so that a hostile graph (thousands of
    // identical nodes) cannot make the search quadratic in time: past it,
    // the runs found so far are used. Counted, not timed: deterministic.
    int64_t budget = int64_t(1) << 25;
    struct Run {
      int start, period, copies;
    };
    std::vector<Run> runs;
    for (int i = 0; i + 2 * kMinCopy <= n && budget > 0; ++i) {
      Run best{i, 0, 0};
      std::vector<int> found;
      for (int p = kMinCopy; i + 2 * p <= n && budget > 0; ++p) {
        --budget;
        if (sig[i] != sig[i + p] || barrier[i])
          continue;
        bool multiple = false;
        for (int f : found)
          multiple = multiple || p % f == 0;
        if (multiple) // dominated: fewer, longer copies of the same run
          continue;
        int copies = 1;
        while (i + (copies + 1) * p <= n) {
          int j = 0;
          while (j < p && same(i + (copies - 1) * p + j, i + copies * p + j, p))
            ++j;
          budget -= j + 1;
          if (j < p)
            break;
          ++copies;
        }
        if (copies < 2)
          continue;
        found.push_back(p);
        if (copies * p > best.copies * best.period)
          best = Run{i, p, copies};
      }
      if (best.copies >= 2)
        runs.push_back(best);
    }
    // A copy that starts with an elementwise op on a computed value makes
    // that op a kernel of its own, reading its input back from memory (the
    // call boundary keeps it from the previous copy's last kernel): among
    // runs of equal coverage and period, one rotated to end with it wins.
    // An inference BatchNormalization is one too, and a copy that starts
    // with it also keeps it from folding into the conv before it (an MRZ
    // classifier's [BN, ReLU, conv, conv] copies: rotated, [conv, conv, BN,
    // ReLU], the BN folds at every call site and the ReLU is the conv's
    // epilogue).
    auto elementwise_start = [&](const Run &r) {
      static const std::set<std::string> elementwise = {
          "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu",
          "Selu", "Softplus", "Add", "Sub", "Mul", "Div", "BatchNormalization"};
      const auto &node = graph_proto_.node(seq[r.start]);
      return node.domain().empty() && elementwise.count(node.op_type()) &&
             std::any_of(in_pos[r.start].begin(), in_pos[r.start].end(), [](int p) { return p >= 0; });
    };
    std::stable_sort(runs.begin(), runs.end(), [&](const Run &a, const Run &b) {
      if (a.copies * a.period != b.copies * b.period)
        return a.copies * a.period > b.copies * b.period;
      if (a.period != b.period)
        return a.period < b.period;
      return !elementwise_start(a) && elementwise_start(b);
    });
    std::vector<char> taken(n);
    int run_id = 0;
    for (const Run &r : runs) {
      int end = r.start + r.copies * r.period;
      if (std::any_of(taken.begin() + r.start, taken.begin() + end, [](char t) { return t != 0; }))
        continue;
      std::fill(taken.begin() + r.start, taken.begin() + end, 1);
      std::vector<size_t> added;
      for (int c = 0; c < r.copies; ++c) {
        Block block;
        block.instance = "repeat" + std::to_string(run_id) + "." + std::to_string(c);
        for (int k = r.start + c * r.period; k < r.start + (c + 1) * r.period; ++k)
          block.nodes.push_back(seq[k]);
        if (add_block(std::move(block)))
          added.push_back(blocks_.size() - 1);
      }
      // Weights named like torch's ("layers.3.fc1.weight") name the instance
      // ("layers.3"), when every copy's prefix is distinct.
      std::set<std::string> prefixes;
      for (size_t b : added)
        prefixes.insert(param_prefix(blocks_[b].params));
      if (prefixes.size() == added.size() && !prefixes.count(""))
        for (size_t b : added)
          blocks_[b].instance = param_prefix(blocks_[b].params);
      ++run_id;
    }
  }

  /// A Cast of a 16-bit float initializer to f32 (weights stored in f16 or
  /// bf16, read in f32: an f16 export's mixed-precision casts, ONNX Runtime's
  /// keep_io_types): the widened values (exact) as an initializer of their
  /// own, like the precision policy's widening, instead of a conversion run
  /// on every call — whose results, in repeated layers, a block of casts of
  /// its own would hand to the layers' calls as weights that are no
  /// constants (not packed, copied per call). The CPU keeps such weights in
  /// 16 bits in its GEMM panels (their values are exact: Cpu/GemmPanels.h).
  std::optional<Val> widened_initializer(const onnx::NodeProto &node) {
    if (node.op_type() != "Cast" || !node.domain().empty() || node.input_size() != 1 || node.output_size() != 1 ||
        node.output(0).empty())
      return std::nullopt;
    auto it = values_.find(node.input(0));
    if (it == values_.end() || it->second.kind != Val::Kind::known || it->second.initializer.empty() ||
        (it->second.data.dtype() != DType::f16 && it->second.data.dtype() != DType::bf16))
      return std::nullopt;
    std::optional<DType> to;
    for (const auto &a : node.attribute())
      if (a.name() == "to" && a.type() == onnx::AttributeProto::INT)
        to = dtype_from_onnx(static_cast<int32_t>(a.i()));
    if (to != DType::f32)
      return std::nullopt;
    const HostTensor &narrow = it->second.data;
    Val v;
    v.kind = Val::Kind::known;
    v.data = HostTensor(DType::f32, narrow.shape());
    float *dst = v.data.data_as<float>();
    for (int64_t e = 0, n = narrow.numel(); e < n; ++e)
      dst[e] = static_cast<float>(narrow.get_f64(e));
    v.initializer = node.output(0);
    return v;
  }

  /// torch.onnx.export stores identical initializers once and names the
  /// others through Identity nodes ("layers.3.norm2.bias" = Identity of a
  /// shared tensor): those become initializers of their own name, so every
  /// layer reads its weights the same way.
  void alias_initializers(std::vector<int> &order) {
    std::vector<int> kept;
    for (int i : order) {
      const auto &node = graph_proto_.node(i);
      if (std::optional<Val> wide = widened_initializer(node)) {
        values_[node.output(0)] = std::move(*wide);
        continue;
      }
      if (node.op_type() == "Identity" && node.domain().empty() && node.input_size() == 1 &&
          node.output_size() == 1 && !node.output(0).empty()) {
        auto it = values_.find(node.input(0));
        if (it != values_.end() && it->second.kind == Val::Kind::known && !it->second.initializer.empty()) {
          Val v = it->second;
          v.initializer = node.output(0);
          values_[node.output(0)] = v;
          continue;
        }
      }
      kept.push_back(i);
    }
    order = kept;
  }

  /// The order to trace in: node indices (>= 0) and blocks (-1 - id), each
  /// block as one unit after everything its inputs come from. If contracting
  /// the blocks would make a cycle, blocks are dropped and nodes run alone.
  std::vector<int> schedule_units(const std::vector<int> &order) {
    if (blocks_.empty())
      return order;
    auto unit_of = [&](int node) {
      auto b = block_of_.find(node);
      return b == block_of_.end() ? node : -1 - static_cast<int>(b->second);
    };
    std::map<std::string, int> producer;
    for (int i : order)
      for (const std::string &o : graph_proto_.node(i).output())
        producer[o] = unit_of(i);
    std::vector<int> units;
    std::set<int> seen;
    for (int i : order)
      if (seen.insert(unit_of(i)).second)
        units.push_back(unit_of(i));
    std::map<int, std::set<int>> deps;
    std::map<int, std::vector<int>> users;
    for (int i : order) {
      int u = unit_of(i);
      for (const std::string &in : graph_proto_.node(i).input()) {
        auto p = producer.find(in);
        if (p != producer.end() && p->second != u && deps[u].insert(p->second).second)
          users[p->second].push_back(u);
      }
    }
    std::map<int, size_t> pending;
    for (int u : units)
      pending[u] = deps[u].size();
    std::vector<int> out = kahn_order(units, pending, users);
    if (out.size() != units.size()) { // a cycle through a block: no dedup
      blocks_.clear();
      block_of_.clear();
      return order;
    }
    return out;
  }

  bool block_ready(const Block &block) const {
    for (const std::string &in : block.inputs)
      if (!values_.count(in) && !poisoned_.count(in))
        return false;
    return true;
  }

  struct BodyFailed {};

  void run_block(Block &block) {
    block.state = Block::State::done;
    for (const std::string &in : block.inputs)
      if (poisoned_.count(in)) {
        for (int i : block.nodes)
          poison(graph_proto_.node(i));
        return;
      }
    // Traced inputs are call arguments; known and sym inputs bake into the body.
    std::vector<Tensor> args;
    std::vector<std::string> arg_names;
    std::vector<int64_t> arg_state_axes; // a state input passes its buffer
    for (const std::string &in : block.inputs)
      if (const Val &v = values_.at(in); v.kind == Val::Kind::traced) {
        args.push_back(v.state_axis >= 0 ? v.state_buffer : v.tensor);
        arg_names.push_back(in);
        arg_state_axes.push_back(v.state_axis);
      }
    // The instance is the scope in dotted form ("/encoder/layer.3/" →
    // "encoder.layer.3"); a parameter named "<instance>.<rest>" (torch's
    // initializer names) keeps <rest>, so its constant keeps the ONNX name.
    std::string instance = block.instance;
    for (char ch : block.scope)
      instance += ch == '/' ? '.' : ch;
    while (!instance.empty() && instance.front() == '.')
      instance.erase(instance.begin());
    while (!instance.empty() && instance.back() == '.')
      instance.pop_back();
    NamedTensors params;
    std::vector<std::string> param_names;
    for (size_t i = 0; i < block.params.size(); ++i) {
      const std::string &init = block.params[i];
      std::string rel;
      if (init.size() > instance.size() + 1 && init.compare(0, instance.size() + 1, instance + ".") == 0)
        rel = init.substr(instance.size() + 1);
      if (rel.empty() || params.count(rel)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "p%03zu", i);
        rel = buf;
      }
      param_names.push_back(rel);
      params.emplace(rel, Tensor::from_host(values_.at(init).data));
    }
    std::vector<std::string> traced_outputs;
    std::map<std::string, Val> folded_outputs;
    SubgraphBody body = [&](GraphRealizationContext &ctx, const std::vector<Tensor> &body_args,
                            const NamedTensors &body_params) {
      std::map<std::string, Val> saved;
      auto shadow = [&](const std::string &name, Val v) {
        if (!saved.count(name))
          saved[name] = values_.count(name) ? values_.at(name) : Val{};
        values_[name] = std::move(v);
      };
      for (size_t i = 0; i < arg_names.size(); ++i) {
        Val v;
        v.kind = Val::Kind::traced;
        v.tensor = body_args[i];
        if (arg_state_axes[i] >= 0) { // the body's own view of the buffer
          v.state_buffer = body_args[i];
          v.state_axis = arg_state_axes[i];
          v.tensor = state_view(v.state_buffer, v.state_axis);
        }
        shadow(arg_names[i], v);
      }
      for (size_t i = 0; i < block.params.size(); ++i) {
        Val v;
        v.kind = Val::Kind::traced;
        v.tensor = body_params.at(param_names[i]);
        shadow(block.params[i], v);
      }
      ++in_body_;
      size_t errors = diags_->error_count();
      for (int i : block.nodes)
        run_node(graph_proto_.node(i));
      --in_body_;
      std::vector<TensorTree> leaves;
      bool failed = diags_->error_count() != errors;
      traced_outputs.clear();
      folded_outputs.clear();
      for (const std::string &o : block.outputs) {
        auto it = values_.find(o);
        if (it == values_.end()) {
          failed = true;
          continue;
        }
        if (it->second.kind == Val::Kind::traced) {
          leaves.emplace_back(it->second.tensor);
          traced_outputs.push_back(o);
        } else {
          folded_outputs[o] = it->second;
        }
      }
      // Body values must not outlive the body.
      for (int i : block.nodes)
        for (const std::string &o : graph_proto_.node(i).output())
          values_.erase(o);
      for (auto &[name, v] : saved) {
        if (v.kind == Val::Kind::missing)
          values_.erase(name);
        else
          values_[name] = v;
      }
      if (failed)
        throw BodyFailed{};
      return TensorTree::list(std::move(leaves));
    };
    CallOptions call;
    call.instance = instance;
    call.name = "block";
    try {
      std::vector<Tensor> results = root_->call(call, body, args, params).flatten();
      for (size_t i = 0; i < traced_outputs.size(); ++i) {
        Val v;
        v.kind = Val::Kind::traced;
        v.tensor = results.at(i);
        values_[traced_outputs[i]] = v;
      }
      for (auto &[name, v] : folded_outputs)
        values_[name] = v;
      for (const std::string &p : block.params)
        used_params_.insert(p);
    } catch (const BodyFailed &) {
      for (int i : block.nodes)
        poison(graph_proto_.node(i));
    }
  }

  // ---- nodes ----

  // ---- Model state (--state): KV-cache pairs kept in place ----
  //
  // A pair: a graph input IN [.., past, ..] and a graph output OUT computed
  // as Concat(IN, new rows) along the axis of `past` (a symbolic dim). IN
  // becomes a state buffer [max_context, IN's other dims] (the growing axis
  // first, so each run's rows are contiguous and every prefix is a view);
  // readers of IN get the view of its first `past` rows, transposed back;
  // the Concat becomes buffer_append at row `past`; OUT leaves the graph's
  // outputs (the buffer holds it). docs/ONNX.md, "Model state".
  struct StatePair {
    std::string output;
    int64_t axis = -1;
  };
  std::map<std::string, StatePair> state_pairs_; // by input name
  std::set<std::string> state_outputs_;
  std::vector<std::string> state_buffers_; // the graph inputs' (C) names, in input order
  std::string state_length_;               // the symbol of `past`
  static constexpr const char *kStateCapacity = "max_context";

  /// Matches `name` against a --state side with at most one '*'; the text
  /// the star matched goes to `star`.
  static bool glob_match(const std::string &pattern, const std::string &name, std::string &star) {
    size_t at = pattern.find('*');
    if (at == std::string::npos)
      return star.clear(), pattern == name;
    std::string pre = pattern.substr(0, at), post = pattern.substr(at + 1);
    if (name.size() < pre.size() + post.size() || name.compare(0, pre.size(), pre) != 0 ||
        name.compare(name.size() - post.size(), post.size(), post) != 0)
      return false;
    star = name.substr(pre.size(), name.size() - pre.size() - post.size());
    return true;
  }

  void find_state_pairs() {
    const std::string &spec = options_.state;
    if (spec.empty())
      return;
    std::map<std::string, int> producer;
    for (int i = 0; i < graph_proto_.node_size(); ++i)
      for (const std::string &o : graph_proto_.node(i).output())
        producer[o] = i;
    std::map<std::string, const onnx::ValueInfoProto *> inputs;
    for (const auto &in : graph_proto_.input())
      if (!values_.count(in.name()))
        inputs[in.name()] = &in;
    // The pair's Concat: OUT = Concat(IN, x) along a dim of IN that is a
    // dim_param; "" when it is one, else why not.
    auto check = [&](const std::string &in, const std::string &out, StatePair &pair) -> std::string {
      auto p = producer.find(out);
      if (p == producer.end())
        return "no node computes the output '" + out + "'";
      const onnx::NodeProto &n = graph_proto_.node(p->second);
      if (n.op_type() != "Concat" || n.input_size() != 2 || n.input(0) != in)
        return "'" + out + "' is not Concat('" + in + "', new rows)";
      auto i = inputs.find(in);
      if (i == inputs.end() || !i->second->type().has_tensor_type() || !i->second->type().tensor_type().has_shape())
        return "'" + in + "' is no graph input with a shape";
      const auto &shape = i->second->type().tensor_type().shape();
      int64_t axis = 0;
      for (const auto &a : n.attribute())
        if (a.name() == "axis")
          axis = a.i();
      if (axis < 0)
        axis += shape.dim_size();
      if (axis < 0 || axis >= shape.dim_size() || !shape.dim(static_cast<int>(axis)).has_dim_param())
        return "'" + out + "' concatenates along a dim of '" + in + "' that is not symbolic (a dim_param)";
      pair = {out, axis};
      return "";
    };
    if (spec == "auto") {
      for (const auto &o : graph_proto_.output()) {
        auto p = producer.find(o.name());
        StatePair pair;
        if (p != producer.end() && graph_proto_.node(p->second).input_size() == 2 &&
            check(graph_proto_.node(p->second).input(0), o.name(), pair).empty())
          state_pairs_[graph_proto_.node(p->second).input(0)] = pair;
      }
      if (state_pairs_.empty())
        diags_->error(ErrorCode::InvalidArgument, path_, "--state auto",
                     "no graph output is Concat(graph input, new rows) along a symbolic dim: the model has no "
                     "KV-cache pairs to keep as state");
    } else {
      size_t start = 0;
      while (start <= spec.size()) {
        size_t comma = spec.find(',', start);
        std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        start = comma == std::string::npos ? spec.size() + 1 : comma + 1;
        size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
          diags_->error(ErrorCode::InvalidArgument, path_, "--state " + item, "expected IN=OUT (or 'auto')");
          continue;
        }
        std::string in_pat = item.substr(0, eq), out_pat = item.substr(eq + 1);
        size_t matched = 0;
        for (const auto &[name, info] : inputs) {
          std::string star, out_star;
          if (!glob_match(in_pat, name, star))
            continue;
          std::string out = out_pat;
          if (size_t at = out.find('*'); at != std::string::npos)
            out.replace(at, 1, star);
          ++matched;
          StatePair pair;
          std::string why = check(name, out, pair);
          if (!why.empty())
            diags_->error(ErrorCode::InvalidArgument, path_, "--state " + item, why);
          else
            state_pairs_[name] = pair;
        }
        if (!matched)
          diags_->error(ErrorCode::InvalidArgument, path_, "--state " + item,
                       "no graph input matches '" + in_pat + "'");
      }
    }
    for (const auto &[in, pair] : state_pairs_)
      state_outputs_.insert(pair.output);
    for (const auto &in : graph_proto_.input()) // the buffers' capacity is a symbol of its own
      if (!state_pairs_.empty() && in.type().has_tensor_type())
        for (const auto &d : in.type().tensor_type().shape().dim())
          if (d.has_dim_param() && d.dim_param() == kStateCapacity)
            diags_->error(ErrorCode::InvalidArgument, path_, "--state",
                         "the graph input '" + in.name() + "' has a dim named '" + kStateCapacity +
                             "', the name the state's capacity takes");
  }

  /// A state input's buffer shape: [max_context, its dims but the axis].
  /// Records the length symbol (the axis' dim: one for every pair).
  Shape state_buffer_shape(const StatePair &pair, const Shape &shape) {
    const Dim &length = shape[static_cast<size_t>(pair.axis)];
    if (!length.is_symbol())
      throw Error(ErrorCode::InvalidArgument,
                  "--state: the dim the cache grows along is " + length.to_string() +
                      ", not a symbol (do not pin it with --dim)");
    std::string symbol = length.symbols().at(0);
    if (!state_length_.empty() && state_length_ != symbol)
      throw Error(ErrorCode::InvalidArgument, "--state: the caches grow along different dims ('" + state_length_ +
                                                  "' and '" + symbol + "'); a state has one length");
    state_length_ = symbol;
    Shape out{Dim(kStateCapacity)};
    for (size_t d = 0; d < shape.size(); ++d)
      if (static_cast<int64_t>(d) != pair.axis) {
        if (!shape[d].is_static())
          throw Error(ErrorCode::InvalidArgument, "--state: dim " + std::to_string(d) + " of the cache is " +
                                                      shape[d].to_string() + "; only the growing dim may be symbolic");
        out.push_back(shape[d]);
      }
    return out;
  }

  /// The logical value of a state buffer: its first `length` rows, the
  /// rows' axis moved back to `axis`.
  Tensor state_view(const Tensor &buffer, int64_t axis) const {
    return ops::transpose(ops::buffer_prefix(buffer, Dim(state_length_)), rows_back(buffer.shape().size(), axis));
  }
  /// The permutation moving dim 0 (the rows) to `axis`, and its inverse.
  static std::vector<int64_t> rows_back(size_t rank, int64_t axis) {
    std::vector<int64_t> perm;
    for (int64_t j = 0; j < static_cast<int64_t>(rank); ++j)
      perm.push_back(j == axis ? 0 : j < axis ? j + 1 : j);
    return perm;
  }
  static std::vector<int64_t> rows_first(size_t rank, int64_t axis) {
    std::vector<int64_t> perm{axis};
    for (int64_t j = 0; j < static_cast<int64_t>(rank); ++j)
      if (j != axis)
        perm.push_back(j);
    return perm;
  }

  /// A pair's Concat(IN, x): x's rows appended to IN's buffer in place; the
  /// result is the view of every filled row. False for any other node.
  bool append_to_state(const onnx::NodeProto &proto, const OnnxNode &node, std::vector<Val> &results) {
    if (proto.op_type() != "Concat" || proto.input_size() != 2 || proto.output_size() != 1 ||
        !values_.count(proto.input(0)))
      return false;
    const Val &past = values_.at(proto.input(0));
    if (past.state_axis < 0 || !state_outputs_.count(proto.output(0)))
      return false;
    size_t rank = past.tensor.shape().size();
    Tensor rows = ops::transpose(tensor_of(values_.at(proto.input(1)), node, 1), rows_first(rank, past.state_axis));
    Tensor all = ops::buffer_append(past.state_buffer, rows, Dim(state_length_));
    state_appended_.insert(proto.input(0));
    Val v;
    v.kind = Val::Kind::traced;
    v.tensor = ops::transpose(all, rows_back(rank, past.state_axis));
    results = {v};
    Dim advance = rows.shape()[0];
    if (!state_advance_)
      state_advance_ = advance;
    else if (*state_advance_ != advance)
      throw Error(ErrorCode::InvalidArgument, "--state: this cache appends " + advance.to_string() +
                                                  " rows, another " + state_advance_->to_string() +
                                                  "; a state grows by one count per run");
    return true;
  }
  std::optional<Dim> state_advance_;
  std::set<std::string> state_appended_; // the pairs whose Concat was traced

  /// The root's ModelState, once the graph is traced.
  void declare_state(Graph &graph) {
    for (const auto &[in, pair] : state_pairs_)
      if (!state_appended_.count(in)) { // e.g. inside an If branch not taken: its rows would never be written
        diags_->error(ErrorCode::InvalidArgument, path_, "--state",
                      "the Concat computing '" + pair.output + "' from '" + in + "' was not traced as a cache append");
        return;
      }
    if (!graph.symbol_table().contains(state_length_)) // no other input's dim: passed (NAME_step: the state's)
      graph.symbol_table().declare(state_length_, SymbolOrigin::DimArgument);

    graph.symbol_table().set_model_state({state_buffers_, state_length_, kStateCapacity, *state_advance_});
  }

  void run_node(const onnx::NodeProto &proto) {
    if (proto.op_type() == "If" && (proto.domain().empty() || proto.domain() == "ai.onnx"))
      return run_if(proto);
    std::vector<const Val *> inputs;
    for (const std::string &in : proto.input()) {
      if (in.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      if (poisoned_.count(in)) { // reported where it failed
        poison(proto);
        return;
      }
      inputs.push_back(&values_.at(in));
    }
    OnnxNode node(proto, opset_, inputs, *this);
    std::vector<Val> results;
    try {
      if (!proto.domain().empty() && proto.domain() != "ai.onnx" && !is_contrib_op(proto.domain(), proto.op_type()))
        throw Error(ErrorCode::OnnxUnsupportedOp, "the domain '" + proto.domain() + "' is not supported");
      if (opset_ == 0)
        throw Error(ErrorCode::OnnxFormat, "the model imports no ai.onnx opset");
      // The IR nodes recorded for this node carry its name (or its first
      // output's): maxc profile names the nodes behind each kernel.
      std::optional<NodeNameScope> named;
      if (auto *graph_ctx = dynamic_cast<GraphRealizationContext *>(RealizationContext::current()))
        named.emplace(*graph_ctx, !proto.name().empty() ? proto.name() : proto.output_size() ? proto.output(0) : "");
      if (!append_to_state(proto, node, results))
        results = evaluate(node);
    } catch (const Error &e) {
      diags_->error(e.code(), path_, describe_node(proto), e.message());
      if (e.code() == ErrorCode::OnnxUnsupportedOp &&
          std::find(info_.unsupported_ops.begin(), info_.unsupported_ops.end(), proto.op_type()) ==
              info_.unsupported_ops.end())
        info_.unsupported_ops.push_back(proto.op_type());
      poison(proto);
      return;
    }
    for (int i = 0; i < proto.output_size(); ++i) {
      const std::string &name = proto.output(i);
      if (name.empty())
        continue;
      if (static_cast<size_t>(i) >= results.size() || results[i].kind == Val::Kind::missing) {
        diags_->error(ErrorCode::OnnxUnsupportedOp, path_, describe_node(proto),
                     "output " + std::to_string(i) + " ('" + name + "') is not supported");
        poisoned_.insert(name);
        continue;
      }
      values_[name] = std::move(results[i]);
    }
  }

  // ---- If, resolved at import ----
  //
  // An If whose condition is known at import time (a constant, a folded
  // shape computation, or computed from inputs pinned with --bind) is
  // resolved here: the taken branch's nodes run as if they were the graph's
  // own, in their dependency order, reading outer values by name (ONNX's
  // lexical scoping), and the other branch is never read. Nested Ifs
  // resolve the same way, at most kMaxIfDepth deep. A condition known only
  // at run time is an error that says what to pin.

  static constexpr int kMaxIfDepth = 64;

  bool has_subgraph_nodes() const {
    for (const auto &n : graph_proto_.node())
      for (const auto &a : n.attribute())
        if (a.has_g() || a.graphs_size() > 0)
          return true;
    return false;
  }

  /// The names `graph`'s nodes (and nested subgraphs) read that `graph` does
  /// not define: the outer values a branch captures. Iterative.
  static std::set<std::string> captured_names(const onnx::GraphProto &graph) {
    std::set<std::string> out;
    std::vector<std::pair<const onnx::GraphProto *, std::set<std::string>>> stack;
    auto defined_in = [](const onnx::GraphProto &g, std::set<std::string> inherited) {
      for (const auto &t : g.initializer())
        inherited.insert(t.name());
      for (const auto &in : g.input())
        inherited.insert(in.name());
      for (const auto &n : g.node())
        for (const std::string &o : n.output())
          inherited.insert(o);
      return inherited;
    };
    stack.push_back({&graph, defined_in(graph, {})});
    for (size_t visited = 0; !stack.empty(); ++visited) {
      auto [g, defined] = stack.back();
      stack.pop_back();
      if (visited > 4096)
        break; // pathological: run_if reports any name this leaves out
      auto read = [&](const std::string &name) {
        if (!name.empty() && !defined.count(name))
          out.insert(name);
      };
      for (const auto &n : g->node()) {
        for (const std::string &in : n.input())
          read(in);
        for (const auto &a : n.attribute()) {
          if (a.has_g())
            stack.push_back({&a.g(), defined_in(a.g(), defined)});
          for (const auto &sub : a.graphs())
            stack.push_back({&sub, defined_in(sub, defined)});
        }
      }
      for (const auto &o : g->output())
        read(o.name());
    }
    return out;
  }

  /// What node `proto` reads: its inputs, and for a node with subgraph
  /// attributes (If) the outer values its subgraphs capture.
  static std::vector<std::string> reads_of(const onnx::NodeProto &proto) {
    std::vector<std::string> out(proto.input().begin(), proto.input().end());
    for (const auto &a : proto.attribute()) {
      if (a.has_g())
        for (const std::string &c : captured_names(a.g()))
          out.push_back(c);
      for (const auto &sub : a.graphs())
        for (const std::string &c : captured_names(sub))
          out.push_back(c);
    }
    return out;
  }

  /// The graph inputs (not initializers, not pinned) whose values `name` is
  /// computed from, through the outer graph's nodes; sorted.
  std::vector<std::string> graph_inputs_behind(const std::string &name) const {
    std::map<std::string, const onnx::NodeProto *> producer;
    for (const auto &n : graph_proto_.node())
      for (const std::string &o : n.output())
        producer[o] = &n;
    std::set<std::string> inputs, seen{name};
    std::vector<std::string> work{name};
    while (!work.empty() && seen.size() < 100000) {
      std::string v = work.back();
      work.pop_back();
      auto it = values_.find(v);
      if (it != values_.end() && !it->second.graph_input.empty()) {
        inputs.insert(it->second.graph_input);
        continue;
      }
      auto p = producer.find(v);
      if (p == producer.end())
        continue;
      for (const std::string &in : reads_of(*p->second))
        if (!in.empty() && seen.insert(in).second)
          work.push_back(in);
    }
    return {inputs.begin(), inputs.end()};
  }

  void run_if(const onnx::NodeProto &proto) {
    const std::string where = describe_node(proto);
    auto fail = [&](ErrorCode code, const std::string &message) {
      diags_->error(code, path_, where, message);
      poison(proto);
    };
    if (proto.input_size() != 1 || proto.input(0).empty())
      return fail(ErrorCode::OnnxGraph, "If takes one input, the condition; got " + std::to_string(proto.input_size()));
    const std::string &cname = proto.input(0);
    if (poisoned_.count(cname))
      return poison(proto);
    auto c = values_.find(cname);
    if (c == values_.end())
      return fail(ErrorCode::OnnxGraph, "the condition '" + cname + "' is not defined");
    std::optional<bool> cond;
    if (c->second.kind == Val::Kind::known) {
      if (c->second.data.numel() != 1)
        return fail(ErrorCode::OnnxGraph, "the condition '" + cname + "' must hold one element, got shape " +
                                              shape_to_string(Shape(c->second.data.shape().begin(), c->second.data.shape().end())));
      cond = c->second.data.get_f64(0) != 0;
    } else if (c->second.kind == Val::Kind::sym && c->second.dims.size() == 1 && c->second.dims[0].is_static()) {
      cond = c->second.dims[0].value() != 0;
    }
    std::string run_time_failure; // why tracing both branches failed, if it did
    if (!cond && c->second.kind == Val::Kind::traced && root_ && mode_ == Mode::graph) {
      if (if_depth_ >= kMaxIfDepth)
        return fail(ErrorCode::OnnxGraph, "If nodes nest more than " + std::to_string(kMaxIfDepth) + " deep");
      ++if_depth_;
      struct Leave {
        int &depth;
        ~Leave() { --depth; }
      } leave{if_depth_};
      // The branches' diagnostics go to a scratch engine: on success its
      // warnings are passed on; on failure the If is reported as before (the
      // pin to try) with the first reason, not each branch error.
      DiagnosticEngine scratch, *outer = diags_;
      diags_ = &scratch;
      std::optional<std::string> failed;
      try {
        failed = run_if_at_run_time(proto, c->second.tensor, where);
      } catch (...) {
        diags_ = outer;
        throw;
      }
      diags_ = outer;
      if (!failed) {
        for (const Diagnostic &d : scratch.diagnostics())
          diags_->report(d);
        return;
      }
      run_time_failure = *failed;
    }
    if (!cond) {
      std::string message = "the condition '" + cname + "' is known only at run time, and the If cannot be " +
                             "compiled as a run-time branch";
      std::vector<std::string> behind = graph_inputs_behind(cname);
      for (const std::string &in : behind)
        if (std::find(info_.needs_value.begin(), info_.needs_value.end(), in) == info_.needs_value.end())
          info_.needs_value.push_back(in);
      if (behind.size() == 1) {
        message += "; it is computed from the graph input '" + behind[0] + "': fix it with --bind " + behind[0] +
                   "=VALUE if that input is a setting, not data, and only the taken branch is imported";
      } else if (!behind.empty()) {
        std::string list;
        for (const std::string &in : behind)
          list += (list.empty() ? "" : ", ") + in;
        message += "; it is computed from the graph inputs " + list +
                   ": fix them with --bind NAME=VALUE if they are settings, not data, and only the taken branch is "
                   "imported";
      } else {
        message += " (it depends on computed tensor values, not only on shapes)";
      }
      if (!run_time_failure.empty())
        message += " (as a run-time If: " + run_time_failure + ")";
      return fail(ErrorCode::OnnxNotFoldable, message);
    }
    const char *taken = *cond ? "then_branch" : "else_branch";
    const onnx::GraphProto *branch = nullptr;
    for (const auto &a : proto.attribute())
      if (a.name() == taken && a.has_g())
        branch = &a.g();
    if (!branch)
      return fail(ErrorCode::OnnxGraph, std::string("If has no ") + taken + " graph");
    if (branch->output_size() != proto.output_size())
      return fail(ErrorCode::OnnxGraph, std::string(taken) + " has " + std::to_string(branch->output_size()) +
                                            " outputs; the If has " + std::to_string(proto.output_size()));
    if (if_depth_ >= kMaxIfDepth)
      return fail(ErrorCode::OnnxGraph, "If nodes nest more than " + std::to_string(kMaxIfDepth) + " deep");
    if (!branch->sparse_initializer().empty())
      return fail(ErrorCode::OnnxUnsupportedType, std::string(taken) + ": sparse initializers are not supported");
    ++if_depth_;
    struct Leave {
      int &depth;
      ~Leave() { --depth; }
    } leave{if_depth_};
    const std::string in_branch = where + " " + taken;
    // The branch's initializers, then its nodes in dependency order.
    for (const auto &t : branch->initializer())
      read_initializer(t, in_branch + " initializer '" + t.name() + "'");
    size_t errors = diags_->error_count();
    std::vector<int> order = dependency_order(*branch, in_branch);
    if (diags_->error_count() != errors)
      return poison(proto);
    for (int i : order)
      run_node(branch->node(i));
    for (int i = 0; i < proto.output_size(); ++i) {
      const std::string &out = proto.output(i), &inner = branch->output(i).name();
      if (out.empty())
        continue;
      if (poisoned_.count(inner)) {
        poisoned_.insert(out);
        continue;
      }
      auto v = values_.find(inner);
      if (v == values_.end()) {
        diags_->error(ErrorCode::OnnxGraph, path_, where,
                     std::string(taken) + " output '" + inner + "' is not defined in the branch or around it");
        poisoned_.insert(out);
        continue;
      }
      Val copy = v->second;
      values_[out] = std::move(copy);
    }
  }

  /// An If whose condition is a run-time tensor: an `if` node (ops::cond)
  /// whose bodies are the two branches, each traced with the traced outer
  /// values it reads as explicit captures (known values become constants of
  /// the body, shape values stay shape values). Returns nullopt when the
  /// node is recorded, else why not (the caller reports it); the importer's
  /// values are as before either way.
  std::optional<std::string> run_if_at_run_time(const onnx::NodeProto &proto, const Tensor &cond_tensor,
                                                const std::string &where) {
    const onnx::GraphProto *branches[2] = {nullptr, nullptr};
    for (const auto &a : proto.attribute())
      for (int b = 0; b < 2; ++b)
        if (a.name() == (b == 0 ? "then_branch" : "else_branch") && a.has_g())
          branches[b] = &a.g();
    for (int b = 0; b < 2; ++b) {
      const char *name = b == 0 ? "then_branch" : "else_branch";
      if (!branches[b])
        return std::string("If has no ") + name + " graph";
      if (branches[b]->output_size() != proto.output_size())
        return std::string(name) + " has " + std::to_string(branches[b]->output_size()) + " outputs; the If has " +
               std::to_string(proto.output_size());
      if (!branches[b]->sparse_initializer().empty())
        return std::string(name) + ": sparse initializers are not supported";
    }
    // The traced outer values either branch reads: the captures, in name order.
    std::vector<std::string> capture_names;
    std::vector<Tensor> captures;
    std::set<std::string> read = captured_names(*branches[0]);
    for (const std::string &n : captured_names(*branches[1]))
      read.insert(n);
    for (const std::string &n : read) {
      auto v = values_.find(n);
      if (v == values_.end())
        return "'" + n + "' is read by a branch but defined neither in it nor around it";
      if (poisoned_.count(n))
        return "'" + n + "' failed to import";
      if (v->second.kind == Val::Kind::traced) {
        capture_names.push_back(n);
        captures.push_back(v->second.tensor);
      }
    }
    std::string why;
    auto trace_branch = [&](int b) {
      return [&, b](const std::vector<Tensor> &body_captures) {
        const onnx::GraphProto &branch = *branches[b];
        const std::string in_branch = where + (b == 0 ? " then_branch" : " else_branch");
        std::map<std::string, Val> saved = values_; // the branch's names are its own
        std::set<std::string> saved_poison = poisoned_;
        ++in_body_;
        struct Restore {
          Importer &self;
          std::map<std::string, Val> &values;
          std::set<std::string> &poison;
          ~Restore() {
            --self.in_body_;
            self.values_ = std::move(values);
            self.poisoned_ = std::move(poison);
          }
        } restore{*this, saved, saved_poison};
        for (size_t i = 0; i < capture_names.size(); ++i) {
          Val v;
          v.kind = Val::Kind::traced;
          v.tensor = body_captures[i];
          values_[capture_names[i]] = v;
        }
        size_t errors = diags_->error_count();
        for (const auto &t : branch.initializer())
          read_initializer(t, in_branch + " initializer '" + t.name() + "'");
        std::vector<int> order = dependency_order(branch, in_branch);
        for (int i : order)
          if (diags_->error_count() == errors)
            run_node(branch.node(i));
        std::vector<Tensor> outs;
        for (int i = 0; i < branch.output_size() && diags_->error_count() == errors; ++i) {
          const std::string &inner = branch.output(i).name();
          auto v = values_.find(inner);
          if (v == values_.end() || poisoned_.count(inner)) {
            why = in_branch + ": output '" + inner + "' is not computed";
            throw BodyFailed{};
          }
          OnnxNode dummy(proto, opset_, {}, *this);
          outs.push_back(tensor_of(v->second, dummy, 0));
        }
        if (diags_->error_count() != errors) {
          why = diags_->diagnostics().back().message;
          throw BodyFailed{};
        }
        return outs;
      };
    };
    std::vector<Tensor> results;
    try {
      std::optional<NodeNameScope> named;
      if (auto *graph_ctx = dynamic_cast<GraphRealizationContext *>(RealizationContext::current()))
        named.emplace(*graph_ctx, !proto.name().empty() ? proto.name() : proto.output(0));
      Tensor pred = cond_tensor.shape().empty() ? cond_tensor : ops::reshape(cond_tensor, Shape{});
      results = ops::cond(pred, trace_branch(0), trace_branch(1), captures,
                          if_names_.mangle(proto.name().empty() ? "if" : proto.name(), "if"));
    } catch (const BodyFailed &) {
      return why.empty() ? std::string("a branch failed to import") : why;
    } catch (const Error &e) {
      return e.message();
    }
    for (int i = 0; i < proto.output_size(); ++i)
      if (!proto.output(i).empty()) {
        Val v;
        v.kind = Val::Kind::traced;
        v.tensor = results.at(static_cast<size_t>(i));
        values_[proto.output(i)] = v;
      }
    return std::nullopt;
  }

  void poison(const onnx::NodeProto &proto) {
    for (const std::string &o : proto.output())
      if (!o.empty())
        poisoned_.insert(o);
  }

  std::vector<Val> evaluate(OnnxNode &node) {
    const std::string &op = node.op();
    if (!is_supported_op(op) && !is_contrib_op(node.proto().domain(), op))
      throw Error(ErrorCode::OnnxUnsupportedOp, "the op " + op + " is not supported");
    if (op == "Loop")
      return loop(node, *this);
    if (op == "Scan")
      return scan(node, *this);
    // Ops on shapes alone, and folding on symbolic dims.
    if (std::optional<std::vector<Val>> folded = fold_shape_op(node))
      return *folded;
    bool any_sym = false, all_known = true, all_integer = true;
    int64_t known_elements = 0;
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      if (!node.has(i))
        continue;
      const Val &v = node.val(i);
      any_sym = any_sym || v.kind == Val::Kind::sym;
      all_known = all_known && v.kind == Val::Kind::known;
      if (v.kind == Val::Kind::known) {
        known_elements += v.data.numel();
        all_integer = all_integer && !is_float(v.data.dtype());
      }
    }
    if (any_sym)
      if (std::optional<std::vector<Val>> folded = fold_symbolic(node))
        return *folded;
    if (all_known && known_elements <= (all_integer ? kFoldLimitIntegers : kFoldLimit) && is_deterministic(op) &&
        small_results(node)) {
      // Evaluate at import time with the same op mapping.
      Mode saved = mode_;
      mode_ = Mode::eager;
      std::vector<Val> out;
      try {
        EagerRealizationContext eager;
        for (const Tensor &t : map_node(node)) {
          Val v;
          if (!t.is_null()) {
            v.kind = Val::Kind::known;
            v.data = t.realize().host();
          }
          out.push_back(std::move(v));
        }
      } catch (...) {
        mode_ = saved;
        throw;
      }
      mode_ = saved;
      return out;
    }
    std::vector<Val> out;
    for (const Tensor &t : map_node(node)) {
      Val v;
      if (!t.is_null()) {
        v.kind = Val::Kind::traced;
        v.tensor = t;
      }
      out.push_back(std::move(v));
    }
    return out;
  }

  /// Whether every value the node's mapping makes is static and at most
  /// kMaxFoldedElements elements: a dry run into a scratch graph, so that
  /// folding ConstantOfShape([1e9, 1e9]) never allocates.
  bool small_results(OnnxNode &node) {
    constexpr int64_t kMaxFoldedElements = int64_t(1) << 24;
    Graph scratch("fold");
    Mode saved = mode_;
    mode_ = Mode::eager; // known values become scratch constants, not weights
    bool ok = true;
    try {
      GraphRealizationContext ctx(scratch);
      map_node(node);
    } catch (const Error &) {
      ok = true; // the real evaluation reports it
    }
    mode_ = saved;
    for (const maxc::Node &n : scratch.nodes())
      for (ValueId id : n.results) {
        const Shape &shape = scratch.type_of(id).shape;
        if (!shape_is_static(shape)) {
          ok = false;
          continue;
        }
        int64_t numel = 1;
        for (const Dim &d : shape)
          if (__builtin_mul_overflow(numel, d.value(), &numel))
            numel = INT64_MAX;
        ok = ok && numel <= kMaxFoldedElements;
      }
    return ok;
  }

  Tensor output_tensor(const Val &v, const std::string &name) {
    OnnxNode dummy_node(graph_proto_.node_size() ? graph_proto_.node(0) : onnx::NodeProto::default_instance(), opset_,
                    {}, *this);
    if (v.kind == Val::Kind::traced && !v.graph_input.empty())
      return ops::reshape(v.tensor, v.tensor.shape()); // an input passed straight through: its own buffer
    if (v.kind == Val::Kind::traced)
      return v.tensor;
    if (v.kind == Val::Kind::known) {
      Tensor t = tensor_of(v, dummy_node, 0);
      return ops::reshape(t, t.shape()); // a constant output still needs a node writing it
    }
    if (v.kind == Val::Kind::sym) // a model output holding shape values: read from the dims at run time
      return ops::dim_values(v.dims, v.dtype, v.scalar);
    throw Error(ErrorCode::OnnxGraph, "is not computed");
  }

  const onnx::ModelProto &model_;
  const onnx::GraphProto &graph_proto_;
  std::string path_, dir_;
  const LoadOptions &options_;
  DiagnosticEngine *diags_; // a scratch engine while a run-time If is tried (run_if)
  const OnnxImportOptions &onnx_;
  OnnxImportInfo &info_;
  LoadedModel &out_;
  int64_t opset_ = 0;
  std::set<std::string> domains_;
  std::set<std::string> defined_, poisoned_;
  std::map<std::string, Val> values_;
  // Inputs and outputs are named through the one C-name mangler, in the
  // order describe_interface names them, so its second pass changes nothing.
  CNameMangler names_, dim_names_, constant_names_;
  std::set<std::string> max_dims_used_; // --max-dim names that named a symbol or input
  std::map<std::string, Tensor> initializer_tensors_;
  std::map<const onnx::TensorProto *, HostTensor> body_initializers_; // Loop/Scan bodies', read once
  static constexpr int64_t kMaxBodyRuns = 16384; // Loop/Scan iterations in all, nested ones included
  int64_t body_runs_ = 0;
  GraphRealizationContext *root_ = nullptr;
  Mode mode_ = Mode::graph;
  int in_body_ = 0;
  int if_depth_ = 0; // Ifs being resolved (run_if)
  CNameMangler if_names_; // the bodies of run-time Ifs: "<name>.then" / "<name>.else", unique
  std::vector<Block> blocks_;
  std::map<int, size_t> block_of_;
  std::set<std::string> graph_outputs_;
  std::map<std::string, std::vector<int>> consumers_;
  std::set<std::string> import_known_; // initializers kept constant inside blocks (import_known_inputs)
  std::set<std::string> derived_;      // values the importer made (integer_gemm_companion), not the file's
  std::set<std::string> used_params_;
};

} // namespace

} // namespace onnx_import

LoadedModel load_onnx_model(const std::string &bytes, const std::string &path, const LoadOptions &options,
                            DiagnosticEngine &diagnostics, const OnnxImportOptions &onnx, OnnxImportInfo *info) {
  LoadedModel out;
  auto start = std::chrono::steady_clock::now();
  out.files_read.push_back(path);
  OnnxImportInfo local_info;
  OnnxImportInfo &inf = info ? *info : local_info;
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) || !model.ParseFromString(bytes)) {
    diagnostics.error(ErrorCode::OnnxFormat, path, "",
                      "not a readable ONNX model (a truncated or corrupt protobuf, or not an ONNX file at all)");
    return out;
  }
  if (!model.has_graph()) {
    diagnostics.error(ErrorCode::OnnxFormat, path, "", "the ONNX model has no graph");
    return out;
  }
  // ONNX Runtime's QDQ groups become the integer ops it runs them as
  // (OnnxQdq.cpp; --no-qdq-fusion keeps the float composition).
  size_t qdq_groups = 0;
  if (options.fuse_qdq) {
    try {
      qdq_groups = static_cast<size_t>(
          onnx_import::fuse_qdq(model, path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'))));
    } catch (const Error &e) {
      diagnostics.report(Diagnostic{Severity::error, e.code(), path, e.location(), e.message()});
      return out;
    }
  }
  // maxc run knows the inputs' values: an input a node needs the value of
  // at import (Squeeze's axes, CumSum's axis) that is a small integer
  // tensor is bound to it, as --bind would, and the import runs again.
  OnnxImportOptions pins = onnx;
  for (int round = 0;; ++round) {
    DiagnosticEngine scratch;
    bool may_retry = !options.input_values.empty() && round < 8;
    DiagnosticEngine &diags = may_retry ? scratch : diagnostics;
    LoadedModel attempt;
    attempt.files_read = out.files_read;
    attempt.bound_from_values = out.bound_from_values;
    inf = OnnxImportInfo{};
    try {
      attempt.graph = onnx_import::Importer(model, path, options, diags, pins, inf, attempt).run();
      if (attempt.graph)
        attempt.graph->verify();
    } catch (const Error &e) {
      diags.report(Diagnostic{Severity::error, e.code(), path, e.location(), e.message()});
      attempt.graph.reset();
    }
    bool added = false;
    if (!attempt.graph && may_retry)
      for (const std::string &name : inf.needs_value) {
        auto it = options.input_values.find(name);
        if (it == options.input_values.end() || pins.pinned_inputs.count(name) || !is_integer(it->second.dtype()) ||
            it->second.numel() > 64)
          continue;
        pins.pinned_inputs[name] = it->second;
        out.bound_from_values.push_back(name);
        added = true;
      }
    if (!added) {
      if (&diags == &scratch)
        for (const Diagnostic &d : scratch.diagnostics())
          diagnostics.report(d);
      std::vector<std::string> bound = std::move(out.bound_from_values);
      out = std::move(attempt);
      out.bound_from_values = std::move(bound);
      break;
    }
  }
  if (out.graph) {
    const Graph &g = *out.graph;
    out.stats.nodes = g.nodes().size();
    out.stats.subgraph_definitions = g.subgraphs().size();
    for (const Node &n : g.nodes())
      out.stats.subgraph_calls += is_call(n);
    for (const auto &[name, data] : g.constants()) {
      ++out.stats.constants;
      out.stats.constant_bytes += data.nbytes();
    }
    for (const auto &[name, sub] : g.subgraphs()) {
      out.stats.subgraph_nodes += sub->nodes().size();
      for (const auto &[cname, data] : sub->constants()) {
        ++out.stats.constants;
        out.stats.constant_bytes += data.nbytes();
      }
    }
  }
  out.stats.qdq_groups = qdq_groups;
  out.stats.weights_read = out.params.size();
  out.stats.trace_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

} // namespace maxc
