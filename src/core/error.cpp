#include "yolocu/error.hpp"

namespace yolocu {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kParse: return "parse error";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kCuda: return "CUDA error";
    case ErrorCode::kInternal: return "internal error";
  }
  return "error";
}

Error::Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

}  // namespace yolocu
