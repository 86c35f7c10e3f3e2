// StreamGate: holds a CUDA stream until the host opens the gate, for stage profiling (the events
// of a batch then measure device time, not the host's enqueue gaps).
//
// The wait is a one-thread kernel polling a word of mapped pinned memory, not a host function:
// CUDA runs every host function of the process on one callback thread, and nvJPEG's hardware
// decoder needs that thread, so a host function waiting for a gate while another call decoded
// deadlocked the two (`bench --from-jpeg --stage-times` with 2 contexts hung). The
// kernel also gives up after a time limit, so that nothing (a device-wide synchronisation by
// another thread, say) can wait for a closed gate forever; a batch whose gate gave up is reported
// (timed_out) and its stage times left out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace yolocu::detail {

class StreamGate {
 public:
  StreamGate();  // on the current device
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // Enqueues the wait on `stream`: work enqueued after it starts when open() is called, or after
  // `limit_ms` on the device.
  void close(cudaStream_t stream, double limit_ms = 100.0);
  // Opens the gate of the last close() (host side; safe to call when no gate is closed).
  void open() noexcept;
  // After the stream has passed the gate (e.g. synchronised): whether the last wait gave up.
  bool timed_out() const noexcept;

 private:
  uint32_t* words_ = nullptr;    // [0] the opened sequence number, [1] the last that timed out
  uint32_t* d_words_ = nullptr;  // the same words as the device sees them
  uint32_t seq_ = 0;             // the last close()'s number
};

}  // namespace yolocu::detail
