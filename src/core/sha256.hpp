// SHA-256 through OpenSSL's libcrypto (EVP): the model and image fingerprints of the INT8
// calibration file. Host only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace yolocu::detail {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // lowercase hex digest; the object is finished afterwards

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

std::string sha256_hex(std::string_view bytes);

}  // namespace yolocu::detail
