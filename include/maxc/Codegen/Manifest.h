// NAME.manifest.json: what an artifact contains, for people and pipelines.
// Deterministic: no timestamps, no absolute paths (files by base name).
#pragma once

#include "maxc/Codegen/ModelCompiler.h"

#include <map>
#include <string>
#include <vector>

namespace maxc {

struct ManifestFile {
  std::string role; // "model", "weights", "object", "header", ...
  std::string path; // base name
  std::string sha256;
  uint64_t bytes = 0;
};

struct ManifestInputs {
  CompileOptions options;
  std::string workspace_bytes; // Dim text: an upper bound, polynomial in the dims
  std::vector<ManifestFile> inputs;  // files read
  std::vector<ManifestFile> outputs; // artifacts written (except the manifest)
  std::vector<std::string> kernels;  // per graph function: "main: 12 kernels", ...
  /// Compile time per stage in ms, only with --manifest-timings: times make
  /// the manifest differ between otherwise identical compiles.
  std::vector<std::pair<std::string, double>> stage_ms;
};

std::string emit_manifest(const CompiledModel &model, const ManifestInputs &info);

/// The base name of a path ("a/b/c.o" → "c.o").
std::string base_name(const std::string &path);

} // namespace maxc
