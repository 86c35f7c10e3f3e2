// libFuzzer entry point of the 'labels' harness (its body: targets.hpp).
#include <cstdlib>

#include "targets.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("OMP_NUM_THREADS", "1", 0);  // one input at a time, one thread: reproducible, and fast
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  yolocu::fuzz::labels(data, size);
  return 0;
}
