// libFuzzer entry point of the 'source_list' harness (its body: targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  yolocu::fuzz::source_list(data, size);
  return 0;
}
