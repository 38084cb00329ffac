// SHA-256 digests (OpenSSL's EVP), for the graph hash a plan records.
#ifndef CKPTPLAN_SHA256_H_
#define CKPTPLAN_SHA256_H_

#include <string>
#include <string_view>

namespace ckptplan {

/// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

/// SHA-256 of data that arrives in pieces.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view piece);
  /// Lower-case hex digest of everything updated so far; call once.
  std::string HexDigest();

 private:
  void* context_;  // EVP_MD_CTX
};

}  // namespace ckptplan

#endif  // CKPTPLAN_SHA256_H_
