#include "core/file_util.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/check.hpp"

namespace yolocu::detail {

std::string read_file(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  // an ifstream opens a folder and reports its size as 2^63 - 1
  YOLOCU_CHECK(!std::filesystem::is_directory(path, ec), kIo, "cannot read '", path, "': it is a folder, not a file");
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  YOLOCU_CHECK(f.is_open(), kIo, "cannot open '", path, "': ", std::strerror(errno));
  const std::streamoff size = f.tellg();
  YOLOCU_CHECK(size >= 0, kIo, "cannot read '", path, "' (not a regular file?)");
  YOLOCU_CHECK(static_cast<uint64_t>(size) <= max_bytes, kOutOfMemory, "'", path, "' is ", size,
               " bytes, above the limit of ", max_bytes);
  std::string s(static_cast<size_t>(size), '\0');
  f.seekg(0);
  f.read(s.data(), size);
  YOLOCU_CHECK(f.good() || f.eof(), kIo, "failed reading '", path, "'");
  return s;
}

}  // namespace yolocu::detail
