// DeviceBudget: a byte budget for the device memory one engine or one detector context allocates
// itself (DetectorOptions / CudaEngineOptions::max_device_memory). Every allocation is charged
// before cudaMalloc and refunded when freed; a charge over the limit throws kOutOfMemory naming
// the option, what needed the memory, and what is already in use — nothing is allocated then, so
// the owner stays usable. Memory cuDNN and the CUDA runtime allocate internally (handles, module
// images) is not counted. Thread-safe. limit 0: no limit (the bytes are still counted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace yolocu::detail {

class DeviceBudget {
 public:
  DeviceBudget(uint64_t limit, std::string option) : limit_(limit), option_(std::move(option)) {}
  // Before the first charge only.
  void set_limit(uint64_t limit) noexcept { limit_ = limit; }
  // Charges `bytes` for `what` (e.g. "activations"); kOutOfMemory when used + bytes > limit.
  void charge(size_t bytes, const std::string& what);
  void refund(size_t bytes) noexcept;
  uint64_t used() const;
  uint64_t limit() const noexcept { return limit_; }
  const std::string& option() const noexcept { return option_; }

 private:
  uint64_t limit_;
  const std::string option_;
  mutable std::mutex mutex_;
  uint64_t used_ = 0;
};

// "64.0 MiB" (binary units, one decimal), for messages.
std::string format_bytes(uint64_t bytes);

}  // namespace yolocu::detail
