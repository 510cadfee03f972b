// Greedy token generation through a model's state (`maxc run --generate`):
// a prefill step over the prompt, then one step per token, each feeding
// back the argmax of the last logits row. On the reference interpreter or a
// backend compiled in process (HostModel), with the state buffers kept
// between steps; a model without state re-runs the whole sequence.
#pragma once

#include "maxc/IR/Dim.h"
#include "maxc/IR/HostTensor.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace maxc {
class Graph;
}

namespace maxc::driver {

struct GenerateOptions {
  std::string device = "reference"; // reference, cpu or amdgpu-emu
  int64_t new_tokens = 16;          // tokens generated after the prompt
  int64_t max_context = 0;          // the state's capacity; 0 = prompt + new_tokens
  int threads = 1;                  // cpu: the pool's threads
  int opt_level = 2;
  uint64_t max_memory = 0;          // bytes the state buffers may take; 0 = no check
  std::function<void(int64_t token)> on_token; // told each generated token
};

struct GenerateResult {
  std::vector<int64_t> tokens;     // the generated tokens (not the prompt)
  double prefill_ms = 0;           // the first step (the whole prompt)
  double decode_ms = 0;            // the other steps together
  double compile_ms = 0;           // HostModel construction (0 on the reference)
  double min_margin = 0;           // smallest gap between the top two logits over the steps
  bool stateful = false;           // the model's state was used (else whole-sequence reruns)
};

/// Generates `options.new_tokens` tokens after `prompt` (integer tokens,
/// any shape with one element per token). The model takes one integer
/// tokens input besides its state buffers (its other symbolic dims bound by
/// `dims`, else 1) and returns logits first, vocabulary last. Throws
/// maxc::Error naming what does not fit.
GenerateResult generate(const Graph &graph, const HostTensor &prompt, const DimBindings &dims,
                        const GenerateOptions &options);

} // namespace maxc::driver
