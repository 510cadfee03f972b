#include "maxc/Support/Error.h"

#include <cstdio>

namespace maxc {

std::string error_code_name(ErrorCode code) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "E%04d", static_cast<int>(code));
  return buf;
}

std::string Error::formatted() const {
  std::string out;
  if (!location_.empty())
    out += location_ + ": ";
  out += "error[" + error_code_name(code_) + "]: " + message();
  return out;
}

} // namespace maxc
