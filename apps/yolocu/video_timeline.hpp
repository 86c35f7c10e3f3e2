// `yolocu detect --source ... --timeline trace.json`: where a video run's time goes, batch by batch.
// Per batch, on the host clock: wait (next_batch() waiting for frames: the batch assembly; long when
// the readers' decoding is behind), detect (the detector call), outputs (JSON lines, drawing, the
// stage); per frame: read (its reader's FrameSource::read(): demux, decode with the NVDEC surface's
// map, or the CPU's BGR conversion). From the GPU detector's stage events (Detector::take_timeline):
// frames ready (the letterbox waiting for the frames' producer streams), letterbox, engine,
// post-processing (decode + NMS + copy back); host sync = the detect call's time past the GPU span.
// The summary gives each stage's median over the batches, and NVDEC utilisation from NVML sampled
// during the run; the file is a Chrome trace (chrome://tracing, Perfetto) of the GPU batches, as
// `yolocu bench --timeline` writes, with the host stages on a row of their own.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "nvml_sampler.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/video.hpp"

namespace yolocu::cli {

class VideoTimeline {
 public:
  // Turns the detector's stage profiling on and starts sampling NVML; `path` is written by finish().
  VideoTimeline(Detector& detector, std::string path);
  ~VideoTimeline();
  VideoTimeline(const VideoTimeline&) = delete;
  VideoTimeline& operator=(const VideoTimeline&) = delete;

  // Marks: call begin_wait() before next_batch(), got_batch() after it, detected() after the
  // detector call, written() after the outputs.
  void begin_wait();
  void got_batch(const std::vector<VideoFrame>& batch);
  void detected();
  void written();

  // Stops profiling and sampling, writes the trace, prints the summary to stderr. Throws
  // yolocu::Error when the file cannot be written.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  double ms_since_zero(Clock::time_point t) const;
  struct HostBatch {
    int frames = 0;
    double wait0 = 0, wait1 = 0, detect1 = 0, write1 = 0;  // ms from the zero
    double read_ms_median = 0;                             // its frames' read() times
  };
  Detector& det_;
  std::string path_;
  std::unique_ptr<NvmlSampler> nvml_;
  Clock::time_point zero_;
  std::vector<HostBatch> host_;
  std::vector<double> reads_;  // every frame's read() time
  HostBatch cur_;
  bool finished_ = false;
};

}  // namespace yolocu::cli
