#include "svod/package/signature.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/file_read.h"
#include "svod/base/plugin.h"
#include "svod/package/package_format.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

// Signature block, 112 bytes after the package, little-endian:
//   0 magic[8]  8 u32 version  12 u32 reserved (zero)  16 public key[32]  48 signature[64]
// The signature signs every byte of the file before it: the package and the
// block's first 48 bytes.
constexpr uint32_t kSignatureVersion = 1;
constexpr size_t kKeyField = 16;
constexpr size_t kSignatureField = 48;
static_assert(kSignatureField + crypto_sign_BYTES == kSignatureBlockSize);
static_assert(crypto_sign_PUBLICKEYBYTES == 32 && crypto_sign_SEEDBYTES == 32 && crypto_sign_SECRETKEYBYTES == 64);

// A key file is two short lines; anything much longer is not one.
constexpr size_t kMaxKeyFileBytes = 1024;

// libsodium, opened on first use: most processes never sign or check a
// signature, and linking it cost every start of every process a library to
// map and 190 symbol lookups. (Wiping memory needs none of it: explicit_bzero.)
struct Sodium {
  decltype(&::sodium_bin2hex) bin2hex;
  decltype(&::sodium_hex2bin) hex2bin;
  decltype(&::randombytes_buf) random_bytes;
  decltype(&::crypto_sign_seed_keypair) seed_keypair;
  decltype(&::crypto_sign_detached) sign_detached;
  decltype(&::crypto_sign_verify_detached) verify_detached;
};

struct LoadedSodium {
  Sodium api{};
  std::optional<Error> failure;  // why it is unusable, reported on every use
};

LoadedSodium load_sodium() {
  LoadedSodium out;
  // The SONAME first; the unversioned name exists where development files are installed.
  void* handle = dlopen("libsodium.so.23", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) handle = dlopen("libsodium.so", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable,
                                   "package signatures need libsodium (libsodium.so.23): {}; install libsodium23",
                                   why ? why : "not found"));
    return out;
  }
  detail::SymbolBinder bind(handle);
  bind(out.api.bin2hex, "sodium_bin2hex");
  bind(out.api.hex2bin, "sodium_hex2bin");
  bind(out.api.random_bytes, "randombytes_buf");
  bind(out.api.seed_keypair, "crypto_sign_seed_keypair");
  bind(out.api.sign_detached, "crypto_sign_detached");
  bind(out.api.verify_detached, "crypto_sign_verify_detached");
  decltype(&::sodium_init) init = nullptr;
  bind(init, "sodium_init");
  if (bind.missing() != nullptr)
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable, "libsodium has no {}", bind.missing()));
  else if (init() < 0)
    out.failure.emplace(make_error(ErrorKind::Internal, "libsodium failed to initialise"));
  // The handle stays open for the process.
  return out;
}

const Sodium& sodium() {
  static const LoadedSodium loaded = load_sodium();
  if (loaded.failure) throw *loaded.failure;
  return loaded.api;
}

const unsigned char* uchars(const std::byte* p) { return reinterpret_cast<const unsigned char*>(p); }
unsigned char* uchars(std::byte* p) { return reinterpret_cast<unsigned char*>(p); }

std::string to_hex(std::span<const std::byte> bytes) {
  std::string out(2 * bytes.size() + 1, '\0');
  sodium().bin2hex(out.data(), out.size(), uchars(bytes.data()), bytes.size());
  out.pop_back();  // the terminating NUL
  return out;
}

// Wipes what it holds when it goes: secret bytes and the text they were read from.
template <typename T>
struct Wiped {
  T value{};
  Wiped() = default;
  explicit Wiped(T v) : value(std::move(v)) {}
  ~Wiped() { explicit_bzero(value.data(), value.size()); }
  Wiped(const Wiped&) = delete;
  Wiped& operator=(const Wiped&) = delete;
};

// Reads the 32 key bytes of the key file at `path`, whose first line must be
// `header`, into `out`; `status` receives the file's fstat().
void read_key_file(const fs::path& path, std::string_view header, std::string_view what, struct stat* status,
                   std::span<std::byte, 32> out) {
  const FileDescriptor fd = open_regular_file(path, what, status);
  auto fail = [&](const std::string& why) {
    return make_error(ErrorKind::Validation, "{}: not an svod {}: {}", path.string(), what, why);
  };
  if (static_cast<size_t>(status->st_size) > kMaxKeyFileBytes)
    throw fail(fmt::format("{} bytes (a key file has {} or so)", status->st_size, header.size() + 66));
  const Wiped<std::string> text(read_to_end(fd, path, what));
  const std::string_view all = text.value;
  const size_t eol = all.find('\n');
  const std::string_view first = all.substr(0, eol);
  if (first != header) {
    if (first == kPublicKeyHeader)
      throw fail("it is a public key file (NAME.pub); signing needs the secret key file (NAME.key)");
    if (first == kSecretKeyHeader)
      throw fail("it is a secret key file (NAME.key); only public key files (NAME.pub) are trusted, and a secret key "
                 "must not be handed around");
    throw fail(fmt::format("line 1 must be \"{}\"", header));
  }
  std::string_view key = eol == std::string_view::npos ? std::string_view() : all.substr(eol + 1);
  if (key.ends_with('\n')) key.remove_suffix(1);
  if (key.find('\n') != std::string_view::npos) throw fail("text after line 2 (a key file has two lines)");
  if (key.size() != 2 * out.size())
    throw fail(fmt::format("line 2 must be {} hexadecimal digits, not {} characters", 2 * out.size(), key.size()));
  for (size_t i = 0; i < key.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(key[i])))
      throw fail(fmt::format("line 2, column {}: not a hexadecimal digit", i + 1));
  // Every digit and the length are checked above, so the whole key decodes.
  sodium().hex2bin(uchars(out.data()), out.size(), key.data(), key.size(), nullptr, nullptr, nullptr);
}

// Creates `path`, which must not exist, with `text` and `mode` (O_EXCL: an
// existing file or link is never written through).
void write_new_file(const fs::path& path, std::string_view text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) throw make_error(ErrorKind::Io, "cannot create {}: {}", path.string(), std::strerror(errno));
  int error = 0;
  for (size_t done = 0; done < text.size() && error == 0;) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) done += static_cast<size_t>(n);
    else if (n == 0) error = EIO;
    else if (errno != EINTR) error = errno;
  }
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(path.c_str());
    throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), std::strerror(error));
  }
}

std::string key_text(std::string_view header, std::span<const std::byte> key) {
  return fmt::format("{}\n{}\n", header, to_hex(key));
}

PublicKey block_key(std::span<const std::byte> block) {
  PublicKey key;
  std::memcpy(key.bytes.data(), block.data() + kKeyField, key.bytes.size());
  return key;
}

std::string key_list(const std::vector<TrustedKey>& keys) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i)
    out += fmt::format("{}{} ({})", i ? ", " : "", keys[i].key.id(), keys[i].file.string());
  if (keys.size() > kShown) out += fmt::format(" and {} more", keys.size() - kShown);
  return out;
}

}  // namespace

std::string PublicKey::id() const { return to_hex(std::span(bytes).first(8)); }
std::string PublicKey::hex() const { return to_hex(bytes); }

SecretKey::SecretKey(std::span<const std::byte, 32> seed) {
  sodium().seed_keypair(uchars(public_.bytes.data()), uchars(expanded_.data()), uchars(seed.data()));
}

SecretKey::SecretKey(SecretKey&& other) noexcept : expanded_(other.expanded_), public_(other.public_) {
  explicit_bzero(other.expanded_.data(), other.expanded_.size());
}

SecretKey::~SecretKey() { explicit_bzero(expanded_.data(), expanded_.size()); }

PublicKey generate_key_pair(const fs::path& name) {
  // NAME is a file name: "/", "keys/" or "." would make hidden files ".key"
  // and ".pub" inside a folder.
  const fs::path last = name.filename();
  if (last.empty() || last == "." || last == "..")
    throw make_error(ErrorKind::Validation,
                     "key pair name \"{}\" names a folder; give a file name without its extension "
                     "(keys/release makes keys/release.key and keys/release.pub)",
                     name.string());
  const Sodium& api = sodium();
  fs::path secret_path = name, public_path = name;
  secret_path += ".key";
  public_path += ".pub";
  // Check both first, so that an existing .pub does not leave a new .key behind.
  for (const auto& path : {secret_path, public_path}) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(path, ec)))
      throw make_error(ErrorKind::Io, "{} exists; svod never overwrites a key file (choose another name)",
                       path.string());
  }
  Wiped<std::array<std::byte, 32>> seed;
  api.random_bytes(seed.value.data(), seed.value.size());
  const SecretKey key(seed.value);
  // Created private: the secret is never readable by others, not even for a moment.
  write_new_file(secret_path, Wiped<std::string>(key_text(kSecretKeyHeader, seed.value)).value, 0600);
  try {
    write_new_file(public_path, key_text(kPublicKeyHeader, key.public_key().bytes), 0644);
  } catch (...) {
    ::unlink(secret_path.c_str());
    throw;
  }
  return key.public_key();
}

PublicKey read_public_key(const fs::path& path) {
  struct stat status {};
  PublicKey key;
  read_key_file(path, kPublicKeyHeader, "public key file", &status, key.bytes);
  return key;
}

SecretKey read_secret_key(const fs::path& path) {
  struct stat status {};
  Wiped<std::array<std::byte, 32>> seed;
  read_key_file(path, kSecretKeyHeader, "secret key file", &status, seed.value);
  // As ssh does: a secret that others can read is no longer only its owner's.
  if ((status.st_mode & 077) != 0)
    throw make_error(ErrorKind::Validation,
                     "{}: the secret key file may be read by others (mode {:04o}); make it private with chmod 600 {}",
                     path.string(), status.st_mode & 07777, path.string());
  return SecretKey(seed.value);
}

std::vector<std::byte> sign_package(std::vector<std::byte> package, const SecretKey& key) {
  {
    const PackageReader reader(package, "the package to sign");
    if (!reader.signature_block().empty())
      throw make_error(ErrorKind::Validation, "the package to sign is signed already (by key {})",
                       block_key(reader.signature_block()).id());
  }
  const size_t at = package.size();
  package.resize(at + kSignatureBlockSize);
  std::byte* block = package.data() + at;
  std::memcpy(block, kSignatureMagic, sizeof kSignatureMagic);
  std::memcpy(block + 8, &kSignatureVersion, 4);
  std::memcpy(block + kKeyField, key.public_key().bytes.data(), key.public_key().bytes.size());
  sodium().sign_detached(uchars(block + kSignatureField), nullptr, uchars(package.data()), at + kSignatureField,
                       uchars(key.expanded().data()));
  return package;
}

std::optional<std::vector<TrustedKey>> trusted_keys() {
  const std::optional<std::string> value = env_string(EnvVar::TrustedKeys);
  if (!value) return std::nullopt;
  std::vector<TrustedKey> keys;
  auto add = [&](const fs::path& file) {
    try {
      keys.push_back(TrustedKey{read_public_key(file), file});
    } catch (const Error& e) {
      throw make_error(e.kind(), "SVOD_TRUSTED_KEYS: {}", e.what());
    }
  };
  for (size_t begin = 0; begin <= value->size();) {
    const size_t end = std::min(value->find(':', begin), value->size());
    const fs::path entry = value->substr(begin, end - begin);
    begin = end + 1;
    if (entry.empty()) continue;
    std::error_code ec;
    if (!fs::is_directory(entry, ec)) {
      add(entry);
      continue;
    }
    std::vector<fs::path> files;
    for (fs::directory_iterator it(entry, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().extension() == ".pub") files.push_back(it->path());
    if (ec)
      throw make_error(ErrorKind::Io, "SVOD_TRUSTED_KEYS: {}: cannot list the folder: {}", entry.string(),
                       ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) add(file);
  }
  if (keys.empty())
    throw make_error(ErrorKind::Validation,
                     "SVOD_TRUSTED_KEYS=\"{}\" names no public key: give .pub files or folders holding them, "
                     "separated by ':'",
                     *value);
  return keys;
}

std::optional<PublicKey> check_package_signature(const PackageReader& reader) {
  const auto block = reader.signature_block();
  std::optional<PublicKey> signer;
  if (!block.empty()) {
    uint32_t version = 0, reserved = 0;
    std::memcpy(&version, block.data() + 8, 4);
    std::memcpy(&reserved, block.data() + 12, 4);
    if (version != kSignatureVersion)
      throw make_error(ErrorKind::Load, "{}: signature block: version {}; this svod reads version {}", reader.source(),
                       version, kSignatureVersion);
    if (reserved != 0)
      throw make_error(ErrorKind::Load, "{}: signature block: reserved bytes are not zero", reader.source());
    signer = block_key(block);
  }
  // The policy first: an untrusted package is refused without reading it through.
  if (const auto trusted = trusted_keys()) {
    if (!signer)
      throw make_error(ErrorKind::Validation,
                       "{}: the package is unsigned, and SVOD_TRUSTED_KEYS admits only packages signed by {}",
                       reader.source(), key_list(*trusted));
    const bool known =
        std::any_of(trusted->begin(), trusted->end(), [&](const TrustedKey& k) { return k.key == *signer; });
    if (!known)
      throw make_error(ErrorKind::Validation,
                       "{}: the package is signed by key {}, which SVOD_TRUSTED_KEYS does not trust (it trusts {})",
                       reader.source(), signer->id(), key_list(*trusted));
  }
  if (signer) {
    const auto bytes = reader.bytes();
    if (sodium().verify_detached(uchars(block.data() + kSignatureField), uchars(bytes.data()),
                                    bytes.size() - crypto_sign_BYTES, uchars(signer->bytes.data())) != 0)
      throw make_error(ErrorKind::Validation,
                       "{}: the signature by key {} does not match the package: it was changed after it was signed, "
                       "or the signature is forged",
                       reader.source(), signer->id());
  }
  return signer;
}

}  // namespace svod
