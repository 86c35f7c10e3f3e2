// Internal file helpers.
#pragma once

#include <cstdint>
#include <string>

namespace yolocu::detail {

// Reads a whole file; kIo if it cannot be opened or read; kOutOfMemory above max_bytes.
std::string read_file(const std::string& path, uint64_t max_bytes = uint64_t{1} << 32);

}  // namespace yolocu::detail
