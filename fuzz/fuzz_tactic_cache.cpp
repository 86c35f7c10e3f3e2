// libFuzzer entry point of the 'tactic_cache' harness (its body: targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  yolocu::fuzz::tactic_cache(data, size);
  return 0;
}
