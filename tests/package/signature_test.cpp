// Signed packages (svod/package/signature.h): signing and loading, the
// SVOD_TRUSTED_KEYS policy, damage anywhere in a signed package, and key files.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include "svod/base/cpu_features.h"
#include "svod/package/package.h"
#include "svod/package/signature.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::expect_error;
using test::ScopedEnv;
using test::TempDir;

const std::filesystem::path kMlp = std::filesystem::path(SVOD_SOURCE_DIR) / "examples/mlp/plan.json";

// The mlp package, packed once for the whole binary (packing compiles).
const std::vector<std::byte>& mlp_package() {
  static const std::vector<std::byte> bytes = pack_plan(kMlp);
  return bytes;
}

std::vector<std::byte> small_package() {
  PackageWriter writer;
  writer.add("a", std::string_view("first section"));
  writer.add("c", std::string(100, 'x'));
  return writer.finish();
}

// Two key pairs, alice and bob, in a folder of their own.
struct Keys {
  TempDir dir;
  PublicKey alice = generate_key_pair(dir / "alice");
  PublicKey bob = generate_key_pair(dir / "bob");
  std::filesystem::path pub(std::string_view name) const { return dir / (std::string(name) + ".pub"); }
  SecretKey secret(std::string_view name) const { return read_secret_key(dir / (std::string(name) + ".key")); }
};

// The bytes of the package's first output after one execution.
std::vector<std::byte> first_output(LoadedPackage& package) {
  package.loaded.execute();
  const Buffer& b = package.loaded.plan.buffer(package.loaded.outputs.at(0).slot);
  const auto* p = static_cast<const std::byte*>(b.data());
  return {p, p + b.bytes()};
}

std::string message_of(const Error& e) { return e.what(); }

// check_package_signature on bytes, as load_package calls it.
void check(std::span<const std::byte> bytes) { check_package_signature(PackageReader(bytes, "pkg")); }

TEST(PackageSignature, SignedPackagesLoadFromMemoryAndFromAFile) {
  Keys keys;
  ScopedEnv unset("SVOD_TRUSTED_KEYS", std::nullopt);
  const auto unsigned_bytes = mlp_package();
  LoadedPackage plain = load_package(std::span<const std::byte>(unsigned_bytes));
  EXPECT_FALSE(plain.signer);
  const auto expected = first_output(plain);

  const auto bytes = sign_package(mlp_package(), keys.secret("alice"));
  ASSERT_EQ(bytes.size(), unsigned_bytes.size() + kSignatureBlockSize);
  // The package inside is unchanged: the block only follows it.
  EXPECT_TRUE(std::equal(unsigned_bytes.begin(), unsigned_bytes.end(), bytes.begin()));
  LoadedPackage from_memory = load_package(std::span<const std::byte>(bytes));
  ASSERT_TRUE(from_memory.signer);
  EXPECT_EQ(*from_memory.signer, keys.alice);
  EXPECT_EQ(first_output(from_memory), expected);

  const auto file = keys.dir / "signed.svodpkg";
  write_package(file, bytes);
  // Trusted by file, by folder, and by a list with an empty entry and another key.
  const std::string both = keys.pub("bob").string() + "::" + keys.pub("alice").string();
  for (const std::string& trust : {keys.pub("alice").string(), keys.dir.path().string(), both}) {
    ScopedEnv set("SVOD_TRUSTED_KEYS", trust);
    LoadedPackage from_file = load_package(file);
    ASSERT_TRUE(from_file.signer) << trust;
    EXPECT_EQ(*from_file.signer, keys.alice) << trust;
    EXPECT_EQ(first_output(from_file), expected) << trust;
  }
}

TEST(PackageSignature, TrustedKeysRefuseUnsignedPackagesAndOtherKeys) {
  Keys keys;
  ScopedEnv set("SVOD_TRUSTED_KEYS", keys.pub("alice").string());
  const auto by_bob = sign_package(mlp_package(), keys.secret("bob"));

  Error e = expect_error([&] { load_package(std::span<const std::byte>(mlp_package())); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(message_of(e).find("package in memory: the package is unsigned"), std::string::npos) << e.what();
  EXPECT_NE(message_of(e).find(keys.alice.id()), std::string::npos) << e.what();

  const auto file = keys.dir / "bob.svodpkg";
  write_package(file, by_bob);
  e = expect_error([&] { load_package(file); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(message_of(e).find(file.string() + ": the package is signed by key " + keys.bob.id() +
                               ", which SVOD_TRUSTED_KEYS does not trust"),
            std::string::npos)
      << e.what();

  // Unset, both load: an unsigned package, and a signature that holds by any key.
  ScopedEnv unset("SVOD_TRUSTED_KEYS", std::nullopt);
  EXPECT_FALSE(load_package(std::span<const std::byte>(mlp_package())).signer);
  EXPECT_EQ(load_package(file).signer, keys.bob);
}

TEST(PackageSignature, EveryChangedByteOfASignedPackageIsRefused) {
  Keys keys;
  const auto good = sign_package(small_package(), keys.secret("alice"));
  for (const bool trusted : {false, true}) {
    ScopedEnv env("SVOD_TRUSTED_KEYS", trusted ? std::optional(keys.pub("alice").string()) : std::nullopt);
    check(good);
    for (size_t i = 0; i < good.size(); ++i) {
      auto bad = good;
      bad[i] ^= std::byte{0x01};
      const Error e = expect_error([&] { check(bad); });
      EXPECT_TRUE(e.kind() == ErrorKind::Load || e.kind() == ErrorKind::Validation) << i << ": " << e.what();
      // A changed signature or signed block field is the signature's to refuse.
      if (i >= good.size() - kSignatureBlockSize + 16 && !trusted)
        EXPECT_NE(message_of(e).find("does not match the package"), std::string::npos) << i << ": " << e.what();
    }
  }
}

TEST(PackageSignature, ChangesSampledAcrossTheMlpPackageAreRefused) {
  Keys keys;
  ScopedEnv set("SVOD_TRUSTED_KEYS", keys.pub("alice").string());
  const auto good = sign_package(mlp_package(), keys.secret("alice"));
  EXPECT_TRUE(load_package(std::span<const std::byte>(good)).signer);
  // About 250 offsets across the package (most changes there also break a
  // digest), then every byte of the signature block (only the signature can tell).
  std::vector<size_t> offsets;
  for (size_t i = 3; i < good.size() - kSignatureBlockSize; i += good.size() / 251 + 1) offsets.push_back(i);
  for (size_t i = good.size() - kSignatureBlockSize; i < good.size(); ++i) offsets.push_back(i);
  for (const size_t i : offsets) {
    auto bad = good;
    bad[i] ^= std::byte{0x80};
    const Error e = expect_error([&] { load_package(std::span<const std::byte>(bad)); });
    EXPECT_TRUE(e.kind() == ErrorKind::Load || e.kind() == ErrorKind::Validation) << i << ": " << e.what();
  }
}

TEST(PackageSignature, AForgeryWithCorrectDigestsIsRefusedBySignature) {
  // Change a section and rewrite every digest, as an attacker would, keeping
  // the original signature block: only the signature can tell.
  Keys keys;
  const auto good = sign_package(mlp_package(), keys.secret("alice"));
  const PackageReader reader(good, "good");
  PackageWriter writer;
  for (const auto& s : reader.sections()) {
    std::vector<std::byte> data(s.bytes.begin(), s.bytes.end());
    if (s.name == init_section("x")) data[0] ^= std::byte{0x01};
    writer.add(s.name, std::move(data));
  }
  auto forged = writer.finish();
  ASSERT_EQ(forged.size(), good.size() - kSignatureBlockSize);
  forged.insert(forged.end(), reader.signature_block().begin(), reader.signature_block().end());
  for (const bool trusted : {false, true}) {
    ScopedEnv env("SVOD_TRUSTED_KEYS", trusted ? std::optional(keys.pub("alice").string()) : std::nullopt);
    const Error e = expect_error([&] { load_package(std::span<const std::byte>(forged)); });
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(message_of(e).find("the signature by key " + keys.alice.id() + " does not match the package"),
              std::string::npos)
        << e.what();
  }
}

// The CPU a package's objects are for is in its signed manifest: a package
// packed for another CPU and signed loads (its signature holds, and loading
// then decides about its objects), and the same package with its CPU record
// rewritten to this machine's, digests redone, is refused by the signature.
TEST(PackageSignature, TheTargetCpuIsSigned) {
  Keys keys;
  ScopedEnv unset("SVOD_TRUSTED_KEYS", std::nullopt);
  PackOptions v2;
  v2.target_cpu = "x86-64-v2";
  if (host_arch() != "x86_64") GTEST_SKIP() << "an x86-64 CPU name";
  const auto good = sign_package(pack_plan(kMlp, v2), keys.secret("alice"));
  LoadedPackage loaded = load_package(std::span<const std::byte>(good));
  EXPECT_EQ(loaded.signer, keys.alice);
  EXPECT_EQ(loaded.manifest.cpu->target_cpu, "x86-64-v2");

  const PackageReader reader(good, "good");
  PackageWriter writer;
  for (const auto& s : reader.sections()) {
    std::string text(reinterpret_cast<const char*>(s.bytes.data()), s.bytes.size());
    if (s.name == kManifestSection) text.replace(text.find("x86-64-v2\""), 10, "x86-64-v4\"");
    writer.add(s.name, std::string_view(text));
  }
  auto forged = writer.finish();
  forged.insert(forged.end(), reader.signature_block().begin(), reader.signature_block().end());
  const Error e = expect_error([&] { load_package(std::span<const std::byte>(forged)); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(message_of(e).find("does not match the package"), std::string::npos) << e.what();
}

TEST(PackageSignature, TruncatedSignaturesAreRefused) {
  Keys keys;
  const auto good = sign_package(small_package(), keys.secret("alice"));
  for (size_t cut = 1; cut < kSignatureBlockSize; ++cut) {
    const auto bytes = std::span(good).first(good.size() - cut);
    const Error e = expect_error([&] { check(bytes); });
    EXPECT_EQ(e.kind(), ErrorKind::Load) << cut << ": " << e.what();
    if (kSignatureBlockSize - cut >= 8)
      EXPECT_NE(message_of(e).find("signature block: " + std::to_string(kSignatureBlockSize - cut) + " bytes"),
                std::string::npos)
          << e.what();
  }
  // Without its whole block the package is unsigned: fine unless keys are required.
  const auto stripped = std::span(good).first(good.size() - kSignatureBlockSize);
  check(stripped);
  ScopedEnv set("SVOD_TRUSTED_KEYS", keys.pub("alice").string());
  EXPECT_NE(message_of(expect_error([&] { check(stripped); })).find("unsigned"), std::string::npos);
}

TEST(PackageSignature, MalformedSignatureBlocksAreLoadErrors) {
  Keys keys;
  auto bytes = sign_package(small_package(), keys.secret("alice"));
  const size_t block = bytes.size() - kSignatureBlockSize;
  auto version = bytes;
  version[block + 8] = std::byte{2};
  Error e = expect_error([&] { check(version); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_NE(message_of(e).find("pkg: signature block: version 2"), std::string::npos) << e.what();
  auto reserved = bytes;
  reserved[block + 13] = std::byte{1};
  e = expect_error([&] { check(reserved); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_NE(message_of(e).find("reserved"), std::string::npos) << e.what();
  // Signing twice is refused; a block after anything but a package too.
  EXPECT_NE(message_of(expect_error([&] { sign_package(bytes, keys.secret("bob")); })).find("signed already"),
            std::string::npos);
  EXPECT_EQ(expect_error([&] { sign_package({}, keys.secret("bob")); }).kind(), ErrorKind::Validation);
}

TEST(PackageSignature, KeyFilesRoundTripAndAreCreatedPrivate) {
  Keys keys;
  const SecretKey alice = keys.secret("alice");
  EXPECT_EQ(alice.public_key(), keys.alice);
  EXPECT_EQ(read_public_key(keys.pub("alice")), keys.alice);
  EXPECT_NE(keys.alice, keys.bob);
  EXPECT_EQ(keys.alice.id(), keys.alice.hex().substr(0, 16));

  struct stat st {};
  ASSERT_EQ(::stat((keys.dir / "alice.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(keys.pub("alice"));
  std::string header, hex, rest;
  std::getline(in, header);
  std::getline(in, hex);
  EXPECT_EQ(header, kPublicKeyHeader);
  EXPECT_EQ(hex, keys.alice.hex());
  EXPECT_FALSE(std::getline(in, rest));

  // A secret others can read is refused; never overwritten by a new pair.
  const auto secret = keys.dir / "alice.key";
  for (const mode_t mode : {0640, 0604, 0660}) {
    ASSERT_EQ(::chmod(secret.c_str(), mode), 0);
    const Error e = expect_error([&] { read_secret_key(secret); });
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(message_of(e).find(fmt::format("may be read by others (mode {:04o})", mode)), std::string::npos)
        << e.what();
  }
  ASSERT_EQ(::chmod(secret.c_str(), 0400), 0);
  EXPECT_EQ(read_secret_key(secret).public_key(), keys.alice);
  const Error e = expect_error([&] { generate_key_pair(keys.dir / "alice"); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(message_of(e).find("never overwrites"), std::string::npos) << e.what();
  EXPECT_EQ(read_secret_key(secret).public_key(), keys.alice);
}

TEST(PackageSignature, MalformedKeyFilesSayWhatIsWrong) {
  Keys keys;
  const std::string hex(64, 'a');
  auto private_file = [&](const std::string& name, const std::string& text) {
    const auto path = keys.dir.write(name, text);
    ::chmod(path.c_str(), 0600);
    return path;
  };
  struct Case {
    std::string text;
    std::string says;
  };
  const std::string pub_header(kPublicKeyHeader), key_header(kSecretKeyHeader);
  for (const Case& c : std::vector<Case>{
           {"", "line 1 must be \"svod ed25519 public key\""},
           {"ssh-ed25519 AAAA\n", "line 1 must be"},
           {pub_header + "\n", "line 2 must be 64 hexadecimal digits, not 0 characters"},
           {pub_header + "\n" + hex.substr(1) + "\n", "not 63 characters"},
           {pub_header + "\n" + hex + "0\n", "not 65 characters"},
           {pub_header + "\n" + hex.substr(0, 10) + "g" + hex.substr(11) + "\n", "line 2, column 11: not a hex"},
           {pub_header + "\n" + hex + "\n\n", "text after line 2"},
           {pub_header + "\r\n" + hex + "\n", "line 1 must be"},
           {key_header + "\n" + hex + "\n", "it is a secret key file (NAME.key)"},
           {pub_header + "\n" + std::string(2000, 'a'), "2024 bytes"}}) {
    const auto path = private_file("bad.pub", c.text);
    const Error e = expect_error([&] { read_public_key(path); });
    EXPECT_EQ(e.kind(), ErrorKind::Validation) << c.text;
    EXPECT_NE(message_of(e).find(path.string() + ": not an svod public key file: "), std::string::npos) << e.what();
    EXPECT_NE(message_of(e).find(c.says), std::string::npos) << c.text << " -> " << e.what();
  }
  Error e = expect_error([&] { read_secret_key(keys.pub("alice")); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(message_of(e).find("it is a public key file (NAME.pub); signing needs the secret key file"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(expect_error([&] { read_public_key(keys.dir / "missing.pub"); }).kind(), ErrorKind::Io);
  EXPECT_EQ(expect_error([&] { read_public_key(keys.dir.path()); }).kind(), ErrorKind::Io);
  // Uppercase hex is accepted, and a missing final newline.
  const auto upper = private_file("upper.pub", pub_header + "\n" + std::string(64, 'A'));
  EXPECT_EQ(read_public_key(upper).hex(), std::string(64, 'a'));
}

TEST(PackageSignature, TrustedKeysThatNameNoKeyOrABadOneAreErrors) {
  Keys keys;
  const auto package = sign_package(small_package(), keys.secret("alice"));
  TempDir empty;
  const auto bad = keys.dir.write("sub/bad.pub", "not a key\n");
  struct Case {
    std::string value;
    ErrorKind kind;
    std::string says;
  };
  const std::string missing = (keys.dir / "missing.pub").string();
  for (const Case& c : std::vector<Case>{
           {empty.path().string(), ErrorKind::Validation, "names no public key"},
           {":", ErrorKind::Validation, "names no public key"},
           {missing, ErrorKind::Io, "SVOD_TRUSTED_KEYS: " + missing + ": cannot open the public key file"},
           {(keys.dir / "alice.key").string(), ErrorKind::Validation, "it is a secret key file"},
           {bad.parent_path().string(), ErrorKind::Validation, "SVOD_TRUSTED_KEYS: " + bad.string()}}) {
    ScopedEnv set("SVOD_TRUSTED_KEYS", c.value);
    const Error e = expect_error([&] { check(package); });
    EXPECT_EQ(e.kind(), c.kind) << c.value << ": " << e.what();
    EXPECT_NE(message_of(e).find(c.says), std::string::npos) << c.value << ": " << e.what();
  }
  // Only *.pub files of a folder count: the secret keys beside them are ignored.
  ScopedEnv set("SVOD_TRUSTED_KEYS", keys.dir.path().string());
  const auto trusted = trusted_keys();
  ASSERT_TRUE(trusted);
  ASSERT_EQ(trusted->size(), 2u);
  EXPECT_EQ(trusted->at(0).key, keys.alice);
  EXPECT_EQ(trusted->at(1).key, keys.bob);
}

}  // namespace
}  // namespace svod
