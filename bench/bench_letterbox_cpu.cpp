// CPU letterbox benchmark: decode + letterbox of a real image to 640x640 (uint8 BGR and the float32
// model input), median of many runs after a warm-up.
//
//   bench_letterbox_cpu [image.jpg] [runs]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "yolocu/letterbox.hpp"

namespace {

template <typename Fn>
double median_ms(int runs, Fn fn) {
  for (int i = 0; i < 3; ++i) fn();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string path = argc > 1 ? argv[1] : "../shared/data/images/bus.jpg";
    const int runs = argc > 2 ? std::atoi(argv[2]) : 50;
    const yolocu::Image img = yolocu::decode_image_file(path);
    std::vector<uint8_t> bgr(640 * 640 * 3);
    std::vector<float> f32(3 * 640 * 640);
    std::vector<uint16_t> f16(3 * 640 * 640);
    std::printf("%s: %dx%d -> 640x640, %d OpenMP threads, median of %d runs\n", path.c_str(),
                img.width(), img.height(), omp_get_max_threads(), runs);
    std::printf("  decode_image_file          %8.3f ms\n",
                median_ms(runs, [&] { (void)yolocu::decode_image_file(path); }));
    std::printf("  letterbox_bgr (uint8)      %8.3f ms\n",
                median_ms(runs, [&] { yolocu::letterbox_bgr(img.view(), 640, 640, bgr.data()); }));
    std::printf("  letterbox_to_input (f32)   %8.3f ms\n", median_ms(runs, [&] {
                  yolocu::letterbox_to_input(img.view(), 640, 640, yolocu::DType::kFloat32, f32.data());
                }));
    std::printf("  letterbox_to_input (f16)   %8.3f ms\n", median_ms(runs, [&] {
                  yolocu::letterbox_to_input(img.view(), 640, 640, yolocu::DType::kFloat16, f16.data());
                }));
    return 0;
  } catch (const yolocu::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
