// libFuzzer entry point of the 'triton_request' harness (its body: targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  yolocu::fuzz::triton_request(data, size);
  return 0;
}
