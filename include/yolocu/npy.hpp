// yolocu/npy.hpp - NumPy .npy / .npz files, the exchange format with PyTorch and ONNX Runtime.
//
// Supported: little-endian f2/f4/f8/i1/u1/i4/i8/b1 arrays in C order (.npy format 1.0-3.0);
// .npz archives stored or deflated (np.savez / np.savez_compressed). Anything else is a clear
// kParse / kUnsupported error; sizes are validated against the file before allocating.
#pragma once

#include <map>
#include <string>

#include "yolocu/tensor.hpp"

namespace yolocu {

Tensor load_npy(const std::string& path);
Tensor parse_npy(const void* data, size_t size, const std::string& what = "npy data");
// Written whole or not at all (AtomicFile, yolocu/atomic_file.hpp); kIo naming the path and the reason.
void save_npy(const std::string& path, const Tensor& t);

// All arrays of an .npz archive, keyed by name without the ".npy" suffix.
std::map<std::string, Tensor> load_npz(const std::string& path);
// The same for an archive held in memory; `what` names it in messages.
std::map<std::string, Tensor> parse_npz(const void* data, size_t size, const std::string& what = "npz data");

}  // namespace yolocu
