// maxc diff A.manifest.json B.manifest.json: what changed between two
// builds of a model, for reviews and CI.
//
// Breaking (a caller must change; exit 3): the C name, entry points, inputs
// or outputs added, removed, renamed or reordered, their dtypes or shapes
// (static sizes, symbolic <-> static, rank), the symbolic dims passed at run
// time. Non-breaking notes (exit 0): target triple/CPU/features/opt level,
// maxc/LLVM versions, weights and workspace sizes, subgraphs, kernels, the
// files read and written.
#include "Diagnose.h"

#include "maxc/Support/FileSystem.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

namespace maxc::cli {

using json = nlohmann::ordered_json;

namespace {

struct Change {
  std::string kind;    // "input_renamed", "target_cpu", ...
  std::string subject; // "x", "cpu", "obj", ...
  std::string before, after;
  std::string message;
};

struct Report {
  std::vector<Change> breaking, notes;
};

std::string join(const std::vector<std::string> &v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : "") + v[i];
  return "[" + out + "]";
}

std::string describe_dim(const Dim &d) {
  return d.to_string() + (d.is_static() ? " (static)" : " (symbolic)");
}

// dtype and shape of one tensor present in both.
void compare_types(const std::string &kind, const std::string &label, const std::string &subject,
                   const TensorType &a, const TensorType &b, Report &report) {
  if (a.dtype != b.dtype)
    report.breaking.push_back({kind + "_dtype", subject, std::string(dtype_name(a.dtype)),
                               std::string(dtype_name(b.dtype)),
                               label + ": dtype " + std::string(dtype_name(a.dtype)) + " -> " +
                                   std::string(dtype_name(b.dtype))});
  if (a.shape.size() != b.shape.size()) {
    report.breaking.push_back({kind + "_shape", subject, shape_to_string(a.shape), shape_to_string(b.shape),
                               label + ": rank " + std::to_string(a.shape.size()) + " -> " +
                                   std::to_string(b.shape.size()) + " (" + shape_to_string(a.shape) + " -> " +
                                   shape_to_string(b.shape) + ")"});
    return;
  }
  std::vector<std::string> details;
  for (size_t k = 0; k < a.shape.size(); ++k) {
    const Dim &x = a.shape[k], &y = b.shape[k];
    if (x == y)
      continue;
    if (x.is_static() && y.is_static())
      details.push_back("dim " + std::to_string(k) + ": " + x.to_string() + " -> " + y.to_string());
    else
      details.push_back("dim " + std::to_string(k) + ": " + describe_dim(x) + " -> " + describe_dim(y));
  }
  if (!details.empty()) {
    std::string message = label + ": shape " + shape_to_string(a.shape) + " -> " + shape_to_string(b.shape) + " (";
    for (size_t i = 0; i < details.size(); ++i)
      message += (i ? "; " : "") + details[i];
    report.breaking.push_back({kind + "_shape", subject, shape_to_string(a.shape), shape_to_string(b.shape),
                               message + ")"});
  }
}

// Inputs or outputs. The C entry points take them by position, and the
// header names them: a rename, a move, an addition or a removal all break.
void compare_tensors(const std::string &kind, const std::vector<ModelInterface::Tensor> &a,
                     const std::vector<ModelInterface::Tensor> &b, Report &report) {
  auto index = [](const std::vector<ModelInterface::Tensor> &ts, const std::string &name) -> long {
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i].name == name)
        return static_cast<long>(i);
    return -1;
  };
  std::vector<size_t> only_a, only_b;
  for (size_t i = 0; i < a.size(); ++i)
    if (index(b, a[i].name) < 0)
      only_a.push_back(i);
  for (size_t i = 0; i < b.size(); ++i)
    if (index(a, b[i].name) < 0)
      only_b.push_back(i);
  for (size_t i = 0; i < a.size(); ++i) {
    long j = index(b, a[i].name);
    if (j < 0)
      continue;
    std::string label = kind + " '" + a[i].name + "'";
    if (static_cast<size_t>(j) != i)
      report.breaking.push_back({kind + "_moved", a[i].name, std::to_string(i), std::to_string(j),
                                 label + ": position " + std::to_string(i) + " -> " + std::to_string(j)});
    compare_types(kind, label, a[i].name, a[i].type, b[j].type, report);
  }
  if (only_a.size() == only_b.size()) {
    // The same number appeared and disappeared: renames, in order.
    for (size_t n = 0; n < only_a.size(); ++n) {
      const auto &x = a[only_a[n]], &y = b[only_b[n]];
      report.breaking.push_back({kind + "_renamed", x.name, x.name, y.name,
                                 kind + " '" + x.name + "' renamed to '" + y.name + "'" +
                                     (only_a[n] != only_b[n] ? " (position " + std::to_string(only_a[n]) + " -> " +
                                                                   std::to_string(only_b[n]) + ")"
                                                             : "")});
      compare_types(kind, kind + " '" + x.name + "' (now '" + y.name + "')", y.name, x.type, y.type, report);
    }
    return;
  }
  for (size_t i : only_a)
    report.breaking.push_back({kind + "_removed", a[i].name, a[i].type.to_string(), "",
                               kind + " '" + a[i].name + "' (" + a[i].type.to_string() + ") removed"});
  for (size_t i : only_b)
    report.breaking.push_back({kind + "_added", b[i].name, "", b[i].type.to_string(),
                               kind + " '" + b[i].name + "' (" + b[i].type.to_string() + ") added"});
}

std::string text_of(const json &j) {
  if (j.is_string())
    return j.get<std::string>();
  if (j.is_null())
    return "(none)";
  return j.dump();
}

// A non-breaking note when a field differs.
void note_field(Report &report, const json &a, const json &b, const std::string &kind, const std::string &subject,
                const std::string &what) {
  if (a == b)
    return;
  report.notes.push_back({kind, subject, text_of(a), text_of(b), what + ": " + text_of(a) + " -> " + text_of(b)});
}

json at(const json &doc, const char *key, const char *inner = nullptr) {
  if (!doc.is_object() || !doc.contains(key))
    return nullptr;
  const json &v = doc[key];
  if (!inner)
    return v;
  return v.is_object() && v.contains(inner) ? v[inner] : json(nullptr);
}

std::string signed_delta(int64_t d) { return (d > 0 ? "+" : "") + std::to_string(d); }

// Files read or written, by role.
void compare_files(const json &a, const json &b, const std::string &section, Report &report) {
  auto by_role = [](const json &list) {
    std::map<std::string, json> out;
    if (list.is_array())
      for (const json &f : list)
        if (f.is_object())
          out[f.value("role", std::string("?"))] = f;
    return out;
  };
  std::map<std::string, json> fa = by_role(a), fb = by_role(b);
  std::string what = section == "inputs" ? "file read" : "file written";
  for (const auto &[role, x] : fa) {
    auto it = fb.find(role);
    if (it == fb.end()) {
      report.notes.push_back({section == "inputs" ? "file_read_removed" : "file_written_removed", role,
                              x.value("path", std::string()), "",
                              what + " " + role + " (" + x.value("path", std::string()) + ") is gone"});
      continue;
    }
    const json &y = it->second;
    uint64_t ba = x.value("bytes", uint64_t{0}), bb = y.value("bytes", uint64_t{0});
    bool content = x.value("sha256", std::string()) != y.value("sha256", std::string());
    if (ba != bb || content || x.value("path", std::string()) != y.value("path", std::string())) {
      std::string message = what + " " + role + " (" + x.value("path", std::string()) +
                            (x.value("path", std::string()) != y.value("path", std::string())
                                 ? " -> " + y.value("path", std::string())
                                 : "") +
                            "): ";
      if (ba != bb)
        message += std::to_string(ba) + " -> " + std::to_string(bb) + " bytes (" +
                   signed_delta(static_cast<int64_t>(bb) - static_cast<int64_t>(ba)) + ")";
      else
        message += std::to_string(ba) + " bytes, " + (content ? "different contents" : "same contents");
      report.notes.push_back({section == "inputs" ? "file_read" : "file_written", role, std::to_string(ba),
                              std::to_string(bb), message});
    }
  }
  for (const auto &[role, y] : fb)
    if (!fa.count(role))
      report.notes.push_back({section == "inputs" ? "file_read_added" : "file_written_added", role, "",
                              y.value("path", std::string()),
                              what + " " + role + " (" + y.value("path", std::string()) + ") is new"});
}

Report compare(const json &da, const ModelInterface &a, const json &db, const ModelInterface &b) {
  Report report;
  if (a.name != b.name)
    report.breaking.push_back({"name", "name", a.name, b.name,
                               "C name '" + a.name + "' -> '" + b.name + "' (every entry point is renamed)"});
  json ea = at(at(da, "interface"), "entry_points"), eb = at(at(db, "interface"), "entry_points");
  if (a.name == b.name && ea != eb && !ea.is_null() && !eb.is_null())
    report.breaking.push_back({"entry_points", "entry_points", ea.dump(), eb.dump(),
                               "entry points " + ea.dump() + " -> " + eb.dump()});
  compare_tensors("input", a.inputs, b.inputs, report);
  compare_tensors("output", a.outputs, b.outputs, report);
  if (a.symbols != b.symbols)
    report.breaking.push_back({"dims", "dims", join(a.symbols), join(b.symbols),
                               "symbolic dims " + join(a.symbols) + " -> " + join(b.symbols) +
                                   " (the run's int64_t arguments change)"});

  // The backend decides the calling convention (host or device pointers, a
  // context): changing it breaks every caller. A GPU arch dropped breaks
  // the programs running on it; one added does not.
  std::string backend_a = da.value("backend", std::string("cpu")), backend_b = db.value("backend", std::string("cpu"));
  if (backend_a != backend_b)
    report.breaking.push_back({"backend", "backend", backend_a, backend_b,
                               "backend " + backend_a + " -> " + backend_b + " (another calling convention)"});
  const json ta = at(da, "target"), tb = at(db, "target");
  {
    std::set<std::string> arches_a, arches_b;
    for (const auto &[arches, t] : {std::pair<std::set<std::string> *, json>{&arches_a, ta}, {&arches_b, tb}})
      if (t.is_object() && t.contains("arches") && t["arches"].is_array())
        for (const json &x : t["arches"])
          if (x.is_string())
            arches->insert(x.get<std::string>());
    for (const std::string &x : arches_a)
      if (!arches_b.count(x))
        report.breaking.push_back({"gpu_arch_removed", x, x, "", "GPU architecture " + x + " removed"});
    for (const std::string &x : arches_b)
      if (!arches_a.count(x))
        report.notes.push_back({"gpu_arch_added", x, "", x, "GPU architecture " + x + " added"});
  }
  note_field(report, at(ta, "triple"), at(tb, "triple"), "target_triple", "triple",
             "target triple (objects for different triples do not link together)");
  note_field(report, at(ta, "cpu"), at(tb, "cpu"), "target_cpu", "cpu", "target cpu");
  note_field(report, at(ta, "opt_level"), at(tb, "opt_level"), "opt_level", "opt_level", "optimization level");
  if (at(ta, "features") != at(tb, "features") && at(ta, "cpu") == at(tb, "cpu"))
    report.notes.push_back({"target_features", "features", text_of(at(ta, "features")), text_of(at(tb, "features")),
                            "target features differ"});
  note_field(report, at(da, "maxc_version"), at(db, "maxc_version"), "maxc_version", "maxc", "maxc version");
  note_field(report, at(da, "llvm_version"), at(db, "llvm_version"), "llvm_version", "llvm", "LLVM version");
  if (a.constant_bytes != b.constant_bytes)
    report.notes.push_back({"weights_bytes", "weights", std::to_string(a.constant_bytes),
                            std::to_string(b.constant_bytes),
                            "weights: " + std::to_string(a.constant_bytes) + " -> " + std::to_string(b.constant_bytes) +
                                " bytes (" +
                                signed_delta(static_cast<int64_t>(b.constant_bytes) -
                                             static_cast<int64_t>(a.constant_bytes)) +
                                ")"});
  note_field(report, at(da, "memory", "workspace_bytes_max"), at(db, "memory", "workspace_bytes_max"), "workspace",
             "workspace", "workspace bytes, at most");
  note_field(report, at(da, "memory", "weights_mode"), at(db, "memory", "weights_mode"), "weights_mode",
             "weights_mode", "weights mode");
  note_field(report, at(da, "subgraphs", "definitions"), at(db, "subgraphs", "definitions"), "subgraph_definitions",
             "subgraphs", "subgraph definitions");
  note_field(report, at(da, "subgraphs", "calls"), at(db, "subgraphs", "calls"), "subgraph_calls", "subgraphs",
             "subgraph calls");
  json ka = at(da, "kernels"), kb = at(db, "kernels");
  if (ka != kb) {
    auto text = [](const json &k) {
      std::string out;
      if (k.is_array())
        for (const json &e : k)
          out += (out.empty() ? "" : "; ") + text_of(e);
      return out.empty() ? std::string("(none)") : out;
    };
    report.notes.push_back({"kernels", "kernels", text(ka), text(kb), "kernels: " + text(ka) + " -> " + text(kb)});
  }
  compare_files(at(da, "inputs"), at(db, "inputs"), "inputs", report);
  compare_files(at(da, "outputs"), at(db, "outputs"), "outputs", report);
  return report;
}

json changes_json(const std::vector<Change> &changes) {
  json out = json::array();
  for (const Change &c : changes)
    out.push_back({{"kind", c.kind}, {"subject", c.subject}, {"before", c.before}, {"after", c.after},
                   {"message", c.message}});
  return out;
}

} // namespace

int run_diff(const GlobalOptions &global, const DiffOptions &options) {
  DiagnosticEngine diagnostics;
  json docs[2];
  ModelInterface interfaces[2];
  const std::string *paths[2] = {&options.before, &options.after};
  for (int i = 0; i < 2; ++i) {
    std::string text;
    try {
      text = read_file(*paths[i]);
    } catch (const Error &e) {
      diagnostics.error(e, *paths[i], "");
      continue;
    }
    parse_manifest(text, *paths[i], docs[i], interfaces[i], diagnostics);
  }
  if (diagnostics.has_errors())
    return finish(global, diagnostics);

  Report report = compare(docs[0], interfaces[0], docs[1], interfaces[1]);
  bool changed = !report.breaking.empty();
  if (options.json) {
    json out{{"before", options.before},
             {"after", options.after},
             {"interface_changed", changed},
             {"breaking", changes_json(report.breaking)},
             {"non_breaking", changes_json(report.notes)}};
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "--- " << options.before << "\n+++ " << options.after << "\n";
    std::cout << "interface: "
              << (changed ? "changed (breaking: callers must be updated)" : "unchanged (drop-in compatible)")
              << "\n";
    if (changed) {
      std::cout << "breaking changes (" << report.breaking.size() << "):\n";
      for (const Change &c : report.breaking)
        std::cout << "  ! " << c.message << "\n";
    }
    std::cout << "non-breaking changes (" << report.notes.size() << "):" << (report.notes.empty() ? " none" : "")
              << "\n";
    for (const Change &c : report.notes)
      std::cout << "  ~ " << c.message << "\n";
  }
  return changed ? kInterfaceChanged : kSuccess;
}

} // namespace maxc::cli
