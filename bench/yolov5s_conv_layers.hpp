// YOLOv5s's distinct convolution layers at a 640x640 input (model index, shape, input size), the
// layers both INT8 convolution benchmarks time: bench_conv_int8 and bench_conv_int8_sm90.
#pragma once

namespace yolocu::bench {

struct Yolov5sConvLayer {
  const char* name;
  int c, hw, k, r, stride;
  bool residual;  // the C3 bottleneck's 3x3 with its residual Add
  int pad() const { return r == 6 ? 2 : r / 2; }  // the 6x6 stem pads 2, the others r / 2
};

inline constexpr Yolov5sConvLayer kYolov5sConvLayers[] = {
    {"0 stem 6x6 s2 3(16)->32 @640", 16, 640, 32, 6, 2, false},
    {"1 3x3 s2 32->64 @320", 32, 320, 64, 3, 2, false},
    {"2.cv1 1x1 64->32 @160", 64, 160, 32, 1, 1, false},
    {"2.m 3x3 32->32 +res @160", 32, 160, 32, 3, 1, true},
    {"2.cv3 1x1 64->64 @160", 64, 160, 64, 1, 1, false},
    {"3 3x3 s2 64->128 @160", 64, 160, 128, 3, 2, false},
    {"4.cv1 1x1 128->64 @80", 128, 80, 64, 1, 1, false},
    {"4.m 3x3 64->64 +res @80", 64, 80, 64, 3, 1, true},
    {"5 3x3 s2 128->256 @80", 128, 80, 256, 3, 2, false},
    {"6.m 3x3 128->128 +res @40", 128, 40, 128, 3, 1, true},
    {"6.cv3 1x1 256->256 @40", 256, 40, 256, 1, 1, false},
    {"7 3x3 s2 256->512 @40", 256, 40, 512, 3, 2, false},
    {"8.m 3x3 256->256 +res @20", 256, 20, 256, 3, 1, true},
    {"8.cv3 1x1 512->512 @20", 512, 20, 512, 1, 1, false},
};

}  // namespace yolocu::bench
