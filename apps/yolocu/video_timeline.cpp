// A video run's per-stage timeline (see the header).
#include "video_timeline.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "stats.hpp"
#include "timeline.hpp"
#include "yolocu/atomic_file.hpp"

namespace yolocu::cli {
namespace {

double median(std::vector<double> v) { return stats_of(std::move(v)).median; }

}  // namespace

VideoTimeline::VideoTimeline(Detector& detector, std::string path) : det_(detector), path_(std::move(path)) {
  det_.set_stage_profiling(true);  // the GPU spans' zero: an event recorded and waited for now
  zero_ = Clock::now();
  nvml_ = std::make_unique<NvmlSampler>();
}

VideoTimeline::~VideoTimeline() {
  if (!finished_) det_.set_stage_profiling(false);
}

double VideoTimeline::ms_since_zero(Clock::time_point t) const {
  return std::chrono::duration<double, std::milli>(t - zero_).count();
}

void VideoTimeline::begin_wait() {
  cur_ = HostBatch{};
  cur_.wait0 = ms_since_zero(Clock::now());
}

void VideoTimeline::got_batch(const std::vector<VideoFrame>& batch) {
  cur_.wait1 = ms_since_zero(Clock::now());
  cur_.frames = static_cast<int>(batch.size());
  std::vector<double> r;
  for (const VideoFrame& f : batch) r.push_back(f.read_ms);
  reads_.insert(reads_.end(), r.begin(), r.end());
  cur_.read_ms_median = median(r);
}

void VideoTimeline::detected() { cur_.detect1 = ms_since_zero(Clock::now()); }

void VideoTimeline::written() {
  cur_.write1 = ms_since_zero(Clock::now());
  if (host_.size() < 1000000) host_.push_back(cur_);
}

void VideoTimeline::finish() {
  finished_ = true;
  const std::vector<BatchSpan> spans = det_.take_timeline();
  det_.set_stage_profiling(false);
  nvml_->stop();
  std::vector<double> wait, detect, write, frames, gpu[4], sync;
  for (const HostBatch& h : host_) {
    wait.push_back(h.wait1 - h.wait0);
    detect.push_back(h.detect1 - h.wait1);
    write.push_back(h.write1 - h.detect1);
    frames.push_back(h.frames);
  }
  for (const BatchSpan& s : spans)
    for (int i = 0; i < 4; ++i) gpu[i].push_back(std::max(0.0, s.t[i + 1] - s.t[i]));
  // host sync: each detect call's time past its GPU span, when every call ran one GPU batch (the
  // spans then come in call order)
  if (spans.size() == host_.size())
    for (size_t k = 0; k < spans.size(); ++k)
      sync.push_back(std::max(0.0, (host_[k].detect1 - host_[k].wait1) - (spans[k].t[4] - spans[k].t[0])));
  char gpu_part[256] = " [no GPU stages: the CPU detector]";
  if (!spans.empty()) {
    char sync_part[48] = "n/a";
    if (!sync.empty()) std::snprintf(sync_part, sizeof sync_part, "%.3f", median(sync));
    std::snprintf(gpu_part, sizeof gpu_part,
                  " [GPU: frames ready %.3f, letterbox %.3f, engine %.3f, post-processing %.3f; host sync %s]",
                  median(gpu[0]), median(gpu[1]), median(gpu[2]), median(gpu[3]), sync_part);
  }
  std::fprintf(stderr,
               "timeline: %zu batches (median %.0f frames), median ms per batch: batch assembly (waiting for frames) "
               "%.3f, detect call %.3f%s, outputs %.3f; per frame: read (demux + decode) median %.3f ms\n",
               host_.size(), median(frames), median(wait), median(detect), gpu_part, median(write), median(reads_));
  if (spans.size() != host_.size() && !spans.empty())
    std::fprintf(stderr, "timeline: %zu GPU spans for %zu batches (not one GPU batch per call: no host sync figure)\n",
                 spans.size(), host_.size());
  std::fprintf(stderr, "%s\n", nvml_->summary().c_str());
  // The trace: the GPU spans as `yolocu bench --timeline` writes them, the host stages on tid 1000.
  std::string ev = trace_events(spans, det_.options().max_batch);
  char buf[320];
  static const char* kHost[3] = {"batch assembly (wait for frames)", "detect call", "outputs"};
  for (size_t k = 0; k < host_.size() && k < 100000; ++k) {
    const HostBatch& h = host_[k];
    const double t[4] = {h.wait0, h.wait1, h.detect1, h.write1};
    for (int i = 0; i < 3; ++i) {
      std::snprintf(buf, sizeof buf,
                    "%s{\"name\": \"%s\", \"cat\": \"host\", \"ph\": \"X\", \"pid\": %d, \"tid\": 1000, \"ts\": %.3f, "
                    "\"dur\": %.3f, \"args\": {\"frames\": %d, \"read_ms_median\": %.3f}}",
                    ev.empty() ? "" : ", ", kHost[i], det_.options().max_batch, 1000.0 * t[i],
                    1000.0 * std::max(0.0, t[i + 1] - t[i]), h.frames, h.read_ms_median);
      ev += buf;
    }
  }
  AtomicFile out(path_);
  out.write("{\"traceEvents\": [" + ev + "]}\n");
  out.commit();
}

}  // namespace yolocu::cli
