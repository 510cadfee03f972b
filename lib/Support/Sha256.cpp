// SHA-256 through OpenSSL's EVP interface (libcrypto picks SHA-NI or AVX2
// code where the CPU has them: several times the speed of a portable
// implementation, and maintained).
#include "maxc/Support/Sha256.h"

#include "maxc/Support/Error.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <unistd.h>

namespace maxc {

namespace {

struct DigestContext {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX *)> ctx{EVP_MD_CTX_new(), EVP_MD_CTX_free};
  DigestContext() {
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
      throw Error(ErrorCode::Internal, "libcrypto cannot start a SHA-256 digest");
  }
  void update(const void *data, size_t size) {
    if (size && EVP_DigestUpdate(ctx.get(), data, size) != 1)
      throw Error(ErrorCode::Internal, "libcrypto SHA-256 update failed");
  }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(ctx.get(), digest, &length) != 1)
      throw Error(ErrorCode::Internal, "libcrypto SHA-256 final failed");
    char out[2 * EVP_MAX_MD_SIZE + 1];
    for (unsigned i = 0; i < length; ++i)
      std::snprintf(out + 2 * i, 3, "%02x", digest[i]);
    return std::string(out, 2 * length);
  }
};

} // namespace

struct Sha256Stream::Context : DigestContext {};
Sha256Stream::Sha256Stream() : context_(std::make_unique<Context>()) {}
Sha256Stream::~Sha256Stream() = default;
void Sha256Stream::update(const void *data, size_t size) { context_->update(data, size); }
std::string Sha256Stream::hex() { return context_->hex(); }

std::string sha256_hex(std::string_view data) {
  DigestContext d;
  d.update(data.data(), data.size());
  return d.hex();
}

std::string sha256_file_hex(const std::string &path, uint64_t *bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw Error(ErrorCode::FileNotReadable, std::string("cannot open: ") + std::strerror(errno), path);
  DigestContext d;
  std::unique_ptr<char[]> buffer(new char[1 << 20]);
  uint64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buffer.get(), 1 << 20);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw Error(ErrorCode::FileNotReadable, std::string("cannot read: ") + std::strerror(e), path);
    }
    if (n == 0)
      break;
    d.update(buffer.get(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (bytes)
    *bytes = total;
  return d.hex();
}

uint64_t fnv1a64(std::string_view data) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

Lanes64::Lanes64() {
  for (int k = 0; k < kLanes; ++k)
    lanes_[k] = kBasis + static_cast<uint64_t>(k);
}

void Lanes64::blocks(const unsigned char *data, size_t count) {
  uint64_t l[kLanes];
  std::memcpy(l, lanes_, sizeof l);
  for (size_t j = 0; j < count; ++j, data += kBlock)
    for (int k = 0; k < kLanes; ++k) {
      uint64_t w;
      std::memcpy(&w, data + 8 * k, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
      w = __builtin_bswap64(w);
#endif
      l[k] = step(l[k], w);
    }
  std::memcpy(lanes_, l, sizeof l);
}

void Lanes64::update(const void *data, size_t size) {
  auto *p = static_cast<const unsigned char *>(data);
  size_ += size;
  if (pending_size_) {
    size_t take = std::min(size, kBlock - pending_size_);
    std::memcpy(pending_ + pending_size_, p, take);
    pending_size_ += take;
    p += take;
    size -= take;
    if (pending_size_ < kBlock)
      return;
    blocks(pending_, 1);
    pending_size_ = 0;
  }
  blocks(p, size / kBlock);
  p += size / kBlock * kBlock;
  pending_size_ = size % kBlock;
  std::memcpy(pending_, p, pending_size_);
}

uint64_t Lanes64::value() const {
  uint64_t h = kBasis;
  for (int k = 0; k < kLanes; ++k)
    h = step(h, lanes_[k]);
  for (size_t i = 0; i < pending_size_; ++i)
    h = (h ^ pending_[i]) * kPrime;
  return step(h, size_);
}

uint64_t lanes64(std::string_view data) {
  Lanes64 sum;
  sum.update(data.data(), data.size());
  return sum.value();
}

} // namespace maxc
