#include "maxc/IR/GraphJson.h"

#include "maxc/Support/Base64.h"
#include "maxc/Support/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

namespace maxc {

using json = nlohmann::ordered_json;

namespace {

json attr_to_json(const AttrValue &value) {
  struct Visitor {
    json operator()(bool b) const { return b; }
    json operator()(int64_t i) const { return i; }
    json operator()(double d) const {
      if (std::isfinite(d))
        return d;
      return json{{"real", std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf"}};
    }
    json operator()(const std::string &s) const { return s; }
    json operator()(const std::vector<int64_t> &v) const { return v; }
    json operator()(const std::vector<double> &v) const {
      json out = json::array();
      for (double d : v)
        out.push_back((*this)(d));
      return json{{"reals", out}}; // tagged so an empty or integral list stays a list of reals
    }
    json operator()(DType d) const { return json{{"dtype", std::string(dtype_name(d))}}; }
    json operator()(const Shape &s) const {
      json dims = json::array();
      for (const Dim &d : s) {
        if (d.is_static())
          dims.push_back(d.value());
        else
          dims.push_back(d.to_string());
      }
      return json{{"shape", dims}};
    }
  };
  return std::visit(Visitor{}, value);
}

json graph_object(const Graph &g, const GraphJsonOptions &options) {
  json out;
  out["name"] = g.name();
  json inputs = json::array();
  for (ValueId id : g.input_ids()) {
    json in{{"id", id}, {"type", g.type_of(id).to_string()}};
    if (!g.value_info(id).name.empty())
      in["name"] = g.value_info(id).name;
    inputs.push_back(in);
  }
  out["inputs"] = inputs;
  json constants = json::array();
  for (const auto &[name, data] : g.constants()) {
    json c{{"name", name}, {"dtype", std::string(dtype_name(data.dtype()))}, {"shape", data.shape()}};
    if (options.embed_constants || (options.is_weight && !options.is_weight(name)))
      c["data"] = base64_encode(std::string_view(reinterpret_cast<const char *>(data.data()), data.nbytes()));
    constants.push_back(c);
  }
  out["constants"] = constants;
  json nodes = json::array();
  for (const Node &node : g.nodes()) {
    json n{{"op", node.op}, {"operands", node.operands}};
    json results = json::array();
    for (ValueId id : node.results)
      results.push_back(json{{"id", id}, {"type", g.type_of(id).to_string()}});
    n["results"] = results;
    if (!node.attrs.empty()) {
      json attrs = json::object();
      for (const auto &[name, value] : node.attrs.values())
        attrs[name] = attr_to_json(value);
      n["attrs"] = attrs;
    }
    if (!node.name.empty())
      n["name"] = node.name;
    nodes.push_back(n);
  }
  out["nodes"] = nodes;
  json outputs = json::array();
  for (size_t i = 0; i < g.output_ids().size(); ++i) {
    json o{{"id", g.output_ids()[i]}};
    if (i < g.output_names().size() && !g.output_names()[i].empty())
      o["name"] = g.output_names()[i];
    outputs.push_back(o);
  }
  out["outputs"] = outputs;
  return out;
}

// ---- reading ----

struct Reader {
  const std::string &filename;
  const ConstantResolver &resolver;

  [[noreturn]] void fail(const std::string &pointer, const std::string &message,
                         ErrorCode code = ErrorCode::InvalidGraph) const {
    throw Error(code, message, filename + ": " + (pointer.empty() ? "/" : pointer));
  }

  const json &field(const json &obj, const std::string &pointer, const char *key) const {
    if (!obj.is_object())
      fail(pointer, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end())
      fail(pointer, std::string("missing field '") + key + "'");
    return *it;
  }

  std::string string_field(const json &obj, const std::string &pointer, const char *key) const {
    const json &v = field(obj, pointer, key);
    if (!v.is_string())
      fail(pointer + "/" + key, "expected a string");
    return v.get<std::string>();
  }

  const json &array_field(const json &obj, const std::string &pointer, const char *key) const {
    const json &v = field(obj, pointer, key);
    if (!v.is_array())
      fail(pointer + "/" + key, "expected an array");
    return v;
  }

  uint64_t id_of(const json &v, const std::string &pointer) const {
    if (!v.is_number_unsigned())
      fail(pointer, "expected a value id (a non-negative integer)");
    return v.get<uint64_t>();
  }

  TensorType type_of(const json &v, const std::string &pointer) const {
    if (!v.is_string())
      fail(pointer, "expected a tensor type string like \"f32[batch,4]\"");
    try {
      return TensorType::parse(v.get<std::string>());
    } catch (const Error &e) {
      fail(pointer, e.message());
    }
  }

  double real_of(const json &v, const std::string &pointer) const {
    if (v.is_number())
      return v.get<double>();
    if (v.is_object() && v.size() == 1 && v.contains("real") && v["real"].is_string()) {
      std::string s = v["real"].get<std::string>();
      if (s == "inf") return INFINITY;
      if (s == "-inf") return -INFINITY;
      if (s == "nan") return NAN;
    }
    fail(pointer, "expected a number");
  }

  AttrValue attr_of(const json &v, const std::string &pointer) const {
    if (v.is_boolean())
      return v.get<bool>();
    if (v.is_number_integer())
      return v.get<int64_t>();
    if (v.is_number_float())
      return v.get<double>();
    if (v.is_string())
      return v.get<std::string>();
    if (v.is_array()) {
      std::vector<int64_t> ints;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number_integer())
          fail(pointer + "/" + std::to_string(i), "expected an integer (tag float lists as {\"reals\": [...]})");
        ints.push_back(v[i].get<int64_t>());
      }
      return ints;
    }
    if (v.is_object() && v.size() == 1) {
      if (v.contains("real"))
        return real_of(v, pointer);
      if (v.contains("reals") && v["reals"].is_array()) {
        std::vector<double> reals;
        for (size_t i = 0; i < v["reals"].size(); ++i)
          reals.push_back(real_of(v["reals"][i], pointer + "/reals/" + std::to_string(i)));
        return reals;
      }
      if (v.contains("dtype") && v["dtype"].is_string()) {
        if (auto d = parse_dtype(v["dtype"].get<std::string>()))
          return *d;
        fail(pointer + "/dtype", "unknown dtype '" + v["dtype"].get<std::string>() + "'");
      }
      if (v.contains("shape") && v["shape"].is_array()) {
        Shape shape;
        for (size_t i = 0; i < v["shape"].size(); ++i) {
          const json &d = v["shape"][i];
          std::string p = pointer + "/shape/" + std::to_string(i);
          if (d.is_number_integer())
            shape.emplace_back(d.get<int64_t>());
          else if (d.is_string()) {
            try {
              shape.push_back(Dim::parse(d.get<std::string>()));
            } catch (const Error &e) {
              fail(p, e.message());
            }
          } else
            fail(p, "expected an integer or a symbolic dim");
        }
        return shape;
      }
    }
    fail(pointer, "unsupported attribute value " + v.dump());
  }

  HostTensor constant_of(const json &c, const std::string &pointer, const std::string &name) const {
    auto dtype = parse_dtype(string_field(c, pointer, "dtype"));
    if (!dtype)
      fail(pointer + "/dtype", "unknown dtype '" + string_field(c, pointer, "dtype") + "'");
    const json &shape_json = array_field(c, pointer, "shape");
    std::vector<int64_t> shape;
    for (size_t i = 0; i < shape_json.size(); ++i) {
      if (!shape_json[i].is_number_integer() || shape_json[i].get<int64_t>() < 0)
        fail(pointer + "/shape/" + std::to_string(i), "expected a non-negative integer");
      shape.push_back(shape_json[i].get<int64_t>());
    }
    HostTensor t;
    if (c.contains("data")) {
      if (!c["data"].is_string())
        fail(pointer + "/data", "expected base64 text");
      auto bytes = base64_decode(c["data"].get<std::string>());
      if (!bytes)
        fail(pointer + "/data", "malformed base64");
      t = HostTensor(*dtype, shape);
      if (bytes->size() != t.nbytes())
        fail(pointer + "/data", std::to_string(bytes->size()) + " bytes of data for " + describe(t) + " (" +
                                    std::to_string(t.nbytes()) + " bytes expected)");
      std::copy(bytes->begin(), bytes->end(), reinterpret_cast<char *>(t.data()));
      return t;
    }
    if (!resolver)
      fail(pointer, "constant '" + name + "' has no data and no weights file was given");
    t = resolver(name, *dtype, shape);
    if (t.dtype() != *dtype || t.shape() != shape)
      fail(pointer, "constant '" + name + "' is declared " + std::string(dtype_name(*dtype)) +
                        shape_to_string(make_shape(shape)) + " but the weights hold " + describe(t),
           ErrorCode::ShapeMismatch);
    return t;
  }

  void read_graph(const json &obj, const std::string &pointer, Graph &g) const {
    std::map<uint64_t, ValueId> ids; // JSON id → graph id
    auto define = [&](uint64_t json_id, ValueId id, const std::string &p) {
      if (!ids.emplace(json_id, id).second)
        fail(p, "value id " + std::to_string(json_id) + " is defined twice");
    };
    auto lookup = [&](const json &v, const std::string &p) {
      auto it = ids.find(id_of(v, p));
      if (it == ids.end())
        fail(p, "value %" + std::to_string(v.get<uint64_t>()) + " is not defined before this use");
      return it->second;
    };
    const json &inputs = array_field(obj, pointer, "inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string p = pointer + "/inputs/" + std::to_string(i);
      std::string name = inputs[i].contains("name") ? string_field(inputs[i], p, "name") : "";
      ValueId id = g.add_input(type_of(field(inputs[i], p, "type"), p + "/type"), name);
      define(id_of(field(inputs[i], p, "id"), p + "/id"), id, p + "/id");
    }
    if (obj.contains("constants")) {
      const json &constants = array_field(obj, pointer, "constants");
      for (size_t i = 0; i < constants.size(); ++i) {
        std::string p = pointer + "/constants/" + std::to_string(i);
        std::string name = string_field(constants[i], p, "name");
        if (g.has_constant(name))
          fail(p + "/name", "constant '" + name + "' is defined twice");
        g.add_constant(name, constant_of(constants[i], p, name));
      }
    }
    const json &nodes = array_field(obj, pointer, "nodes");
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::string p = pointer + "/nodes/" + std::to_string(i);
      const json &n = nodes[i];
      std::string op = string_field(n, p, "op");
      std::vector<ValueId> operands;
      const json &operand_json = array_field(n, p, "operands");
      for (size_t o = 0; o < operand_json.size(); ++o)
        operands.push_back(lookup(operand_json[o], p + "/operands/" + std::to_string(o)));
      Attrs attrs;
      if (n.contains("attrs")) {
        if (!n["attrs"].is_object())
          fail(p + "/attrs", "expected an object");
        for (const auto &[key, value] : n["attrs"].items())
          attrs.set(key, attr_of(value, p + "/attrs/" + key));
      }
      std::string name = n.contains("name") ? string_field(n, p, "name") : "";
      std::vector<ValueId> results;
      try {
        results = g.add_node(op, operands, attrs, name);
      } catch (const Error &e) {
        fail(p, e.message(), e.code());
      }
      const json &result_json = array_field(n, p, "results");
      if (result_json.size() != results.size())
        fail(p + "/results", "node declares " + std::to_string(result_json.size()) + " results, '" + op +
                                 "' produces " + std::to_string(results.size()));
      for (size_t r = 0; r < results.size(); ++r) {
        std::string rp = p + "/results/" + std::to_string(r);
        TensorType declared = type_of(field(result_json[r], rp, "type"), rp + "/type");
        if (declared != g.type_of(results[r]))
          fail(rp + "/type", "declared " + declared.to_string() + " but '" + op + "' infers " +
                                 g.type_of(results[r]).to_string(),
               ErrorCode::ShapeMismatch);
        define(id_of(field(result_json[r], rp, "id"), rp + "/id"), results[r], rp + "/id");
      }
    }
    const json &outputs = array_field(obj, pointer, "outputs");
    std::vector<ValueId> out_ids;
    std::vector<std::string> out_names;
    bool any_name = false;
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string p = pointer + "/outputs/" + std::to_string(i);
      out_ids.push_back(lookup(field(outputs[i], p, "id"), p + "/id"));
      out_names.push_back(outputs[i].contains("name") ? string_field(outputs[i], p, "name") : "");
      any_name = any_name || !out_names.back().empty();
    }
    g.set_outputs(out_ids, any_name ? out_names : std::vector<std::string>{});
  }
};

} // namespace

namespace {

// JSON spelling of a symbol's origin: its name with '_' for ' ' ("input_dim").
std::string symbol_origin_key(SymbolOrigin origin) {
  std::string key = symbol_origin_name(origin);
  std::replace(key.begin(), key.end(), ' ', '_');
  return key;
}

} // namespace

std::string graph_to_json(const Graph &graph, const GraphJsonOptions &options) {
  json out;
  out["format"] = "maxc-graph";
  out["version"] = 1;
  json root = graph_object(graph, options);
  for (auto it = root.begin(); it != root.end(); ++it)
    out[it.key()] = it.value();
  json subgraphs = json::array();
  for (const Graph *sub : subgraphs_bodies_first(graph)) // read in this order: a node's bodies before it
    subgraphs.push_back(graph_object(*sub, options));
  out["subgraphs"] = subgraphs;
  // The root's symbol table, where it says more than "an input dim without
  // a bound" (which reading the inputs declares again): absent otherwise.
  json symbols = json::array();
  for (const auto &[name, info] : graph.symbol_table().entries()) {
    if (info.origin == SymbolOrigin::InputDim && !info.upper_bound)
      continue;
    json s = {{"name", name}, {"origin", symbol_origin_key(info.origin)}};
    if (info.origin == SymbolOrigin::NodeResult) {
      s["node"] = info.node;
      s["result"] = info.result;
    }
    if (info.upper_bound)
      s["max"] = *info.upper_bound;
    symbols.push_back(s);
  }
  if (!symbols.empty())
    out["symbols"] = symbols;
  return out.dump(options.indent) + "\n";
}

bool looks_like_graph_json(const std::string &text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("format") && j["format"] == "maxc-graph";
}

std::unique_ptr<Graph> graph_from_json(const std::string &text, const std::string &filename,
                                       const ConstantResolver &resolver) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception &e) { // parse_error, and out_of_range for huge numbers
    throw Error(ErrorCode::InvalidGraph, std::string("malformed JSON: ") + e.what(), filename);
  }
  Reader reader{filename, resolver};
  if (!j.is_object() || !j.contains("format") || j["format"] != "maxc-graph")
    reader.fail("", "not a maxc graph (expected \"format\": \"maxc-graph\")");
  if (!j.contains("version") || j["version"] != 1)
    reader.fail("/version", "unsupported graph JSON version (this maxc reads version 1)");
  auto graph = std::make_unique<Graph>(reader.string_field(j, "", "name"));
  if (j.contains("subgraphs")) {
    const json &subs = reader.array_field(j, "", "subgraphs");
    for (size_t i = 0; i < subs.size(); ++i) {
      std::string p = "/subgraphs/" + std::to_string(i);
      auto sub = std::make_shared<Graph>(reader.string_field(subs[i], p, "name"));
      if (graph->find_subgraph(sub->name()))
        reader.fail(p + "/name", "subgraph '" + sub->name() + "' is defined twice");
      // Register first so calls inside resolve against the root.
      graph->add_subgraph(sub);
      reader.read_graph(subs[i], p, *sub);
    }
  }
  reader.read_graph(j, "", *graph);
  if (j.contains("symbols")) {
    const json &symbols = reader.array_field(j, "", "symbols");
    for (size_t i = 0; i < symbols.size(); ++i) {
      std::string p = "/symbols/" + std::to_string(i);
      std::string name = reader.string_field(symbols[i], p, "name");
      std::string origin_key = reader.string_field(symbols[i], p, "origin");
      std::optional<SymbolOrigin> origin;
      for (SymbolOrigin o : {SymbolOrigin::InputDim, SymbolOrigin::DimArgument, SymbolOrigin::NodeResult})
        if (origin_key == symbol_origin_key(o))
          origin = o;
      if (!origin)
        reader.fail(p + "/origin", "unknown symbol origin '" + origin_key + "' (input_dim, dim_argument, node_result)");
      auto integer = [&](const char *key) -> int64_t {
        const json &v = reader.field(symbols[i], p, key);
        if (!v.is_number_integer() || v.get<int64_t>() < 0)
          reader.fail(p + "/" + key, "expected a non-negative integer");
        return v.get<int64_t>();
      };
      try {
        if (*origin == SymbolOrigin::NodeResult)
          graph->symbol_table().declare(name, *origin, integer("node"), integer("result"));
        else
          graph->symbol_table().declare(name, *origin);
        if (symbols[i].contains("max"))
          graph->symbol_table().set_upper_bound(name, integer("max"));
      } catch (const Error &e) {
        reader.fail(p, e.message(), e.code());
      }
    }
  }
  return graph;
}

} // namespace maxc
