// ld.lld as a subprocess: links the AMDGPU code objects (-shared) and joins
// a CPU model's partition objects into one relocatable object (-r).
#pragma once

#include <string>
#include <vector>

namespace maxc::codegen {

/// Runs ld.lld-19 (from the PATH, else /usr/lib/llvm-19/bin/ld.lld) as
///   ld.lld FLAGS... in0.o in1.o ... -o out
/// with `inputs` written to a fresh temporary directory in this order, and
/// returns out's bytes. `what` names the output in errors ("the gfx90a code
/// object"). Throws maxc::Error with the linker's message when it fails.
std::string run_lld(const std::vector<std::string> &flags, const std::vector<std::string> &inputs,
                    const std::string &what);

} // namespace maxc::codegen
