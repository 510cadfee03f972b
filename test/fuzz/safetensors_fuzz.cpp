// libFuzzer target for the safetensors reader: any input must either parse
// or throw maxc::Error; crashes, sanitizer reports and other exceptions are
// bugs. Build with -fsanitize=fuzzer,address,undefined; seeds live in
// test/fuzz/corpus/safetensors/.
#include "maxc/Frontend/Safetensors.h"
#include "maxc/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A private copy owned like a mapping would be, so tensors can outlive the
  // file object and ASan sees reads past the input's end.
  std::shared_ptr<std::byte> buf(new std::byte[size ? size : 1], std::default_delete<std::byte[]>());
  if (size)
    std::memcpy(buf.get(), data, size);
  try {
    maxc::SafetensorsFile f = maxc::SafetensorsFile::parse(buf, buf.get(), size, "fuzz-input");
    double sum = 0;
    for (const std::string &name : f.names()) {
      maxc::HostTensor t = f.tensor(name);
      // Touch every byte, through the typed readers where that is cheap.
      int64_t n = t.numel();
      for (int64_t i = 0; i < n && i < 4096; ++i)
        sum += t.get_f64(i);
      if (t.nbytes()) {
        volatile std::byte last = t.data()[t.nbytes() - 1];
        (void)last;
      }
    }
    (void)f.metadata();
    volatile double sink = sum;
    (void)sink;
  } catch (const maxc::Error &) {
  }
  return 0;
}
