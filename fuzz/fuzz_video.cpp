// libFuzzer entry point of the 'video' harness (its body: targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  yolocu::fuzz::video(data, size);
  return 0;
}
