// yolocu/error.hpp - the one exception type the library throws.
//
// Every failure a caller can cause (bad file, bad model, bad argument, unsupported op, device
// error) is reported as yolocu::Error with a code and a message that names the problem. The
// library never aborts the process and never prints on its own.
#pragma once

#include <stdexcept>
#include <string>

namespace yolocu {

enum class ErrorCode {
  kInvalidArgument,  // a caller-supplied value is out of range or inconsistent
  kIo,               // a file could not be opened, read or written
  kParse,            // malformed, truncated or non-conforming input data (ONNX, image, .npy)
  kUnsupported,      // valid input that this build does not handle (op type, opset, dtype)
  kOutOfMemory,      // an allocation limit was exceeded (host or device)
  kCuda,             // a CUDA / cuDNN / cuBLAS call failed
  kInternal,         // a broken invariant inside yolocu (a bug: please report it)
};

const char* error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace yolocu
