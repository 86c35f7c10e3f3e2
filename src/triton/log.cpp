#include "triton/log.hpp"

#include "triton/tensors.hpp"
#include "yolocu/error.hpp"

namespace yolocu::triton {
namespace {

void log_at(TRITONSERVER_LogLevel level, const std::string& msg) {
  TRITONSERVER_Error* err = TRITONSERVER_LogMessage(level, "yolocu", 0, ("yolocu backend: " + msg).c_str());
  if (err) TRITONSERVER_ErrorDelete(err);
}

}  // namespace

void log_info(const std::string& msg) { log_at(TRITONSERVER_LOG_INFO, msg); }
void log_warn(const std::string& msg) { log_at(TRITONSERVER_LOG_WARN, msg); }
void log_error(const std::string& msg) { log_at(TRITONSERVER_LOG_ERROR, msg); }

TRITONSERVER_Error* make_error(TRITONSERVER_Error_Code code, const std::string& msg) {
  return TRITONSERVER_ErrorNew(code, msg.c_str());
}

TRITONSERVER_Error* to_triton_error(const std::exception& e) {
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
  if (const auto* ye = dynamic_cast<const Error*>(&e)) {
    switch (ye->code()) {
      case ErrorCode::kParse:
      case ErrorCode::kUnsupported:
      case ErrorCode::kInvalidArgument:
      case ErrorCode::kOutOfMemory:
        code = TRITONSERVER_ERROR_INVALID_ARG;
        break;
      default:
        break;
    }
  }
  return make_error(code, client_message(e.what()));
}

bool check(TRITONSERVER_Error* err, const char* what) {
  if (err == nullptr) return true;
  log_error(std::string(what) + ": " + TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  return false;
}

}  // namespace yolocu::triton
