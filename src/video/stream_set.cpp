// StreamSet: one reader thread per source, a bounded queue each, batches taken round robin.
// Locking: one mutex guards every queue and status; readers wait on `space`, the consumer on
// `ready`. Opening, decoding and back-off sleeps happen outside the lock.
#include "yolocu/video_streams.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/check.hpp"
#include "yolocu/error.hpp"

namespace yolocu {

const char* stream_state_name(StreamState s) noexcept {
  switch (s) {
    case StreamState::kOpening: return "opening";
    case StreamState::kRunning: return "running";
    case StreamState::kReconnecting: return "reconnecting";
    case StreamState::kFinished: return "finished";
    case StreamState::kFailed: return "failed";
  }
  return "?";
}

struct StreamSet::Impl {
  struct Stream {
    StreamStatus status;   // status.source: redacted
    std::string url;       // the source as given, for FrameSource::open only
    SourceKind kind = SourceKind::kFile;
    int group = 0;         // StreamOptions::groups
    std::deque<VideoFrame> queue;
    bool ended = false;          // the reader thread is done; nothing more will be queued
    FrameSource* current = nullptr;  // the open source, for stop() (guarded by mu)
    int64_t corrupt_before = 0;  // corrupt packets of earlier connections
    std::thread thread;
  };

  StreamOptions options;
  mutable std::mutex mu;
  std::condition_variable ready, space;
  std::atomic<bool> stopping{false};
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::string> messages;
  std::vector<std::vector<Stream*>> members;  // per group, its streams in id order
  std::vector<size_t> round_robin;            // per group

  std::string name(const Stream& s) const { return "stream " + std::to_string(s.status.stream_id) + " (" + s.status.source + ")"; }

  void message(const std::string& m) {  // mu held
    messages.push_back(m);
  }

  // Sleeps for `seconds` unless stop() comes first; false when stopping.
  bool back_off(double seconds) {
    std::unique_lock<std::mutex> lock(mu);
    space.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stopping.load(); });
    return !stopping.load();
  }

  void push(Stream& s, VideoFrame&& f) {
    std::unique_lock<std::mutex> lock(mu);
    const bool live = s.kind == SourceKind::kNetwork || s.kind == SourceKind::kCamera;
    if (live) {
      while (s.queue.size() >= options.queue_depth) {  // stay current: drop the oldest
        s.queue.pop_front();
        ++s.status.dropped;
      }
    } else {
      space.wait(lock, [&] { return stopping.load() || s.queue.size() < options.queue_depth; });
      if (stopping.load()) return;
    }
    s.queue.push_back(std::move(f));
    ready.notify_all();
  }

  void finish(Stream& s, StreamState state, const std::string& error, const std::string& msg) {
    std::lock_guard<std::mutex> lock(mu);
    s.status.state = state;
    if (!error.empty()) s.status.error = error;
    s.ended = true;
    s.current = nullptr;
    if (!msg.empty()) message(msg);
    ready.notify_all();
  }

  void run(Stream& s) {
    const bool network = s.kind == SourceKind::kNetwork;
    int failures = 0;  // failed attempts in a row
    double delay = options.reconnect_delay_s;
    int64_t pushed = 0;
    VideoSourceOptions source_options = options.source;
    source_options.cancel = &stopping;
    if (!options.group_cuda_devices.empty())
      source_options.cuda_device = options.group_cuda_devices[static_cast<size_t>(s.group)];
    // GPU decoding: the queue, the batch being detected and the frame being read hold surfaces
    source_options.max_frames_held = static_cast<int>(std::min<size_t>(2 * options.queue_depth + 2, 16));
    for (;;) {
      std::string error;
      std::unique_ptr<FrameSource> src;  // outlives `current` (reset under the lock first)
      try {
        src = FrameSource::open(s.url, source_options);
        {
          std::lock_guard<std::mutex> lock(mu);
          s.status.info = src->info();
          s.status.state = StreamState::kRunning;
          s.current = src.get();
          if (failures > 0) message(name(s) + ": reconnected");
          if (!s.status.info.decoder_note.empty() && failures == 0) message(name(s) + ": " + s.status.info.decoder_note);
        }
        if (stopping.load()) src->interrupt();
        const auto opened = std::chrono::steady_clock::now();
        bool stable = false;
        VideoFrame f;
        while (src->read(f)) {
          f.stream_id = s.status.stream_id;
          push(s, std::move(f));
          f = VideoFrame();
          ++pushed;
          // a connection that delivered for stable_after_s starts the count of attempts afresh (a
          // source that fails a second after every reconnect still gives up)
          if (!stable && std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count() >=
                             options.stable_after_s) {
            stable = true;
            failures = 0;
            delay = options.reconnect_delay_s;
          }
          std::lock_guard<std::mutex> lock(mu);
          s.status.corrupt = s.corrupt_before + src->stats().corrupt;
        }
      } catch (const Error& e) {
        error = e.what();
      } catch (const std::exception& e) {
        error = std::string("unexpected error: ") + e.what();
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        s.current = nullptr;
        if (src) {
          const SourceStats st = src->stats();
          s.status.corrupt = s.corrupt_before + st.corrupt;
          s.corrupt_before = s.status.corrupt;
          if (st.corrupt > 0)
            message(name(s) + ": " + std::to_string(st.corrupt) + " corrupt packets skipped (last: " + st.last_problem +
                    ")");
          else if (!st.last_problem.empty())
            message(name(s) + ": " + st.last_problem);
        }
      }
      src.reset();
      if (stopping.load()) return finish(s, StreamState::kFinished, "", "");
      if (error.empty())
        return finish(s, StreamState::kFinished, "", name(s) + ": end of stream after " + std::to_string(pushed) + " frames");
      if (!network) return finish(s, StreamState::kFailed, error, name(s) + ": failed: " + error);
      if (options.max_reconnects >= 0 && failures >= options.max_reconnects)
        return finish(s, StreamState::kFailed, error,
                      name(s) + ": failed after " + std::to_string(failures) + " reconnect attempts: " + error);
      {
        std::lock_guard<std::mutex> lock(mu);
        s.status.state = StreamState::kReconnecting;
        s.status.error = error;
        ++s.status.reconnects;
        char b[48];
        std::snprintf(b, sizeof b, "%.1f s", delay);
        message(name(s) + ": reconnecting in " + b + " after: " + error);
      }
      ++failures;
      if (!back_off(delay)) return finish(s, StreamState::kFinished, "", "");
      delay = std::min(delay * 2, options.reconnect_max_delay_s);
    }
  }

  // Of group g (mu held): the frames queued; whether every stream has ended; whether every stream
  // that can still deliver has a frame queued (no point waiting longer).
  size_t ready_count(int g) const {
    size_t n = 0;
    for (const Stream* s : members[static_cast<size_t>(g)]) n += s->queue.size();
    return n;
  }
  bool all_ended(int g) const {
    const auto& m = members[static_cast<size_t>(g)];
    return std::all_of(m.begin(), m.end(), [](const Stream* s) { return s->ended; });
  }
  bool all_active_have_frames(int g) const {
    const auto& m = members[static_cast<size_t>(g)];
    return std::all_of(m.begin(), m.end(), [](const Stream* s) { return s->ended || !s->queue.empty(); });
  }
};

namespace {

// The group count of the options' partition: one past the largest group, or as many as
// group_cuda_devices names (a group may have no source: its next_batch() ends at once);
// kInvalidArgument when the partition does not fit the sources.
int check_groups(const StreamOptions& o, size_t sources) {
  YOLOCU_CHECK(o.groups.empty() || o.groups.size() == sources, kInvalidArgument, "StreamSet: groups has ",
               o.groups.size(), " entries for ", sources, " sources");
  int g = 1;
  for (int x : o.groups) {
    YOLOCU_CHECK(x >= 0 && x < 1024, kInvalidArgument, "StreamSet: group ", x, " out of range [0, 1024)");
    g = std::max(g, x + 1);
  }
  YOLOCU_CHECK(o.group_cuda_devices.empty() || o.group_cuda_devices.size() >= static_cast<size_t>(g), kInvalidArgument,
               "StreamSet: group_cuda_devices has ", o.group_cuda_devices.size(), " entries for ", g, " groups");
  for (int d : o.group_cuda_devices) YOLOCU_CHECK(d >= 0, kInvalidArgument, "StreamSet: CUDA device ", d, " < 0");
  return std::max(g, static_cast<int>(o.group_cuda_devices.size()));
}

}  // namespace

StreamSet::StreamSet(const std::vector<std::string>& sources, const StreamOptions& options)
    : impl_(std::make_unique<Impl>()) {
  YOLOCU_CHECK(!sources.empty(), kInvalidArgument, "StreamSet: no sources");
  YOLOCU_CHECK(options.queue_depth > 0, kInvalidArgument, "StreamSet: queue_depth must be > 0");
  YOLOCU_CHECK(options.reconnect_delay_s >= 0 && options.reconnect_max_delay_s >= options.reconnect_delay_s &&
                   options.batch_wait_s >= 0 && options.max_reconnects >= -1 && options.stable_after_s >= 0,
               kInvalidArgument, "StreamSet: invalid reconnect or batch options");
  const int groups = check_groups(options, sources.size());
  impl_->options = options;
  impl_->members.resize(static_cast<size_t>(groups));
  impl_->round_robin.assign(static_cast<size_t>(groups), 0);
  for (size_t i = 0; i < sources.size(); ++i) {
    auto s = std::make_unique<Impl::Stream>();
    s->status.stream_id = static_cast<int>(i);
    s->group = options.groups.empty() ? 0 : options.groups[i];
    impl_->members[static_cast<size_t>(s->group)].push_back(s.get());
    s->url = sources[i];
    s->status.source = redact_source(sources[i]);  // what status() reports and messages print
    s->kind = classify_source(sources[i]);
    impl_->streams.push_back(std::move(s));
  }
  for (auto& s : impl_->streams) {
    Impl::Stream* p = s.get();
    p->thread = std::thread([this, p] { impl_->run(*p); });
  }
}

StreamSet::~StreamSet() {
  stop();
  for (auto& s : impl_->streams)
    if (s->thread.joinable()) s->thread.join();
}

size_t StreamSet::size() const noexcept { return impl_->streams.size(); }

int StreamSet::groups() const noexcept { return static_cast<int>(impl_->members.size()); }

void StreamSet::stop() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  m.stopping.store(true);
  for (auto& s : m.streams)
    if (s->current) s->current->interrupt();
  m.ready.notify_all();
  m.space.notify_all();
}

bool StreamSet::next_batch(std::vector<VideoFrame>& batch, size_t max_frames, int group) {
  YOLOCU_CHECK(max_frames > 0, kInvalidArgument, "next_batch: max_frames must be > 0");
  YOLOCU_CHECK(group >= 0 && group < groups(), kInvalidArgument, "next_batch: group ", group, " of ", groups());
  batch.clear();
  Impl& m = *impl_;
  const int g = group;
  std::unique_lock<std::mutex> lock(m.mu);
  m.ready.wait(lock, [&] { return m.stopping.load() || m.ready_count(g) > 0 || m.all_ended(g); });
  if (m.stopping.load() || m.ready_count(g) == 0) return false;
  if (m.ready_count(g) < max_frames && !m.all_active_have_frames(g) && m.options.batch_wait_s > 0)
    m.ready.wait_for(lock, std::chrono::duration<double>(m.options.batch_wait_s), [&] {
      return m.stopping.load() || m.ready_count(g) >= max_frames || m.all_active_have_frames(g);
    });
  const std::vector<Impl::Stream*>& members = m.members[static_cast<size_t>(g)];
  size_t& round_robin = m.round_robin[static_cast<size_t>(g)];
  const size_t n = members.size();
  for (bool took = true; took && batch.size() < max_frames;) {
    took = false;
    for (size_t k = 0; k < n && batch.size() < max_frames; ++k) {
      Impl::Stream& s = *members[(round_robin + k) % n];
      if (s.queue.empty()) continue;
      batch.push_back(std::move(s.queue.front()));
      s.queue.pop_front();
      ++s.status.delivered;
      took = true;
    }
  }
  round_robin = (round_robin + 1) % n;
  m.space.notify_all();
  return !batch.empty();
}

std::vector<StreamStatus> StreamSet::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<StreamStatus> out;
  for (const auto& s : impl_->streams) out.push_back(s->status);
  return out;
}

std::vector<std::string> StreamSet::take_messages() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<std::string> out;
  out.swap(impl_->messages);
  return out;
}

}  // namespace yolocu
