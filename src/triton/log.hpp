// Logging through Triton's log (its format, levels and --log-* flags), and the conversion of
// exceptions into Triton errors.
#pragma once

#include <exception>
#include <string>

#include "triton/triton_api.hpp"

namespace yolocu::triton {

void log_info(const std::string& msg);
void log_warn(const std::string& msg);
void log_error(const std::string& msg);

// A Triton error for the client: INVALID_ARG for bad input (yolocu kParse, kUnsupported,
// kInvalidArgument, kOutOfMemory from a limit), INTERNAL otherwise; the message is
// client_message(e.what()).
TRITONSERVER_Error* to_triton_error(const std::exception& e);
TRITONSERVER_Error* make_error(TRITONSERVER_Error_Code code, const std::string& msg);

// Logs and frees `err` (no-op for nullptr); true when there was none.
bool check(TRITONSERVER_Error* err, const char* what);

}  // namespace yolocu::triton
