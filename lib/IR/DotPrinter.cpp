#include "maxc/IR/DotPrinter.h"

#include "maxc/IR/Graph.h"

namespace maxc {

static std::string escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

// Emits one graph's values as DOT nodes named "<tag>_v<id>" and its nodes as
// "<tag>_n<index>", with data edges between them.
static void emit_body(const Graph &g, const std::string &tag, const std::string &indent, std::string &out) {
  for (ValueId id : g.input_ids()) {
    const ValueInfo &info = g.value_info(id);
    out += indent + tag + "_v" + std::to_string(id) + " [shape=ellipse, label=\"" +
           escape(info.name.empty() ? "%" + std::to_string(id) : info.name) + "\\n" + escape(info.type.to_string()) +
           "\"];\n";
  }
  const auto &nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node &n = nodes[i];
    // Lines are escaped one by one and joined with DOT's "\n".
    std::string label = escape(n.op);
    std::vector<std::string> bodies = body_names(n);
    if (n.op == "constant") {
      label = escape(n.attrs.get_string("name"));
    } else if (!bodies.empty()) { // "call @block", each body the op invokes
      std::string text = n.op;
      for (const std::string &body : bodies)
        text += " @" + body;
      label = escape(text) + (n.name.empty() ? "" : "\\n" + escape(n.name));
    }
    if (!n.results.empty())
      label += "\\n" + escape(g.type_of(n.results[0]).to_string());
    std::string shape = n.op == "constant" ? "note" : !bodies.empty() ? "box3d" : "box";
    out += indent + tag + "_n" + std::to_string(i) + " [shape=" + shape + ", label=\"" + label + "\"];\n";
  }
  // Which DOT node defines each value.
  auto source = [&](ValueId id) {
    const ValueInfo &info = g.value_info(id);
    return info.producer < 0 ? tag + "_v" + std::to_string(id) : tag + "_n" + std::to_string(info.producer);
  };
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId operand : nodes[i].operands)
      out += indent + source(operand) + " -> " + tag + "_n" + std::to_string(i) + ";\n";
  for (size_t i = 0; i < g.output_ids().size(); ++i) {
    std::string name = i < g.output_names().size() && !g.output_names()[i].empty() ? g.output_names()[i]
                                                                                   : "out" + std::to_string(i);
    out += indent + tag + "_out" + std::to_string(i) + " [shape=ellipse, style=bold, label=\"" + escape(name) + "\"];\n";
    out += indent + source(g.output_ids()[i]) + " -> " + tag + "_out" + std::to_string(i) + ";\n";
  }
}

std::string print_graph_dot(const Graph &graph) {
  std::string out = "digraph \"" + escape(graph.name()) + "\" {\n  compound=true;\n  rankdir=TB;\n"
                    "  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::map<std::string, std::string> cluster_entry;
  std::vector<std::pair<const Graph *, std::string>> tagged; // each body and its DOT tag
  size_t index = 0;
  for (const auto &[name, sub] : graph.subgraphs()) {
    std::string tag = "s" + std::to_string(index++);
    tagged.push_back({sub.get(), tag});
    out += "  subgraph cluster_" + tag + " {\n    label=\"subgraph @" + escape(name) + "\";\n    style=rounded;\n";
    emit_body(*sub, tag, "    ", out);
    out += "  }\n";
    // Calls point at the subgraph's first input (or first node).
    cluster_entry[name] = !sub->input_ids().empty() ? tag + "_v" + std::to_string(sub->input_ids()[0])
                          : !sub->nodes().empty()   ? tag + "_n0"
                                                    : "";
  }
  emit_body(graph, "g", "  ", out);
  // A dashed edge from each node that invokes bodies to each body's cluster:
  // the graph's nodes first, then those inside bodies (nested calls).
  tagged.insert(tagged.begin(), {&graph, "g"});
  for (const auto &[g, tag] : tagged)
    for (size_t i = 0; i < g->nodes().size(); ++i)
      for (const std::string &body : body_names(g->nodes()[i])) {
        auto it = cluster_entry.find(body);
        if (it != cluster_entry.end() && !it->second.empty())
          out += "  " + tag + "_n" + std::to_string(i) + " -> " + it->second + " [style=dashed, lhead=cluster_" +
                 it->second.substr(0, it->second.find('_')) + "];\n";
      }
  return out + "}\n";
}

} // namespace maxc
