// nvJPEG decode alone (CudaJpegDecoder, the decoder `--decode gpu` uses): the JPEGs of a folder,
// in memory, cycled to --images, decoded in lists of --batch by T threads at once (each with its
// decoder and stream, like the detector's execution contexts), per backend. Prints images/s and the
// host time of one decode() call (median): what the host spends before the GPU takes over.
// --busy-ms X: the same again while another stream of the device is kept busy by host functions of
// X ms each: if decode() waited for the whole device (a cudaFree, cudaFreeHost or device
// synchronisation inside), its host time grows by up to X ms; if not, it stays.
// --busy-model M: the same again while another stream runs M's forward at batch 32 (FP16 CUDA
// engine, back to back): the GPU as busy as in `bench --from-jpeg`, which tells whether decode()'s
// host time waits for nvJPEG's own kernels behind the engine's.
//
// --green-sms K (with --busy-model): the decode and the engine again, each on SMs of its own (CUDA
// green contexts: K SMs for nvJPEG's streams, the rest for the engine's), and the decode alone on
// its K SMs: whether the engine's kernels delay nvJPEG's for want of SMs.
//
//   bench_jpeg_decode DIR [--images 4096] [--batch 32] [--threads 1,2,3,4] [--backends hardware,hybrid]
//                     [--busy-ms 5] [--busy-model yolov5n.onnx] [--green-sms 16] [--busy-segments 4,8]
// --busy-segments K,...: the engine beside the decode again with its forward as K graphs
// (CudaEngineOptions::graph_segments) instead of one.
// --random-lists SEED: lists of random sizes (1 to --batch, from SEED) instead of --batch each, as a
// server's dynamic batches come; --pow2-lists 0,1: each run without and with
// CudaJpegDecoderOptions::power_of_two_lists (the batched state initialised once per size); the
// rows then also count nvjpegDecodeBatchedInitialize calls.
// --copies K,...: each run again with every image repeated K times in a row (a list of 32 holds 32/K
// different images), as a server's batch does when its clients send the same images in step:
// whether a list's repeats change what nvJPEG's decode costs.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "yolocu/cuda_engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "yolocu/image_decode_cuda.hpp"
#include "yolocu/model.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// A driver API function resolved through the runtime (no link against libcuda: a toolkit installed
// from PyPI on a machine without a driver has none to link); null when the driver lacks it.
template <class F>
F driver_fn(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12040, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<F>(p);
}

// The green-context functions of the driver API (CUDA 12.4).
struct GreenApi {
  decltype(&cuDeviceGet) device_get = driver_fn<decltype(&cuDeviceGet)>("cuDeviceGet");
  decltype(&cuDeviceGetDevResource) get_resource = driver_fn<decltype(&cuDeviceGetDevResource)>("cuDeviceGetDevResource");
  decltype(&cuDevSmResourceSplitByCount) split = driver_fn<decltype(&cuDevSmResourceSplitByCount)>("cuDevSmResourceSplitByCount");
  decltype(&cuDevResourceGenerateDesc) make_desc = driver_fn<decltype(&cuDevResourceGenerateDesc)>("cuDevResourceGenerateDesc");
  decltype(&cuGreenCtxCreate) create = driver_fn<decltype(&cuGreenCtxCreate)>("cuGreenCtxCreate");
  decltype(&cuGreenCtxStreamCreate) stream_create = driver_fn<decltype(&cuGreenCtxStreamCreate)>("cuGreenCtxStreamCreate");
  decltype(&cuGreenCtxDestroy) destroy = driver_fn<decltype(&cuGreenCtxDestroy)>("cuGreenCtxDestroy");
  bool complete() const { return device_get && get_resource && split && make_desc && create && stream_create && destroy; }
};

// Two green contexts on device 0: about `sms` SMs (rounded to the device's granularity) and the
// rest. Streams are made in them with green_stream().
struct GreenSplit {
  GreenApi api;
  CUgreenCtx part[2] = {nullptr, nullptr};
  unsigned sms[2] = {0, 0};
  bool make(unsigned sms_wanted) {
    CUdevice dev = 0;
    CUdevResource all{}, mine{}, rest{};
    unsigned groups = 1;
    CUdevResourceDesc d[2];
    if (cudaFree(nullptr) != cudaSuccess || !api.complete()) return false;  // the runtime initialises the driver
    if (api.device_get(&dev, 0) != CUDA_SUCCESS || api.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
        api.split(&mine, &groups, &all, &rest, 0, sms_wanted) != CUDA_SUCCESS || groups != 1 ||
        api.make_desc(&d[0], &mine, 1) != CUDA_SUCCESS || api.make_desc(&d[1], &rest, 1) != CUDA_SUCCESS)
      return false;
    sms[0] = mine.sm.smCount;
    sms[1] = rest.sm.smCount;
    for (int i = 0; i < 2; ++i)
      if (api.create(&part[i], d[i], dev, CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS) return false;
    return true;
  }
  cudaStream_t stream(int i, int priority) const {
    CUstream s = nullptr;
    return api.stream_create(&s, part[i], CU_STREAM_NON_BLOCKING, priority) == CUDA_SUCCESS ? s : nullptr;
  }
  ~GreenSplit() {
    for (CUgreenCtx g : part)
      if (g) api.destroy(g);
  }
};

// The q-quantile (0..1) of v, nearest rank.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}
double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }

}  // namespace

int main(int argc, char** argv) {
  using namespace yolocu;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_jpeg_decode DIR [--images 4096] [--batch 32] [--threads 1,2,3,4] "
                         "[--backends hardware,hybrid] [--busy-ms X] [--busy-model M] [--random-lists SEED] "
                         "[--pow2-lists 0,1] [--copies 1,4,32]\n");
    return 2;
  }
  const std::string dir = argv[1];
  int images = 4096, batch = 32;
  std::vector<int> threads = {1, 2, 3, 4};
  std::vector<std::string> backends = {"hardware", "hybrid"};
  double busy_ms = 0;
  std::string busy_model;
  int green_sms = 0;
  std::vector<int> segment_counts, pow2_modes = {0};
  int random_lists = 0;
  std::vector<int> copies_modes = {1};
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--images") images = std::atoi(v.c_str());
    else if (a == "--batch") batch = std::atoi(v.c_str());
    else if (a == "--threads") threads = bench::parse_int_list(v.c_str());
    else if (a == "--busy-ms") busy_ms = std::atof(v.c_str());
    else if (a == "--busy-model") busy_model = v;
    else if (a == "--green-sms") green_sms = std::atoi(v.c_str());
    else if (a == "--busy-segments") segment_counts = bench::parse_int_list(v.c_str());
    else if (a == "--random-lists") random_lists = std::atoi(v.c_str());
    else if (a == "--pow2-lists") pow2_modes = bench::parse_int_list(v.c_str());
    else if (a == "--copies") copies_modes = bench::parse_int_list(v.c_str());
    else if (a == "--backends") {
      backends.clear();
      for (const std::string& b : {std::string("hardware"), std::string("hybrid")})
        if (v.find(b) != std::string::npos) backends.push_back(b);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jpg") files.push_back(read_file_bytes(e.path().string()));
  if (files.empty() || images < 1 || batch < 1) {
    std::fprintf(stderr, "no .jpg files in %s (or bad --images / --batch)\n", dir.c_str());
    return 1;
  }
  std::sort(files.begin(), files.end());
  size_t bytes = 0;
  for (const auto& f : files) bytes += f.size();
  // per --copies mode, the images in order (each repeated K times in a row)
  std::vector<std::vector<EncodedImage>> orders;
  if (copies_modes.empty()) copies_modes = {1};
  for (int& k : copies_modes) {
    k = std::max(1, k);
    orders.emplace_back();
    for (int i = 0; i < images; ++i) {
      const std::string& f = files[static_cast<size_t>(i / k) % files.size()];
      orders.back().push_back({f.data(), f.size(), "img"});
    }
  }
  const std::vector<EncodedImage>& all = orders[0];
  // The lists (first image, count): --batch each, or random sizes with --random-lists
  std::vector<std::pair<size_t, size_t>> lists;
  std::mt19937 rng(static_cast<unsigned>(random_lists));
  for (size_t first = 0; first < all.size();) {
    const size_t n = random_lists > 0 ? static_cast<size_t>(std::uniform_int_distribution<int>(1, batch)(rng))
                                      : static_cast<size_t>(batch);
    lists.emplace_back(first, std::min(n, all.size() - first));
    first += lists.back().second;
  }
  const int batches = static_cast<int>(lists.size());
  std::printf("%zu JPEGs (%.1f MB) cycled to %d, lists of %s%d\n", files.size(), static_cast<double>(bytes) / 1e6, images,
              random_lists > 0 ? "1 to " : "", batch);
  std::printf("%-20s %3s | %8s %10s | %14s %s\n", "backend", "thr", "wall s", "images/s", "host ms/call", "decoded");
  enum class Busy { kNone, kHost, kEngine, kGreenAlone, kGreenEngine, kEagerEngine, kGreenEagerEngine, kSegmented };
  std::vector<Busy> busy_modes = {Busy::kNone};
  if (busy_ms > 0) busy_modes.push_back(Busy::kHost);
  std::unique_ptr<CudaEngine> engine, eager;  // --busy-model: its forward at batch 32, FP16 (graphs / eager)
  void* d_in = nullptr;
  if (!busy_model.empty()) {
    CudaEngineOptions eo;
    eo.max_batch = 32;
    engine = std::make_unique<CudaEngine>(std::make_shared<const Model>(load_onnx(busy_model)), eo);
    const Shape is = engine->input_shape(32);
    const size_t n = static_cast<size_t>(is[0] * is[1] * is[2] * is[3]) * 4;
    if (cudaMalloc(&d_in, n) != cudaSuccess || cudaMemset(d_in, 0, n) != cudaSuccess) {
      std::fprintf(stderr, "cannot allocate the busy engine's input\n");
      return 1;
    }
    busy_modes.push_back(Busy::kEngine);
  }
  // --busy-segments: one engine per segment count (each a mode of its own, in order)
  std::vector<std::unique_ptr<CudaEngine>> segmented;
  std::vector<int> segments_of;  // per segmented engine, its segment count
  const size_t first_segmented = busy_modes.size();
  for (int k : segment_counts) {
    if (!engine || k < 1) continue;
    CudaEngineOptions eo;
    eo.max_batch = 32;
    eo.graph_segments = k;
    segmented.push_back(std::make_unique<CudaEngine>(std::make_shared<const Model>(load_onnx(busy_model)), eo));
    segments_of.push_back(k);
    busy_modes.push_back(Busy::kSegmented);
  }
  GreenSplit green;
  if (green_sms > 0 && engine) {
    if (green.make(static_cast<unsigned>(green_sms))) {
      std::printf("green contexts: %u SMs for the decode, %u for the engine\n", green.sms[0], green.sms[1]);
      // (the eager engine too, in case a graph cannot be launched into a green context's stream)
      CudaEngineOptions eo;
      eo.max_batch = 32;
      eo.cuda_graphs = false;
      eager = std::make_unique<CudaEngine>(std::make_shared<const Model>(load_onnx(busy_model)), eo);
      for (Busy b : {Busy::kGreenAlone, Busy::kGreenEngine, Busy::kEagerEngine, Busy::kGreenEagerEngine})
        busy_modes.push_back(b);
    } else {
      std::printf("green contexts: not available on this device / driver\n");
    }
  }
  for (const std::string& backend : backends) {
   for (const int pow2 : pow2_modes)
   for (size_t ci = 0; ci < orders.size(); ++ci)
   for (size_t bi = 0; bi < busy_modes.size(); ++bi) {
    const std::vector<EncodedImage>& order = orders[ci];
    const Busy busy = busy_modes[bi];
    for (int t : threads) {
      if (t < 1) continue;
      struct Worker {
        std::unique_ptr<CudaJpegDecoder> dec;
        cudaStream_t stream = nullptr;
        std::vector<double> host_ms;
        JpegDecodeCounts counts;
      };
      std::vector<Worker> w(static_cast<size_t>(t));
      try {
        for (Worker& x : w) {
          CudaJpegDecoderOptions o;
          o.use_hardware = backend == "hardware";
          o.power_of_two_lists = pow2 != 0;
          x.dec = std::make_unique<CudaJpegDecoder>(o);
          // the device's highest priority, as the detector's decoders
          int lo = 0, hi = 0;
          cudaDeviceGetStreamPriorityRange(&lo, &hi);
          if (busy == Busy::kGreenAlone || busy == Busy::kGreenEngine || busy == Busy::kGreenEagerEngine) {
            x.stream = green.stream(0, hi);
            if (!x.stream) throw std::runtime_error("green-context stream");
          } else if (cudaStreamCreateWithPriority(&x.stream, cudaStreamNonBlocking, hi) != cudaSuccess) {
            throw std::runtime_error("stream");
          }
        }
      } catch (const std::exception& e) {
        std::printf("%-20s %3d | not available: %s\n", backend.c_str(), t, e.what());
        continue;
      }
      if (w[0].dec->backend() != backend) {
        std::printf("%-20s %3d | not available (got %s)\n", backend.c_str(), t, w[0].dec->backend().c_str());
        continue;
      }
      auto run = [&](int n_batches, bool record) {
        std::atomic<int> next{0};
        std::vector<std::thread> pool;
        for (Worker& x : w)
          pool.emplace_back([&, px = &x] {
            for (int b = next++; b < n_batches; b = next++) {
              const size_t first = lists[static_cast<size_t>(b % batches)].first;
              const size_t last = first + lists[static_cast<size_t>(b % batches)].second;
              const std::vector<EncodedImage> list(order.begin() + static_cast<std::ptrdiff_t>(first),
                                                   order.begin() + static_cast<std::ptrdiff_t>(last));
              const auto h0 = Clock::now();
              JpegDecodeCounts c;
              px->dec->decode(list, px->stream, &c);
              if (record) px->host_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - h0).count());
              cudaStreamSynchronize(px->stream);
              if (record) {
                px->counts.gpu_hardware += c.gpu_hardware, px->counts.gpu_hybrid += c.gpu_hybrid;
                px->counts.cpu_other += c.cpu();
                px->counts.batched_inits += c.batched_inits;
              }
            }
          });
        for (auto& p : pool) p.join();
      };
      run(std::max(4 * t, batches / 4), false);  // warm-up: buffers grown on every decoder
      // --busy-ms: another stream kept busy by host functions that sleep busy_ms each;
      // --busy-model: by the engine's forward, back to back
      std::atomic<bool> stop{false};
      std::atomic<long> forwards{0};
      std::string busy_error;  // an engine run that threw (e.g. on a green-context stream)
      std::thread busy_thread;
      cudaStream_t busy_stream = nullptr;
      const bool busy_engine = busy == Busy::kEngine || busy == Busy::kGreenEngine || busy == Busy::kEagerEngine ||
                               busy == Busy::kGreenEagerEngine || busy == Busy::kSegmented;
      CudaEngine* beside = busy == Busy::kEagerEngine || busy == Busy::kGreenEagerEngine ? eager.get() : engine.get();
      std::string segments_label;
      if (busy == Busy::kSegmented) {
        beside = segmented[bi - first_segmented].get();
        segments_label = "+engine/" + std::to_string(segments_of[bi - first_segmented]);
      }
      if (busy == Busy::kHost || busy_engine) {
        if (busy == Busy::kGreenEngine || busy == Busy::kGreenEagerEngine) busy_stream = green.stream(1, 0);
        else cudaStreamCreateWithFlags(&busy_stream, cudaStreamNonBlocking);
        busy_thread = std::thread([&] {
          while (!stop) {
            if (busy == Busy::kHost) {
              cudaLaunchHostFunc(busy_stream, [](void* ms) {
                std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(*static_cast<double*>(ms)));
              }, &busy_ms);
            } else {
              try {
                beside->run(d_in, 32, busy_stream);
              } catch (const std::exception& e) {
                busy_error = e.what();
                return;
              }
              ++forwards;
            }
            cudaStreamSynchronize(busy_stream);
          }
        });
      }
      const auto t0 = Clock::now();
      run(batches, true);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (busy_thread.joinable()) {
        stop = true;
        busy_thread.join();
        cudaStreamDestroy(busy_stream);
      }
      const char* suffix[] = {"", "+busy", "+engine", "+green", "+green+engine", "+eager", "+green+eager", ""};
      const std::string copies_label = copies_modes[ci] > 1 ? "x" + std::to_string(copies_modes[ci]) : "";
      const std::string label =
          backend + (pow2 ? "+pow2" : "") + copies_label + suffix[static_cast<int>(busy)] + segments_label;
      std::vector<double> host;
      JpegDecodeCounts sum;
      for (Worker& x : w) {
        host.insert(host.end(), x.host_ms.begin(), x.host_ms.end());
        sum.gpu_hardware += x.counts.gpu_hardware, sum.gpu_hybrid += x.counts.gpu_hybrid, sum.cpu_other += x.counts.cpu_other;
        sum.batched_inits += x.counts.batched_inits;
        cudaStreamDestroy(x.stream);
      }
      std::printf("%-20s %3d | %8.3f %10.0f | %14.3f %lld hardware, %lld hybrid, %lld cpu%s%s", label.c_str(), t, s,
                  images / s, median(host), static_cast<long long>(sum.gpu_hardware),
                  static_cast<long long>(sum.gpu_hybrid), static_cast<long long>(sum.cpu_other),
                  w[0].dec->last_refusal().empty() ? "" : "; nvJPEG refused: ", w[0].dec->last_refusal().c_str());
      std::printf("; %lld batched initialisations; host ms/call p90 %.3f, p99 %.3f, max %.3f",
                  static_cast<long long>(sum.batched_inits), quantile(host, 0.9), quantile(host, 0.99), quantile(host, 1.0));
      if (!busy_error.empty()) std::printf("; the engine beside it failed: %s", busy_error.c_str());
      if (busy_engine)
        std::printf("; beside it %ld forwards at batch 32 (%.0f images/s)", forwards.load(), 32.0 * forwards.load() / s);
      std::printf("\n");
    }
   }
  }
  if (d_in) cudaFree(d_in);
  return 0;
}
