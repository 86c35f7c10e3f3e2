// The loop from sources to detections (yolocu/pipeline.hpp): the decode pool feeds calls of
// `batch` images, run one after the other or, with several execution contexts, several at once on
// worker threads; results go out in input order.
#include "yolocu/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <memory>
#include <system_error>
#include <utility>

#include "core/check.hpp"
#include "pipeline/decode_pool.hpp"

namespace yolocu {
namespace {

using detail::DecodePool;

// One detect() call's share of a run: sources [start, next), of which those in `index` were
// decoded (or read, encoded mode) and go into the call.
struct Chunk {
  size_t start = 0, next = 0;
  std::vector<size_t> index;
  std::vector<DecodePool::Item> items;  // per entry of `index`
  DetectionTrace trace;
  bool traced = false;
  std::vector<size_t> slot;  // per source of the chunk: its place in the call (for the trace)
  StageTimes times;          // summed over the chunk's calls (a failed call is retried image by image)
};

void add_times(StageTimes& sum, const StageTimes& t) {
  sum.preprocess += t.preprocess, sum.inference += t.inference;
  sum.postprocess += t.postprocess, sum.total += t.total;
  sum.gpu_upload += t.gpu_upload, sum.gpu_letterbox += t.gpu_letterbox;
  sum.gpu_engine += t.gpu_engine, sum.gpu_postprocess += t.gpu_postprocess;
  sum.gpu_timed_batches += t.gpu_timed_batches, sum.gpu_untimed_batches += t.gpu_untimed_batches;
  sum.batches += t.batches;
}

void record_failure(ImageResult& r, const std::exception& e) {
  r.error = describe_error(e);
  r.exception = std::current_exception();
}

// Takes up to `size` sources from the pool, from `next` on; a failure lands in its result.
std::unique_ptr<Chunk> read_chunk(DecodePool& pool, size_t& next, size_t n, size_t size,
                                  std::vector<ImageResult>& results) {
  auto c = std::make_unique<Chunk>();
  c->start = next;
  while (c->index.size() < size && next < n) {
    DecodePool::Item item = pool.take(next);
    if (item.error.empty()) {
      results[next].width = item.view.width;
      results[next].height = item.view.height;
      c->index.push_back(next);
      c->items.push_back(std::move(item));
    } else {
      results[next].error = std::move(item.error);
      results[next].exception = std::move(item.exception);
    }
    ++next;
  }
  c->next = next;
  c->slot.assign(c->next - c->start, 0);
  return c;
}

// Encoded mode: detect_encoded (the detector decodes, nvJPEG with DecodeDevice::kGpu) reports each
// image's size. A failing call is retried image by image.
void detect_encoded_chunk(Detector& det, Chunk& c, const PostprocessOptions* post, std::vector<ImageResult>& results) {
  auto enc = [&](size_t k) {
    const DecodePool::Item& it = c.items[k];
    return it.data ? EncodedImage{it.data, it.size, results[c.index[k]].path}
                   : EncodedImage{it.bytes.data(), it.bytes.size(), results[c.index[k]].path};
  };
  auto take = [&](size_t k, Detections&& d, const DecodedSize& size) {
    results[c.index[k]].detections = std::move(d);
    results[c.index[k]].width = size.width;
    results[c.index[k]].height = size.height;
  };
  std::vector<EncodedImage> all;
  for (size_t k = 0; k < c.index.size(); ++k) all.push_back(enc(k));
  try {
    std::vector<DecodedSize> sizes;
    std::vector<Detections> dets = det.detect_encoded(all, &sizes, post);
    add_times(c.times, det.last_times());
    for (size_t k = 0; k < c.index.size(); ++k) take(k, std::move(dets[k]), sizes[k]);
  } catch (const std::exception&) {
    for (size_t k = 0; k < c.index.size(); ++k) {
      try {
        std::vector<DecodedSize> sizes;
        std::vector<Detections> dets = det.detect_encoded({enc(k)}, &sizes, post);
        add_times(c.times, det.last_times());
        take(k, std::move(dets[0]), sizes[0]);
      } catch (const std::exception& e) {
        record_failure(results[c.index[k]], e);
      }
    }
  }
}

void detect_decoded_chunk(Detector& det, Chunk& c, bool trace, const PostprocessOptions* post,
                          std::vector<ImageResult>& results) {
  std::vector<ImageView> views;
  for (const DecodePool::Item& it : c.items) views.push_back(it.view);
  try {
    std::vector<Detections> dets = det.detect(views, trace ? &c.trace : nullptr, post);
    add_times(c.times, det.last_times());
    for (size_t k = 0; k < c.index.size(); ++k) {
      results[c.index[k]].detections = std::move(dets[k]);
      c.slot[c.index[k] - c.start] = k;
    }
    c.traced = trace;
  } catch (const std::exception&) {
    for (size_t k = 0; k < c.index.size(); ++k) {
      try {
        results[c.index[k]].detections = det.detect({views[k]}, nullptr, post).at(0);
        add_times(c.times, det.last_times());
      } catch (const std::exception& e) {
        record_failure(results[c.index[k]], e);
      }
    }
  }
}

// Runs the chunk's call and fills its sources' results (only theirs: chunks may run at once).
void detect_chunk(Detector& det, Chunk& c, const PipelineOptions& o, std::vector<ImageResult>& results) {
  if (c.items.empty()) return;
  if (o.encoded) {
    detect_encoded_chunk(det, c, o.postprocess, results);
  } else {
    detect_decoded_chunk(det, c, o.trace, o.postprocess, results);
  }
}

// Encoded input: a call's batches (a call decodes its next batch while its last one computes).
constexpr size_t kEncodedBatchesPerCall = 4;

size_t images_per_call(const PipelineOptions& o) {
  return static_cast<size_t>(std::max(o.batch, 1)) * (o.encoded ? kEncodedBatchesPerCall : 1);
}

// Calls at once: one per execution context; encoded input two (the GPU detector keeps two decoders
// per context and a call decodes before it takes a context).
size_t concurrent_calls(const Detector& det, const PipelineOptions& o) {
  return static_cast<size_t>(std::max(det.options().contexts, 1)) * (o.encoded ? 2 : 1);
}

// The run's state on the calling thread: the results, the calls in flight and their emission in
// input order.
class Runner {
 public:
  Runner(Detector& det, const std::vector<Source>& sources, const PipelineOptions& o, const ImageCallback& callback)
      : det_(det), o_(o), callback_(callback), n_(sources.size()), results_(sources.size()) {
    for (size_t i = 0; i < n_; ++i) results_[i].path = sources[i].name;
  }

  // With N contexts, N calls of one batch each run at once on worker threads (each takes a free
  // execution context), so that one call's decode, upload and host work overlap the others'
  // compute and no call waits for a whole group to drain; the last_times() each worker adds are
  // its own call's. Encoded input (the detector decodes, nvJPEG on the GPU): 2N calls at once
  // of kEncodedBatchesPerCall batches each (concurrent_calls, images_per_call). A run of one call
  // runs it on the calling thread.
  void run(const std::vector<Source>& sources) {
    const size_t per_call = images_per_call(o_);
    const size_t calls = n_ <= per_call ? 1 : concurrent_calls(det_, o_);
    DecodePool pool(sources, o_.decode_threads, 2 * per_call * calls + static_cast<size_t>(std::max(o_.decode_threads, 0)),
                    o_.encoded, det_.options().decode_limits);
    size_t next = 0;
    while (next < n_) {
      std::unique_ptr<Chunk> c = read_chunk(pool, next, n_, per_call, results_);
      if (calls > 1 && start_async(c, calls)) continue;
      detect_chunk(det_, *c, o_, results_);
      emit(*c);
    }
    while (!flight_.empty()) emit_oldest();
  }

  std::vector<ImageResult>& results() { return results_; }
  PipelineSummary& summary() { return sum_; }

 private:
  // Starts the chunk's call on a worker thread once fewer than `calls` are in flight; false (the
  // calls in flight emitted) when no thread can be had: the call then runs here.
  bool start_async(std::unique_ptr<Chunk>& c, size_t calls) {
    while (flight_.size() >= calls) emit_oldest();
    Chunk* p = c.get();
    std::future<void> f;
    try {
      f = std::async(std::launch::async, [this, p] { detect_chunk(det_, *p, o_, results_); });
    } catch (const std::system_error&) {
    }
    if (!f.valid()) {
      while (!flight_.empty()) emit_oldest();
      return false;
    }
    flight_.emplace_back(std::move(c), std::move(f));
    return true;
  }

  void emit_oldest() {
    flight_.front().second.get();
    emit(*flight_.front().first);
    flight_.pop_front();
  }

  // The chunk's results, in input order, on this thread.
  void emit(const Chunk& c) {
    add_times(sum_.times, c.times);
    size_t item = 0;
    for (size_t i = c.start; i < c.next; ++i) {
      const ImageResult& r = results_[i];
      const bool ok = r.error.empty();
      const bool decoded = item < c.index.size() && c.index[item] == i;
      const ImageView im = decoded && ok && !o_.encoded ? c.items[item].view : ImageView{};
      if (callback_) callback_(i, r, im, ok && c.traced ? &c.trace : nullptr, c.slot[i - c.start]);
      if (decoded) ++item;
      sum_.failed += ok ? 0 : 1;
      sum_.detections += r.detections.size();
    }
  }

  Detector& det_;
  const PipelineOptions& o_;
  const ImageCallback& callback_;
  const size_t n_;
  std::vector<ImageResult> results_;
  PipelineSummary sum_;
  // Calls in flight, oldest first (their futures wait in their destructors, also on an exception).
  std::deque<std::pair<std::unique_ptr<Chunk>, std::future<void>>> flight_;
};

}  // namespace

size_t pipeline_images_in_flight(const Detector& detector, const PipelineOptions& options) {
  return images_per_call(options) * concurrent_calls(detector, options);
}

std::vector<ImageResult> run_pipeline(Detector& det, const std::vector<Source>& sources, const PipelineOptions& o,
                                      const ImageCallback& callback, PipelineSummary* summary) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.encoded)
    for (size_t i = 0; i < sources.size(); ++i)
      YOLOCU_CHECK(sources[i].kind != Source::Kind::kDecoded, kInvalidArgument, "run_pipeline: source ", i, " (",
                   sources[i].name, ") is a decoded image; encoded mode takes files and encoded bytes");
  Runner runner(det, sources, o, callback);
  runner.run(sources);
  PipelineSummary& sum = runner.summary();
  sum.images = sources.size();
  sum.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (summary) *summary = sum;
  return std::move(runner.results());
}

}  // namespace yolocu
