// Traces a parsed model into a Graph by running its module bodies through the
// Tensor API inside a GraphRealizationContext: exactly what a user of the C++
// API would build by hand. Subgraphable modules go through
// GraphRealizationContext::call, so identical bodies are deduplicated.
//
// Errors do not stop the trace: a failed statement "poisons" its results,
// statements that use poisoned values are skipped silently, and tracing goes
// on so that `maxc check` can report every independent problem in one run.
#include "ModelAst.h"

#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Frontend/OnnxLoader.h"
#include "maxc/Frontend/Safetensors.h"
#include "maxc/IR/GraphJson.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/JsonCheck.h"

#include <chrono>
#include <cmath>
#include <sys/mman.h>
#include <set>
#include <sstream>

namespace maxc {

using namespace frontend;

namespace {

using Options = std::map<std::string, json>;
using MaybeTensor = std::optional<Tensor>;

/// Thrown out of a subgraph body whose trace failed, to abandon that call.
struct Poisoned {};

std::string join_prefix(const std::string &prefix, const std::string &name) {
  if (prefix.empty())
    return name;
  if (name.empty())
    return prefix;
  return prefix + "." + name;
}

/// A zero tensor backed by an untouched anonymous mapping: the kernel hands
/// out zero pages lazily, so declaring a large model costs no memory until
/// something reads the data.
HostTensor zero_tensor(DType dtype, const std::vector<int64_t> &shape) {
  int64_t numel = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(numel, d, &numel))
      throw Error(ErrorCode::DimOverflow, "declared parameter shape overflows");
  uint64_t bytes = static_cast<uint64_t>(numel) * dtype_size(dtype);
  if (bytes > (uint64_t(1) << 38))
    throw Error(ErrorCode::ModelSchema, "declared parameter is larger than 256 GiB");
  size_t length = bytes ? bytes : 1;
  void *p = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw Error(ErrorCode::ModelSchema, "cannot reserve " + std::to_string(bytes) + " bytes for a declared parameter");
  std::shared_ptr<std::byte> data(static_cast<std::byte *>(p), [length](std::byte *q) { ::munmap(q, length); });
  return HostTensor(dtype, shape, std::move(data));
}

} // namespace

void frontend::check_byte_size(const TensorType &type, const std::string &pointer, const std::string &what) {
  // Symbolic dims count as 1: a shape too large even then is too large for any binding but 0.
  std::vector<int64_t> sizes;
  for (const Dim &d : type.shape) {
    DimBindings ones;
    for (const std::string &sym : d.symbols())
      ones[sym] = 1;
    try {
      sizes.push_back(d.evaluate(ones));
    } catch (const Error &) {
      sizes.push_back(-1); // overflows already
    }
  }
  if (!tensor_byte_size(type.dtype, sizes))
    throw Error(ErrorCode::DimOverflow,
                what + " would be " + type.to_string() + ", whose byte size " +
                    (shape_is_static(type.shape) ? "" : "(with its symbolic dims 1) ") +
                    "overflows the 2^62-byte limit of a tensor",
                pointer);
}

namespace {

/// A parameter a module instance reads, relative to that instance.
struct ParamRef {
  std::string pointer;         // where it is read
  const Module *module;        // the module whose body reads it
  const ParamDecl *decl;       // its declaration there, if any
  Options options;             // that module's options (for "$opt" in the shape)
};

class Tracer {
public:
  Tracer(const ModelAst &ast, const LoadOptions &options, DiagnosticEngine &diags, LoadedModel &out)
      : ast_(ast), options_(options), diags_(diags), out_(out) {}

  std::unique_ptr<Graph> trace() {
    open_weights();
    auto graph = std::make_unique<Graph>(ast_.name);
    // --dim NAME=N pins a symbolic input dim at compile time (as for ONNX).
    std::set<std::string> known_dims;
    for (const auto &[name, type] : ast_.inputs) {
      TensorType pinned = type;
      for (Dim &d : pinned.shape) {
        for (const std::string &s : d.symbols())
          known_dims.insert(s);
        if (auto it = d.is_symbol() ? options_.dims.find(d.symbol()) : options_.dims.end(); it != options_.dims.end()) {
          d = Dim(it->second);
          out_.pinned_dims.insert(it->first);
        }
      }
      graph->add_input(pinned, name);
    }
    if (!options_.dims_may_be_run_values)
      report_unknown_dims(options_.dims, known_dims, ast_.file, diags_);
    std::vector<MaybeTensor> outputs;
    {
      GraphRealizationContext ctx(*graph);
      root_ = &ctx;
      std::vector<MaybeTensor> args;
      for (const Value &v : graph->inputs())
        args.push_back(Tensor::from_graph_value(v));
      Frame frame{&ast_.main, {}, "", "", nullptr, &ctx};
      Scope scope;
      try {
        scope = run_body(frame, args);
      } catch (const Poisoned &) {
        return nullptr; // reported where it happened
      }
      for (const OutputDecl &o : ast_.outputs) {
        auto it = scope.find(o.value);
        outputs.push_back(it == scope.end() ? std::nullopt : it->second);
      }
      out_.stats.subgraph_calls = ctx.subgraph_cache()->calls;
      out_.stats.subgraph_traces = ctx.subgraph_cache()->traces;
      root_ = nullptr;
    }
    if (diags_.has_errors())
      return nullptr;
    std::vector<ValueId> ids;
    std::vector<std::string> names;
    for (size_t i = 0; i < outputs.size(); ++i) {
      try {
        ids.push_back(outputs[i]->value().id());
      } catch (const Error &e) {
        diags_.error(e, ast_.file, ast_.outputs[i].pointer);
        return nullptr;
      }
      names.push_back(ast_.outputs[i].name);
    }
    graph->set_outputs(ids, names);
    if (ast_.state) { // the model's state: its length is passed, not an input dim
      if (!graph->symbol_table().contains(ast_.state->length))
        graph->symbol_table().declare(ast_.state->length, SymbolOrigin::DimArgument);
      graph->symbol_table().set_model_state(*ast_.state);
    }
    report_unused_weights();
    return graph;
  }

private:
  struct Frame {
    const Module *module;
    Options options;
    std::string prefix;              // qualified instance path from the root
    std::string rel_prefix;          // instance path inside the enclosing subgraph body
    const NamedTensors *body_params; // set inside a subgraph body
    GraphRealizationContext *ctx;
  };
  using Scope = std::map<std::string, MaybeTensor>;

  // ---- weights ----

  void open_weights() {
    if (options_.synthesize_weights)
      return;
    std::string path = options_.weights_path;
    if (path.empty() && !ast_.weights.empty())
      path = ast_.weights[0] == '/' ? ast_.weights : ast_.dir + "/" + ast_.weights;
    if (path.empty())
      return;
    out_.weights_path = path;
    try {
      weights_.emplace(SafetensorsFile::open(path));
      out_.files_read.push_back(path);
    } catch (const Error &e) {
      if (options_.weights_path.empty())
        diags_.error(e.code(), ast_.file, "/weights", "weights file " + path + ": " + e.message());
      else
        diags_.error(e.code(), path, "", e.message());
      weights_failed_ = true;
    }
  }

  std::optional<std::vector<int64_t>> declared_shape(const ParamRef &ref, const std::string &pointer) {
    json shape = substitute(ref.decl->shape, ref.options, ref.decl->pointer);
    std::vector<int64_t> out;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (!shape[i].is_number_integer() || shape[i].get<int64_t>() < 0) {
        diags_.error(ErrorCode::ModelSchema, ast_.file, ref.decl->pointer + "/" + std::to_string(i),
                     "param dims must be non-negative integers (or \"$option\" naming one), got " + shape[i].dump());
        return std::nullopt;
      }
      out.push_back(shape[i].get<int64_t>());
    }
    return out;
  }

  /// Reads (or synthesizes) the weight `qualified`; nullopt after reporting
  /// a problem.
  std::optional<HostTensor> load_weight(const std::string &qualified, const ParamRef &ref) {
    std::optional<std::vector<int64_t>> shape;
    if (ref.decl && !(shape = declared_shape(ref, ref.pointer)))
      return std::nullopt;
    if (auto it = loaded_.find(qualified); it != loaded_.end()) {
      // Read again, maybe through another declaration: it must agree.
      if (ref.decl && (it->second.dtype() != ref.decl->dtype || it->second.shape() != *shape)) {
        diags_.error(ErrorCode::WeightMismatch, ast_.file, ref.decl->pointer,
                     "weight '" + qualified + "' is read as " + describe(it->second) + " elsewhere, but module " +
                         ref.module->name + " declares " + std::string(dtype_name(ref.decl->dtype)) +
                         shape_to_string(make_shape(*shape)) + " here");
        return std::nullopt;
      }
      return it->second;
    }
    ParamSpec spec{qualified, ref.decl ? ref.decl->dtype : DType::f32, shape ? *shape : std::vector<int64_t>{},
                   ref.decl ? ref.decl->init : ""};
    HostTensor data;
    if (options_.synthesize_weights) {
      if (!ref.decl) {
        diags_.error(ErrorCode::ModelSchema, ast_.file, ref.pointer,
                     "parameter '" + qualified + "' has no declaration in module " + ref.module->name +
                         "'s \"params\", so its shape is unknown");
        return std::nullopt;
      }
      data = zero_tensor(spec.dtype, spec.shape);
    } else {
      if (!weights_) {
        if (!weights_failed_)
          diags_.error(ErrorCode::MissingWeight, ast_.file, ref.pointer,
                       "the model reads weight '" + qualified +
                           "' but no weights file was given (set \"weights\" in the model or pass --weights)");
        weights_failed_ = true; // report that once
        return std::nullopt;
      }
      if (!weights_->contains(qualified)) {
        diags_.error(ErrorCode::MissingWeight, ast_.file, ref.pointer,
                     "weight '" + qualified + "' is not in " + out_.weights_path);
        return std::nullopt;
      }
      data = weights_->tensor(qualified);
      if (ref.decl && (data.dtype() != spec.dtype || data.shape() != spec.shape)) {
        diags_.error(ErrorCode::WeightMismatch, ast_.file, ref.decl->pointer,
                     "weight '" + qualified + "' in " + out_.weights_path + " is " + describe(data) + ", module " +
                         ref.module->name + " declares " + std::string(dtype_name(spec.dtype)) +
                         shape_to_string(make_shape(spec.shape)));
        return std::nullopt;
      }
      spec.dtype = data.dtype();
      spec.shape = data.shape();
    }
    out_.params.push_back(spec);
    loaded_.emplace(qualified, data);
    return data;
  }

  void report_unused_weights() {
    if (!weights_)
      return;
    for (const std::string &name : weights_->names())
      if (!loaded_.count(name))
        diags_.warning(ErrorCode::UnusedWeight, out_.weights_path, "",
                       "weight '" + name + "' is never read by model '" + ast_.name + "'");
  }

  // ---- options and attributes ----

  /// Replaces "$opt" strings anywhere in `value` with option values.
  json substitute(const json &value, const Options &options, const std::string &pointer) {
    if (value.is_string()) {
      const std::string &s = value.get_ref<const std::string &>();
      if (s.size() > 1 && s[0] == '$') {
        auto it = options.find(s.substr(1));
        if (it == options.end())
          throw Error(ErrorCode::UnknownOption, "'" + s + "' names no option of this module", pointer);
        return it->second;
      }
      return value;
    }
    if (value.is_array() || value.is_object()) {
      json out = value;
      for (auto it = out.begin(); it != out.end(); ++it)
        *it = substitute(*it, options, pointer);
      return out;
    }
    return value;
  }

  /// "x.shape[1]" (a whole string, anywhere in an attribute value) → dim 1
  /// of the value x in scope: an integer, or its symbolic text. Lets a
  /// module reshape by its arguments' dims without knowing the caller's
  /// symbol names.
  json resolve_dims(const json &v, const Scope &scope, const std::string &pointer) {
    if (v.is_array()) {
      json out = json::array();
      for (const json &e : v)
        out.push_back(resolve_dims(e, scope, pointer));
      return out;
    }
    if (!v.is_string())
      return v;
    const std::string &text = v.get_ref<const std::string &>();
    size_t pos = text.rfind(".shape[");
    if (pos == std::string::npos || pos == 0 || text.back() != ']')
      return v;
    std::string name = text.substr(0, pos), index = text.substr(pos + 7, text.size() - pos - 8);
    char *end = nullptr;
    long long i = std::strtoll(index.c_str(), &end, 10);
    if (index.empty() || *end != '\0')
      throw Error(ErrorCode::InvalidAttribute, "\"" + text + "\": expected NAME.shape[INDEX] with an integer index",
                  pointer);
    auto it = scope.find(name);
    if (it == scope.end())
      throw Error(ErrorCode::UndefinedName, "'" + name + "' (in \"" + text + "\") is not defined here", pointer);
    if (!it->second)
      throw Error(ErrorCode::UndefinedName, "'" + name + "' (in \"" + text + "\") has no value after an earlier error",
                  pointer);
    const Shape &shape = it->second->shape();
    long long rank = static_cast<long long>(shape.size());
    if (i < -rank || i >= rank)
      throw Error(ErrorCode::InvalidAttribute,
                  "\"" + text + "\": '" + name + "' has rank " + std::to_string(rank) + ", so the index must be in [" +
                      std::to_string(-rank) + ", " + std::to_string(rank) + ")",
                  pointer);
    const Dim &d = shape[static_cast<size_t>(i < 0 ? i + rank : i)];
    return d.is_static() ? json(d.value()) : json(d.to_string());
  }

  /// `d` with the input dims --dim pinned at import replaced by their
  /// values: a statement's shape ("[batch, 128, 4, 64]") names the same
  /// dims as the inputs.
  Dim pinned(const Dim &d) const {
    std::map<std::string, Dim> values;
    for (const std::string &s : out_.pinned_dims)
      values.emplace(s, Dim(options_.dims.at(s)));
    return values.empty() ? d : d.substitute(values);
  }

  AttrValue attr_from_json(const std::string &name, const json &v) const {
    if (v.is_boolean())
      return v.get<bool>();
    if (v.is_number_integer())
      return v.get<int64_t>();
    if (v.is_number())
      return v.get<double>();
    if (v.is_string())
      return v.get<std::string>();
    if (v.is_array()) {
      bool any_string = false, any_float = false;
      for (const json &e : v) {
        if (e.is_string())
          any_string = true;
        else if (e.is_number_float())
          any_float = true;
        else if (!e.is_number_integer())
          throw Error(ErrorCode::InvalidAttribute, "attribute '" + name + "' has an unsupported list element " + e.dump());
      }
      if (any_string) {
        Shape shape;
        for (const json &e : v) {
          if (e.is_number_integer())
            shape.emplace_back(e.get<int64_t>());
          else if (e.is_string())
            shape.push_back(pinned(Dim::parse(e.get<std::string>())));
          else
            throw Error(ErrorCode::InvalidAttribute, "attribute '" + name + "': a shape mixes dims and " + e.dump());
        }
        return shape;
      }
      if (any_float) {
        std::vector<double> reals;
        for (const json &e : v)
          reals.push_back(e.get<double>());
        return reals;
      }
      std::vector<int64_t> ints;
      for (const json &e : v)
        ints.push_back(e.get<int64_t>());
      return ints;
    }
    throw Error(ErrorCode::InvalidAttribute, "attribute '" + name + "' has an unsupported value " + v.dump());
  }

  // ---- parameters of a module instance ----

  Options call_options(const Statement &s, const Module &callee, const Options &caller_options) {
    Options opts = callee.options;
    for (const auto &[key, value] : s.attrs.items())
      if (key != "instance" && !(s.op == "repeat" && (key == "times" || key == "prefix")))
        opts[key] = substitute(value, caller_options, s.attrs_pointer + "/" + pointer_escape(key));
    return opts;
  }

  std::vector<std::string> call_instances(const Statement &s, const Options &caller_options) {
    if (s.op == "call")
      return {s.attrs.contains("instance") ? s.attrs["instance"].get<std::string>() : ""};
    json times = substitute(s.attrs.value("times", json(0)), caller_options, s.attrs_pointer + "/times");
    if (!times.is_number_integer() || times.get<int64_t>() < 0 || times.get<int64_t>() > 100000)
      throw Error(ErrorCode::ModelSchema, "'times' must be an integer in [0, 100000]", s.attrs_pointer + "/times");
    std::string pattern = s.attrs.contains("prefix") ? s.attrs["prefix"].get<std::string>() : "{i}";
    if (times.get<int64_t>() > 1 && pattern.find("{i}") == std::string::npos)
      throw Error(ErrorCode::ModelSchema, "the repeat prefix must contain \"{i}\" so each instance gets its own weights",
                  s.attrs_pointer + "/prefix");
    std::vector<std::string> out;
    for (int64_t i = 0; i < times.get<int64_t>(); ++i) {
      std::string p = pattern;
      for (size_t pos; (pos = p.find("{i}")) != std::string::npos;)
        p.replace(pos, 3, std::to_string(i));
      out.push_back(p);
    }
    return out;
  }

  /// Every parameter an instance of `m` reads, by name relative to it.
  void collect_params(const Module &m, const Options &options, const std::string &rel,
                      std::map<std::string, ParamRef> &out) {
    for (const Statement &s : m.body) {
      for (const Operand &o : s.operands)
        if (o.kind == Operand::Kind::param) {
          auto decl = m.params.find(o.name);
          out.emplace(join_prefix(rel, o.name),
                      ParamRef{o.pointer, &m, decl == m.params.end() ? nullptr : &decl->second, options});
        }
      if (s.op == "call" || s.op == "repeat") {
        const Module &callee = ast_.modules.at(s.callee);
        Options callee_options = call_options(s, callee, options);
        for (const std::string &instance : call_instances(s, options))
          collect_params(callee, callee_options, join_prefix(rel, instance), out);
      }
    }
  }

  // ---- execution ----

  Scope run_body(const Frame &frame, const std::vector<MaybeTensor> &args) {
    Scope scope;
    for (size_t i = 0; i < frame.module->args.size() && i < args.size(); ++i)
      scope[frame.module->args[i]] = args[i];
    for (const Statement &s : frame.module->body) {
      if (++statements_ > options_.max_statements) {
        diags_.error(ErrorCode::ModelSchema, ast_.file, s.pointer,
                     "the model executes more than " + std::to_string(options_.max_statements) +
                         " statements while tracing (check repeat counts)");
        throw Poisoned{};
      }
      std::vector<MaybeTensor> results;
      try {
        results = run_statement(s, frame, scope);
      } catch (const Poisoned &) {
        throw;
      } catch (const Error &e) {
        // Errors from ops carry no location; point at the statement.
        std::string where = e.location().empty() ? s.key_pointer : e.location();
        diags_.error(e.code(), ast_.file, where, e.message());
        results.assign(s.results.size(), std::nullopt);
      }
      for (size_t r = 0; r < s.results.size(); ++r)
        scope[s.results[r]] = r < results.size() ? results[r] : std::nullopt;
    }
    return scope;
  }

  std::vector<MaybeTensor> module_results(const Frame &frame, const Scope &scope) {
    std::vector<MaybeTensor> out;
    for (const std::string &r : frame.module->returns) {
      auto it = scope.find(r);
      out.push_back(it == scope.end() ? std::nullopt : it->second);
    }
    return out;
  }

  MaybeTensor param_tensor(const Frame &frame, const Operand &o) {
    if (frame.body_params) {
      auto it = frame.body_params->find(join_prefix(frame.rel_prefix, o.name));
      if (it == frame.body_params->end())
        throw Error(ErrorCode::Internal, "parameter '" + o.name + "' was not passed into the subgraph", o.pointer);
      return it->second;
    }
    std::string qualified = join_prefix(frame.prefix, o.name);
    auto decl = frame.module->params.find(o.name);
    ParamRef ref{o.pointer, frame.module, decl == frame.module->params.end() ? nullptr : &decl->second, frame.options};
    std::optional<HostTensor> data = load_weight(qualified, ref); // checks every declaration that reads it
    if (!data)
      return std::nullopt;
    if (auto it = root_params_.find(qualified); it != root_params_.end())
      return it->second;
    Tensor t = root_->add_source(Tensor::from_host(*data), qualified);
    root_params_.emplace(qualified, t);
    return t;
  }

  std::vector<MaybeTensor> run_statement(const Statement &s, const Frame &frame, const Scope &scope) {
    std::vector<MaybeTensor> poisoned(s.results.size(), std::nullopt);
    // Operands; numbers wait for the dtype of the first tensor operand.
    std::vector<MaybeTensor> operands;
    bool ok = true;
    for (const Operand &o : s.operands) {
      switch (o.kind) {
      case Operand::Kind::value: {
        auto it = scope.find(o.name);
        operands.push_back(it == scope.end() ? std::nullopt : it->second);
        ok = ok && operands.back().has_value();
        break;
      }
      case Operand::Kind::param:
        operands.push_back(param_tensor(frame, o));
        ok = ok && operands.back().has_value();
        break;
      case Operand::Kind::constant:
        operands.push_back(Tensor::from_host(ast_.constants.at(o.name), o.name));
        break;
      case Operand::Kind::number:
        operands.push_back(std::nullopt); // filled below
        break;
      }
    }
    if (!ok) {
      // An operand failed earlier and was reported there. Still check the
      // weights a call would read, so every weights problem shows up.
      if (s.op == "call" || s.op == "repeat")
        check_call_weights(s, frame);
      return poisoned;
    }
    // Number literals take the dtype of the first non-bool tensor operand (so
    // where(mask, x, -1e9) follows x), and must be representable in it.
    std::optional<DType> literal_dtype;
    for (size_t i = 0; i < operands.size(); ++i)
      if (operands[i] && (!literal_dtype || is_bool(*literal_dtype)))
        literal_dtype = operands[i]->dtype();
    for (size_t i = 0; i < operands.size(); ++i) {
      if (s.operands[i].kind != Operand::Kind::number)
        continue;
      double v = s.operands[i].number;
      DType d = literal_dtype.value_or(DType::f32);
      if (std::string why = not_representable(v, d); !why.empty())
        throw Error(ErrorCode::DTypeMismatch,
                    why + ", the dtype of this statement's tensors (cast them, or use a \"full\" tensor)",
                    s.operands[i].pointer);
    }

    if (s.op == "call" || s.op == "repeat")
      return run_call(s, frame, operands);

    std::vector<Tensor> tensors;
    for (size_t i = 0; i < operands.size(); ++i)
      tensors.push_back(operands[i] ? *operands[i] : ops::scalar(s.operands[i].number, literal_dtype.value_or(DType::f32)));
    Attrs attrs;
    const OpDef &def = OpRegistry::instance().get(s.op);
    for (const auto &[key, value] : s.attrs.items()) {
      std::string p = s.attrs_pointer + "/" + pointer_escape(key);
      try {
        json v = resolve_dims(substitute(value, frame.options, p), scope, p);
        const std::string &name = key; // (a structured binding: not capturable before C++20)
        auto spec = std::find_if(def.attrs.begin(), def.attrs.end(), [&](const AttrSpec &a) { return a.name == name; });
        if (spec != def.attrs.end() && spec->kind == AttrKind::real && v.is_string())
          if (std::optional<double> x = json_number(v)) // "inf", "-inf", "nan"
            v = *x;
        attrs.set(key, attr_from_json(key, v));
      } catch (const Error &e) {
        throw Error(e.code(), e.message(), e.location().empty() ? p : e.location());
      }
    }
    // The node's debug name (Node::name, what maxc profile shows): its
    // first result's name, qualified by the instance path inside the graph.
    NodeNameScope named(*frame.ctx, s.results.empty()       ? std::string()
                                    : frame.rel_prefix.empty() ? s.results[0]
                                                               : frame.rel_prefix + "." + s.results[0]);
    std::vector<Tensor> results = frame.ctx->record(s.op, tensors, attrs);
    for (size_t r = 0; r < results.size(); ++r)
      check_byte_size(results[r].type(), s.key_pointer,
                      results.size() == 1 ? std::string("the result") : "result " + std::to_string(r));
    if (results.size() != s.results.size())
      throw Error(ErrorCode::ModelSchema,
                  s.op + " produces " + std::to_string(results.size()) + " result(s), the statement names " +
                      std::to_string(s.results.size()),
                  s.pointer);
    return std::vector<MaybeTensor>(results.begin(), results.end());
  }

  void check_call_weights(const Statement &s, const Frame &frame) {
    if (frame.body_params)
      return; // inside a body, the outer call already loaded them
    const Module &callee = ast_.modules.at(s.callee);
    Options callee_options = call_options(s, callee, frame.options);
    for (const std::string &instance : call_instances(s, frame.options)) {
      std::map<std::string, ParamRef> refs;
      collect_params(callee, callee_options, "", refs);
      for (const auto &[rel, ref] : refs)
        load_weight(join_prefix(join_prefix(frame.prefix, instance), rel), ref);
    }
  }

  std::vector<MaybeTensor> run_call(const Statement &s, const Frame &frame, std::vector<MaybeTensor> args) {
    const Module &callee = ast_.modules.at(s.callee);
    Options callee_options = call_options(s, callee, frame.options);
    // A call returns the module's results. A repeat feeds each iteration's
    // results to the first arguments of the next; the arguments after those
    // (rotary tables, masks) are loop-invariant: passed unchanged to every
    // iteration.
    const size_t carried = callee.returns.size();
    for (const std::string &instance : call_instances(s, frame.options)) {
      std::vector<MaybeTensor> results = call_module(callee, callee_options, instance, s, frame, args);
      for (const MaybeTensor &r : results)
        if (!r)
          return std::vector<MaybeTensor>(s.results.size(), std::nullopt);
      if (s.op == "call")
        return results;
      std::copy(results.begin(), results.end(), args.begin());
    }
    args.resize(std::min(carried, args.size()));
    return args;
  }

  std::vector<MaybeTensor> call_module(const Module &callee, const Options &options, const std::string &instance,
                                       const Statement &s, const Frame &frame, const std::vector<MaybeTensor> &args) {
    std::string prefix = join_prefix(frame.prefix, instance);
    std::vector<MaybeTensor> failed(callee.returns.size(), std::nullopt);
    if (!callee.subgraph || frame.body_params || !frame.ctx->subgraph_cache()) {
      // Inline: the callee records into the current graph.
      Frame inner{&callee, options, prefix, join_prefix(frame.rel_prefix, instance), frame.body_params, frame.ctx};
      return module_results(inner, run_body(inner, args));
    }
    // A subgraph call: parameters flow in as call operands.
    std::map<std::string, ParamRef> refs;
    collect_params(callee, options, "", refs);
    NamedTensors params;
    bool ok = true;
    for (const auto &[rel, ref] : refs) {
      std::optional<HostTensor> data = load_weight(join_prefix(prefix, rel), ref);
      if (data)
        params.emplace(rel, Tensor::from_host(*data));
      ok = ok && data.has_value();
    }
    if (!ok)
      return failed;
    std::vector<Tensor> tensors;
    for (const MaybeTensor &a : args)
      tensors.push_back(*a);
    CallOptions call;
    call.instance = prefix;
    call.name = callee.name;
    if (!callee.subgraph_key.empty()) // options bake into the body, so they are part of the key
      call.key = callee.subgraph_key + json(options).dump();
    SubgraphBody body = [&](GraphRealizationContext &ctx, const std::vector<Tensor> &body_args,
                            const NamedTensors &body_params) {
      Frame inner{&callee, options, prefix, "", &body_params, &ctx};
      std::vector<MaybeTensor> in(body_args.begin(), body_args.end());
      std::vector<MaybeTensor> results = module_results(inner, run_body(inner, in));
      std::vector<TensorTree> leaves;
      for (const MaybeTensor &r : results) {
        if (!r)
          throw Poisoned{};
        leaves.emplace_back(*r);
      }
      return TensorTree::list(std::move(leaves));
    };
    try {
      std::vector<Tensor> results = frame.ctx->call(call, body, tensors, params).flatten();
      return std::vector<MaybeTensor>(results.begin(), results.end());
    } catch (const Poisoned &) {
      return failed;
    }
  }

  const ModelAst &ast_;
  const LoadOptions &options_;
  DiagnosticEngine &diags_;
  LoadedModel &out_;
  std::optional<SafetensorsFile> weights_;
  bool weights_failed_ = false;
  uint64_t statements_ = 0;
  GraphRealizationContext *root_ = nullptr;
  std::map<std::string, HostTensor> loaded_;
  std::map<std::string, Tensor> root_params_;
};

// The byte-size rule of check_byte_size for a graph read from graph JSON,
// located by the JSON pointer of the value's node.
void check_graph_byte_sizes(const Graph &graph, const std::string &path, const std::string &pointer = "") {
  for (size_t i = 0; i < graph.nodes().size(); ++i)
    for (ValueId id : graph.nodes()[i].results)
      check_byte_size(graph.type_of(id), path + ": " + pointer + "/nodes/" + std::to_string(i),
                      "%" + std::to_string(id) + " (" + graph.nodes()[i].op + ")");
  for (size_t i = 0; i < graph.input_ids().size(); ++i)
    check_byte_size(graph.type_of(graph.input_ids()[i]), path + ": " + pointer + "/inputs/" + std::to_string(i),
                    "input %" + std::to_string(graph.input_ids()[i]));
  size_t k = 0;
  for (const auto &[name, sub] : graph.subgraphs())
    check_graph_byte_sizes(*sub, path, "/subgraphs/" + std::to_string(k++));
}

void fill_stats(const Graph &graph, TraceStats &stats) {
  stats.nodes = graph.nodes().size();
  stats.subgraph_definitions = graph.subgraphs().size();
  stats.subgraph_nodes = 0;
  size_t calls = 0;
  for (const Node &n : graph.nodes())
    calls += is_call(n);
  stats.subgraph_calls = calls;
  stats.constants = graph.constants().size();
  stats.constant_bytes = 0;
  for (const auto &[name, data] : graph.constants())
    stats.constant_bytes += data.nbytes();
  for (const auto &[name, sub] : graph.subgraphs()) {
    stats.subgraph_nodes += sub->nodes().size();
    stats.constants += sub->constants().size();
    for (const auto &[cname, data] : sub->constants())
      stats.constant_bytes += data.nbytes();
  }
}

} // namespace

LoadedModel load_model(const std::string &path, const LoadOptions &options, DiagnosticEngine &diagnostics) {
  std::string text;
  try {
    text = read_file(path, "the model file");
  } catch (const Error &e) {
    diagnostics.error(e.code(), path, "", e.message());
    return {};
  }
  return load_model_text(text, path, options, diagnostics);
}

LoadedModel load_model_text(const std::string &text, const std::string &path, const LoadOptions &options,
                            DiagnosticEngine &diagnostics) {
  if (looks_like_onnx(text)) // a protobuf, not JSON: the ONNX front end
    return load_onnx_model(text, path, options, diagnostics);
  LoadedModel out;
  if (!options.bound_inputs.empty()) {
    diagnostics.error(ErrorCode::InvalidArgument, path, "--bind " + options.bound_inputs.begin()->first,
                      "--bind fixes inputs of ONNX models; a maxc JSON model computes constants with \"full\" or "
                      "params instead");
    return out;
  }
  auto start = std::chrono::steady_clock::now();
  out.files_read.push_back(path);

  // Nesting depth and duplicate keys, checked before any JSON document is
  // built (a deep document would overflow the stack of recursive copies).
  bool structure_ok = true;
  for (const JsonIssue &issue : check_json_structure(text)) {
    diagnostics.error(issue.kind == JsonIssue::Kind::too_deep ? ErrorCode::JsonDepth : ErrorCode::DuplicateKey, path,
                      issue.pointer(), issue.message);
    structure_ok = false;
  }
  if (!structure_ok)
    return out;

  try {
    if (looks_like_graph_json(text)) {
      std::optional<SafetensorsFile> weights;
      if (!options.weights_path.empty()) {
        weights.emplace(SafetensorsFile::open(options.weights_path));
        out.weights_path = options.weights_path;
        out.files_read.push_back(options.weights_path);
      }
      ConstantResolver resolver;
      if (weights)
        resolver = [&](const std::string &name, DType, const std::vector<int64_t> &) {
          if (!weights->contains(name))
            throw Error(ErrorCode::MissingWeight, "weight '" + name + "' is not in " + options.weights_path);
          return weights->tensor(name);
        };
      else if (options.synthesize_weights)
        resolver = [](const std::string &, DType dtype, const std::vector<int64_t> &shape) {
          return zero_tensor(dtype, shape);
        };
      out.graph = graph_from_json(text, path, resolver);
      if (out.graph)
        check_graph_byte_sizes(*out.graph, path);
      if (out.graph)
        for (const auto &[name, data] : out.graph->constants())
          out.params.push_back(ParamSpec{name, data.dtype(), data.shape(), ""});
    } else {
      std::optional<ModelAst> ast = parse_model(text, path, diagnostics, options.max_statements);
      if (!ast || diagnostics.has_errors())
        return out;
      out.graph = Tracer(*ast, options, diagnostics, out).trace();
    }
    if (out.graph)
      out.graph->verify();
  } catch (const Error &e) {
    // Errors that escape carry their own location ("file: pointer" or a file).
    std::string location = e.location(), file = path, pointer;
    if (location.rfind(path + ": ", 0) == 0)
      pointer = location.substr(path.size() + 2);
    else if (!location.empty() && location != path)
      file = location;
    diagnostics.report(Diagnostic{Severity::error, e.code(), file, pointer, e.message()});
    out.graph.reset();
  }
  if (out.graph) {
    size_t calls = out.stats.subgraph_calls, traces = out.stats.subgraph_traces;
    fill_stats(*out.graph, out.stats);
    out.stats.subgraph_traces = traces;
    (void)calls;
  }
  out.stats.weights_read = out.params.size();
  out.stats.trace_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

} // namespace maxc
