// Installs the reference interpreter as the executor of eager realization
// contexts (lib/Realization sits below lib/Interpreter). Like every
// lib/*/Install*.cpp, built into the `maxc_install` object library that the
// aggregate `maxc` target hands to every program linking it, so it runs
// before main().
#include "maxc/Interpreter/Interpreter.h"
#include "maxc/Realization/EagerRealizationContext.h"

namespace {
[[maybe_unused]] const bool installed = (maxc::set_eager_executor(&maxc::Interpreter::execute), true);
} // namespace
