// Package signatures (docs/SECURITY.md; layout in docs/PACKAGE_FORMAT.md,
// "Signatures"): Ed25519 (libsodium) over every byte of a package but the
// signature itself, and the trust policy SVOD_TRUSTED_KEYS.
//
// A signed package is an unsigned one followed by a signature block of
// kSignatureBlockSize bytes; the package inside is unchanged, so its sections
// stay where they were (and 64-byte aligned) and unsigned packages read as
// before. PackageReader frames the block (its size and magic); this file owns
// what is in it, the key files and the policy, and load_package calls
// check_package_signature before it uses anything in a package.
//
// Key files are two lines of text: a header naming the kind, then the key in
// hexadecimal. A public key (NAME.pub) holds the 32-byte Ed25519 public key;
// a secret key (NAME.key) the 32-byte seed the key pair is derived from, and
// is refused when anyone but its owner may read it. A key's id, which
// messages name, is the first 16 hexadecimal digits of its public key (for
// people; trust compares whole keys).
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace svod {

class PackageReader;

inline constexpr size_t kSignatureBlockSize = 112;
inline constexpr char kSignatureMagic[8] = {'S', 'V', 'O', 'D', 'S', 'I', 'G', '\0'};
inline constexpr std::string_view kPublicKeyHeader = "svod ed25519 public key";
inline constexpr std::string_view kSecretKeyHeader = "svod ed25519 secret key";

struct PublicKey {
  std::array<std::byte, 32> bytes{};

  std::string id() const;   // 16 hexadecimal digits
  std::string hex() const;  // all 64
  bool operator==(const PublicKey&) const = default;
};

// A signing key. Its secret bytes are wiped when it is destroyed.
class SecretKey {
 public:
  explicit SecretKey(std::span<const std::byte, 32> seed);
  ~SecretKey();
  SecretKey(SecretKey&& other) noexcept;  // wipes `other`
  SecretKey(const SecretKey&) = delete;
  SecretKey& operator=(const SecretKey&) = delete;
  SecretKey& operator=(SecretKey&&) = delete;

  const PublicKey& public_key() const noexcept { return public_; }
  // libsodium's 64-byte secret key (seed, then public key).
  std::span<const std::byte, 64> expanded() const noexcept { return expanded_; }

 private:
  std::array<std::byte, 64> expanded_{};
  PublicKey public_;
};

// A new random key pair written as `name`.key (mode 0600) and `name`.pub.
// Neither file may exist yet (Error(Io) naming the one that does: keys are
// never overwritten); Error(Io) when a file cannot be written;
// Error(Validation) when `name` names a folder ("/", "keys/", ".").
PublicKey generate_key_pair(const std::filesystem::path& name);
// Key files. Error(Io) when the file cannot be read or is not a regular
// file; Error(Validation) naming the file and the fault when it is not a key
// file of that kind, or (secret keys) when its group or others may read it.
PublicKey read_public_key(const std::filesystem::path& path);
SecretKey read_secret_key(const std::filesystem::path& path);

// `package` (an unsigned package, checked as PackageReader does;
// Error(Validation) when it is signed already) followed by its signature
// block. Taken by value so that a moved-in package is extended in place.
std::vector<std::byte> sign_package(std::vector<std::byte> package, const SecretKey& key);

// The keys SVOD_TRUSTED_KEYS names: a ':'-separated list whose entries are
// .pub files or folders (every *.pub file in one, not recursing); nullopt when
// the variable is unset or empty. Error(Validation) when it names no key,
// errors of read_public_key for a bad key file.
struct TrustedKey {
  PublicKey key;
  std::filesystem::path file;
};
std::optional<std::vector<TrustedKey>> trusted_keys();

// Checks a package's signature and the trust policy; the signer, or nullopt
// for an unsigned package. Error(Load) when the signature block is malformed;
// Error(Validation) when the signature does not hold (any byte changed after
// signing), and, while SVOD_TRUSTED_KEYS is set, when the package is unsigned
// or its signer is not among the trusted keys. Messages name the package and
// the key id.
std::optional<PublicKey> check_package_signature(const PackageReader& reader);

}  // namespace svod
