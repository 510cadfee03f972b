// libFuzzer target for the .npy reader: parse, and when it parses, write the
// tensor back and parse again — the round trip must be lossless.
#include "maxc/Frontend/Npy.h"
#include "maxc/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  try {
    maxc::HostTensor t = maxc::parse_npy(bytes, "fuzz.npy");
    maxc::HostTensor again = maxc::parse_npy(maxc::serialize_npy(t), "again.npy");
    if (!again.identical(t))
      __builtin_trap();
  } catch (const maxc::Error &) {
  }
  return 0;
}
