// Printing diagnostics and mapping them to exit codes, shared by commands.
#pragma once

#include "Commands.h"

#include "maxc/Codegen/ModelAbi.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Transforms/QuantizeWeights.h"
#include "maxc/Support/Diagnostics.h"

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <string>
#include <vector>

namespace maxc::cli {

/// Prints the diagnostics (text to stderr, JSON or SARIF to stdout) and
/// returns the exit code they imply.
int finish(const GlobalOptions &global, const DiagnosticEngine &diagnostics);

/// Exit code for a set of diagnostics: 2 if any is internal, 1 if any error.
int exit_code_for(const DiagnosticEngine &diagnostics);

/// The model-loading options every command takes from the global flags
/// (ONNX: `--dim` pins, `--no-dedup`); the command adds its own (weights).
LoadOptions load_options(const GlobalOptions &global);

/// --quantize-weights on a loaded model (driver::quantize_loaded_weights,
/// the step compile runs), each layer's error printed unless --quiet.
void quantize_loaded_weights(const GlobalOptions &global, LoadedModel &model, const std::string &file,
                             DiagnosticEngine &diagnostics);
/// One stderr line per quantized weight, and a total.
void print_quantized_layers(const std::vector<QuantizedLayer> &layers, const GlobalOptions &global);

/// Loads the model a run-time command runs (`maxc run`, `maxc profile`):
/// the global flags, `weights` if given. `--dim NAME=N` means what it means
/// for every command: NAME is N. An input dim is pinned at import, as
/// `compile` would; the other names go to `run_dims` (the values of dims no
/// input determines), each checked to be a symbol of the model (reported to
/// `diagnostics`). `input_values`: the inputs the run gives (ONNX: bounds
/// of dims read from them, and inputs a node needs the value of bound to
/// them; LoadOptions::input_values). Null graph when loading failed.
LoadedModel load_model_to_run(const GlobalOptions &global, const std::string &model, const std::string &weights,
                              DimBindings &run_dims, DiagnosticEngine &diagnostics,
                              const std::map<std::string, HostTensor> &input_values = {});

/// `--input NAME=FILE.npy` values: name -> file; malformed or repeated ones
/// are reported to `diagnostics`.
std::map<std::string, std::string> parse_input_files(const std::vector<std::string> &inputs,
                                                     DiagnosticEngine &diagnostics);

/// `--input` names that the source model gave an input (an ONNX name the
/// importer mangled to a C identifier: "input:0" is the graph's input_0)
/// renamed to the graph's name, so that either name works.
void use_graph_input_names(std::map<std::string, std::string> &input_files, const LoadedModel &model);

/// Writes `text` to `path` atomically, or to stdout for "" / "-". Reports
/// failures to `diagnostics`.
void write_output(const std::string &path, const std::string &text, DiagnosticEngine &diagnostics);

/// Parses the text of a NAME.manifest.json (`file` names it in diagnostics)
/// into `doc` and the interface it describes. Reports malformed JSON (E0501)
/// and missing or ill-typed fields (E0502, with a JSON pointer) and returns
/// false. Defined in InspectCommand.cpp; `maxc diff` uses it too.
bool parse_manifest(const std::string &text, const std::string &file, nlohmann::ordered_json &doc,
                    ModelInterface &interface, DiagnosticEngine &diagnostics);

} // namespace maxc::cli
