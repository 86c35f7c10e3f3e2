// SHA-256 (sha256.hpp) over OpenSSL's EVP interface.
#include "core/sha256.hpp"

#include <openssl/evp.h>

#include "core/check.hpp"

namespace yolocu::detail {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  YOLOCU_CHECK(ctx_->md && EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1, kInternal,
               "SHA-256: OpenSSL cannot start a digest");
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t size) {
  YOLOCU_CHECK(ctx_->md && EVP_DigestUpdate(ctx_->md, data, size) == 1, kInternal, "SHA-256: digest update failed");
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  YOLOCU_CHECK(ctx_->md && EVP_DigestFinal_ex(ctx_->md, digest, &len) == 1, kInternal, "SHA-256: digest failed");
  EVP_MD_CTX_free(ctx_->md);
  ctx_->md = nullptr;
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < len; ++i) {
    s += kHex[digest[i] >> 4];
    s += kHex[digest[i] & 15];
  }
  return s;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}

}  // namespace yolocu::detail
