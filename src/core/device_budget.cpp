// DeviceBudget (see the header).
#include "core/device_budget.hpp"

#include <cstdio>

#include "core/check.hpp"

namespace yolocu::detail {

void DeviceBudget::charge(size_t bytes, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (limit_ != 0 && (bytes > limit_ || used_ > limit_ - bytes))
    fail(ErrorCode::kOutOfMemory, "device memory budget of ", format_bytes(limit_), " (", option_, ") exceeded: ",
         what, " needs ", format_bytes(bytes), " with ", format_bytes(used_), " already in use");
  used_ += bytes;
}

void DeviceBudget::refund(size_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  used_ = bytes > used_ ? 0 : used_ - bytes;
}

uint64_t DeviceBudget::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

std::string format_bytes(uint64_t bytes) {
  char buf[48];
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (bytes < (uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else if (bytes < (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / 1073741824.0);
  return buf;
}

}  // namespace yolocu::detail
