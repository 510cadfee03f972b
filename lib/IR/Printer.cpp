#include "maxc/IR/Printer.h"

#include "maxc/IR/Graph.h"

namespace maxc {

static std::string quoted(const std::string &s) { return "\"" + s + "\""; }

std::string print_graph_body(const Graph &graph, const PrintOptions &options) {
  std::string out = "graph @" + (options.debug_names ? graph.name() : std::string("_")) + "(";
  const auto &inputs = graph.input_ids();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo &info = graph.value_info(inputs[i]);
    out += (i ? ", " : "") + std::string("%") + std::to_string(inputs[i]) + ": " + info.type.to_string();
    if (options.debug_names && !info.name.empty())
      out += " " + quoted(info.name);
  }
  out += ") -> (";
  const auto &outputs = graph.output_ids();
  for (size_t i = 0; i < outputs.size(); ++i) {
    out += (i ? ", " : "") + std::string("%") + std::to_string(outputs[i]);
    if (options.debug_names && i < graph.output_names().size() && !graph.output_names()[i].empty())
      out += " " + quoted(graph.output_names()[i]);
  }
  out += ") {\n";
  for (const Node &node : graph.nodes()) {
    out += "  ";
    for (size_t r = 0; r < node.results.size(); ++r)
      out += (r ? ", " : "") + std::string("%") + std::to_string(node.results[r]);
    if (!node.results.empty())
      out += " = ";
    out += node.op + "(";
    for (size_t o = 0; o < node.operands.size(); ++o)
      out += (o ? ", " : "") + std::string("%") + std::to_string(node.operands[o]);
    out += ")";
    if (!node.attrs.empty())
      out += " " + node.attrs.to_string();
    out += " :";
    for (size_t r = 0; r < node.results.size(); ++r)
      out += (r ? ", " : " ") + graph.type_of(node.results[r]).to_string();
    if (options.debug_names && !node.name.empty())
      out += "  // " + node.name;
    out += "\n";
  }
  return out + "}\n";
}

std::string print_graph(const Graph &graph, const PrintOptions &options) {
  std::string out;
  if (!graph.constants().empty()) {
    for (const auto &[name, data] : graph.constants())
      out += "const " + quoted(name) + " : " + describe(data) + "\n";
    out += "\n";
  }
  for (const auto &[name, sub] : graph.subgraphs()) {
    out += "sub" + print_graph_body(*sub, options);
    for (const auto &[cname, data] : sub->constants())
      out += "  const " + quoted(cname) + " : " + describe(data) + "\n";
    out += "\n";
  }
  return out + print_graph_body(graph, options);
}

} // namespace maxc
