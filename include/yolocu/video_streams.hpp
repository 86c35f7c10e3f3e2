// yolocu/video_streams.hpp - many sources at once: one reader thread per source, frames batched
// across sources for one Detector call.
//
//   yolocu::StreamSet streams(yolocu::read_source_list("cams.txt"), options);
//   std::vector<yolocu::VideoFrame> batch;
//   while (streams.next_batch(batch, 8)) { ... det->detect(views of batch) ... }
//
// Each source is opened and read on its own thread into a bounded queue (StreamOptions::queue_depth).
// When a queue is full, a live source (network, camera) drops its oldest frame (counted in
// StreamStatus::dropped) so that it stays current; a file or image sequence waits instead, so
// every one of its frames is detected. next_batch() takes whatever frames are ready, round robin
// over the sources, and never waits for a slow or dead source while another has frames. A network
// source that fails (cannot connect, error, read timeout) is reopened after a back-off (doubling
// from reconnect_delay_s up to reconnect_max_delay_s) at most max_reconnects times in a row; its
// frame indices then start again from 0 and its pts from the new connection. The end of a source
// (end of file) ends that source only. Attempts count "in a row": the count starts again after a
// connection that delivered frames for stable_after_s. A source that cannot be opened or fails for
// good ends with StreamState::kFailed and a message; the others keep going.
//
// Threads: next_batch(), status(), take_messages() and stop() may be called from any thread;
// frames come out in order within each source. With StreamOptions::groups the sources are split
// between several consumers (one detector per GPU), each taking batches of its own group's sources. The destructor stops and joins every thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "yolocu/video.hpp"

namespace yolocu {

struct StreamOptions {
  VideoSourceOptions source;      // per-source decoding options (stride, start, frames, timeouts)
  size_t queue_depth = 4;         // decoded frames buffered per source
  int max_reconnects = 5;         // network sources: reopen attempts in a row after a failure; -1: no limit
  double reconnect_delay_s = 0.5; // first back-off; doubles per failed attempt
  double reconnect_max_delay_s = 8;
  double stable_after_s = 30;     // a connection that delivers frames this long resets the attempt count
  double batch_wait_s = 0.005;    // next_batch: after the first ready frame, wait at most this long for
                                  // frames of other sources to fill the batch
  // Several consumers, e.g. one detector per GPU: source i belongs to group groups[i] (0..G-1; empty:
  // every source in group 0), next_batch(..., g) takes the frames of group g only, and a group's
  // sources decode on group_cuda_devices[g] (NVDEC; empty: source.cuda_device for every group). The
  // groups: one past the largest entry of `groups`, or as many as group_cuda_devices names.
  std::vector<int> groups;
  std::vector<int> group_cuda_devices;
};

enum class StreamState { kOpening, kRunning, kReconnecting, kFinished, kFailed };
const char* stream_state_name(StreamState state) noexcept;

struct StreamStatus {
  int stream_id = 0;
  std::string source;  // as given, credentials removed (redact_source)
  StreamState state = StreamState::kOpening;
  SourceInfo info;          // of the current (last) connection; empty before the first open
  int64_t delivered = 0;    // frames handed out by next_batch()
  int64_t dropped = 0;      // frames dropped because the queue was full (live sources only)
  int64_t corrupt = 0;      // packets the decoder rejected, over all connections
  int reconnects = 0;       // successful and failed reopen attempts
  std::string error;        // why the source failed (kFailed), or the last failure before a reconnect
};

class StreamSet {
 public:
  // Starts one reader thread per source; stream ids are the positions in `sources`. Never throws for
  // a bad source (that stream fails with a message); kInvalidArgument for an empty list or
  // queue_depth 0.
  StreamSet(const std::vector<std::string>& sources, const StreamOptions& options = {});
  ~StreamSet();
  StreamSet(const StreamSet&) = delete;
  StreamSet& operator=(const StreamSet&) = delete;

  // Replaces `batch` with 1..max_frames ready frames of group `group` (StreamOptions::groups; round
  // robin over its sources, in order within each). Blocks until a frame is ready; false (empty batch)
  // once every source of the group has ended and its queue is empty, or after stop(). One consumer
  // thread per group.
  bool next_batch(std::vector<VideoFrame>& batch, size_t max_frames, int group = 0);
  // The number of groups (1 without StreamOptions::groups).
  int groups() const noexcept;

  std::vector<StreamStatus> status() const;
  size_t size() const noexcept;

  // Messages of the reader threads since the last call ("stream 2 (rtsp://...): reconnecting in 1.0 s
  // after: ..."), in the order they happened.
  std::vector<std::string> take_messages();

  // Interrupts every source and makes next_batch() return false. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yolocu
