// Small file helpers shared by every writer of artifacts.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace maxc {

/// Writes `chunks` to `path` through a temp file (`path.tmp.<pid>`) renamed
/// over it, so nobody ever sees a half-written file and a failed write leaves
/// nothing behind. Throws maxc::Error (FileWrite).
void write_file_atomically(const std::string &path, const std::vector<std::pair<const void *, size_t>> &chunks);
void write_file_atomically(const std::string &path, const std::string &contents);

/// The whole file; throws maxc::Error (FileNotReadable) naming the path.
std::string read_file(const std::string &path);

} // namespace maxc
