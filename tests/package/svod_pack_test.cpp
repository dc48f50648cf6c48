// `svod pack` and `svod run MODEL.svodpkg` as a user runs them: the real
// binary, SVOD_COMPILE=0 and SVOD_DEBUG set in the child's environment.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <fstream>

#include <fmt/ranges.h>

#include "svod/base/error.h"
#include "svod/base/file_read.h"
#include "svod/base/npy.h"
#include "svod/base/subprocess.h"
#include "svod/registry/registry.h"
#include "svod/base/cpu_features.h"
#include "svod/package/package.h"
#include "svod/package/signature.h"
#include "tests/package/package_test_support.h"
#include "tests/support/temp_dir.h"

namespace svod {
namespace {

using test::TempDir;

const std::string kCli = SVOD_BINARY_DIR "/svod";
const std::string kMlp = SVOD_SOURCE_DIR "/examples/mlp/plan.json";

// Runs the svod binary with `env` (NAME=VALUE entries) added to its environment.
ProcessResult svod(std::vector<std::string> env, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.push_back(kCli);
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, "", std::chrono::seconds(300));
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvodPack, PackageRunsWithCompilingOffAndThePlanDoesNot) {
  TempDir dir;
  const std::string package = (dir / "mlp.svodpkg").string();
  const ProcessResult packed = svod({}, {"pack", kMlp, "-o", package});
  ASSERT_TRUE(packed.ok()) << packed.err;
  EXPECT_NE(packed.out.find("4 as CPU objects"), std::string::npos) << packed.out;

  const ProcessResult run = svod({"SVOD_COMPILE=0", "SVOD_CACHE=0"}, {"run", package});
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_EQ(count(run.out, "expect: ok"), 2u) << run.out;

  // No toolchain at all: no clang (SVOD_CLANG names none) and no llvm plugin.
  const std::vector<std::string> no_toolchain = {"SVOD_CLANG=/nonexistent/clang", "SVOD_LLVM_PLUGIN=/nonexistent.so",
                                                 "SVOD_CACHE=0"};
  const ProcessResult bare = svod(no_toolchain, {"run", package});
  ASSERT_TRUE(bare.ok()) << bare.err;
  EXPECT_EQ(count(bare.out, "expect: ok"), 2u) << bare.out;

  const ProcessResult malformed = svod({"SVOD_COMPILE=maybe"}, {"run", package});
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_NE(malformed.err.find("error (validation): SVOD_COMPILE=\"maybe\""), std::string::npos) << malformed.err;

  const ProcessResult plan = svod({"SVOD_COMPILE=0", "SVOD_CACHE=0"}, {"run", kMlp});
  EXPECT_EQ(plan.exit_code, 2);
  EXPECT_NE(plan.err.find("error (unsupported)"), std::string::npos) << plan.err;
  EXPECT_NE(plan.err.find("programs.layer1"), std::string::npos) << plan.err;
  EXPECT_NE(plan.err.find("compiling is off"), std::string::npos) << plan.err;
}

TEST(SvodPack, CrossDevicePackageRunsWithCompilingOff) {
  try {
    open_device("CL:0");
  } catch (const Error& e) {
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  TempDir dir;
  const std::string package = (dir / "cross_device.svodpkg").string();
  const ProcessResult packed = svod({}, {"pack", SVOD_SOURCE_DIR "/examples/cross_device/plan.json", "-o", package});
  ASSERT_TRUE(packed.ok()) << packed.err;
  EXPECT_NE(packed.out.find("3 as CPU objects"), std::string::npos) << packed.out;
  EXPECT_NE(packed.out.find("2 as device binaries for CL:0"), std::string::npos) << packed.out;
  const ProcessResult run = svod({"SVOD_COMPILE=0", "SVOD_CACHE=0"}, {"run", package});
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_EQ(count(run.out, "expect: ok"), 3u) << run.out;
}

TEST(SvodPack, InfoShowsThePolicyAndTheCheckedFeatures) {
  const ProcessResult on = svod({}, {"info"});
  ASSERT_TRUE(on.ok()) << on.err;
  EXPECT_NE(on.out.find("compiling: allowed"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find(fmt::format("cpu features: {} checked", known_cpu_features().size())), std::string::npos)
      << on.out;
  const ProcessResult off = svod({"SVOD_COMPILE=0"}, {"info"});
  ASSERT_TRUE(off.ok()) << off.err;
  EXPECT_NE(off.out.find("compiling: off (SVOD_COMPILE=0)"), std::string::npos) << off.out;
}

TEST(SvodPack, DamagedPackagesAndBadPlansExitTwo) {
  TempDir dir;
  const auto package = dir / "mlp.svodpkg";
  ASSERT_TRUE(svod({}, {"pack", kMlp, "-o", package.string()}).ok());
  std::string bytes;
  {
    std::ifstream in(package, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x40;
  std::ofstream(package, std::ios::binary | std::ios::trunc) << bytes;
  const ProcessResult run = svod({}, {"run", package.string()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("error (load)"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("digest mismatch"), std::string::npos) << run.err;

  const auto plan = dir.write("bad.json", R"({"svod_plan": 1, "buffers": {"x": {"dtype": "f99", "count": 1}}})");
  const ProcessResult bad = svod({}, {"pack", plan.string(), "-o", (dir / "bad.svodpkg").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("svod pack: error (validation)"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.svodpkg"));
}

// -o naming an input (the plan, the signing key; or a link to one) is refused
// before anything is written: it used to overwrite it (issue 35).
TEST(SvodPack, ThePackageIsNeverWrittenOverItsInputs) {
  TempDir dir;
  const std::string plan = (dir / "plan.json").string();
  std::filesystem::copy_file(kMlp, plan);
  const std::string key = (dir / "a").string();
  ASSERT_TRUE(svod({}, {"pack", "--keygen", key}).ok());
  std::filesystem::create_symlink(key + ".key", dir / "link.key");
  auto contents = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string plan_before = contents(plan), key_before = contents(key + ".key");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"pack", plan, "-o", plan}, "that is the plan being packed"},
      {{"pack", plan, "-o", (dir / "." / "plan.json").string()}, "that is the plan being packed"},
      {{"pack", plan, "-o", key + ".key", "--sign", key + ".key"}, "that is the secret key given to --sign"},
      {{"pack", plan, "-o", (dir / "link.key").string(), "--sign", key + ".key"},
       "that is the secret key given to --sign"},
  };
  for (const auto& [args, why] : cases) {
    const ProcessResult r = svod({}, args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
  EXPECT_EQ(contents(plan), plan_before);
  EXPECT_EQ(contents(key + ".key"), key_before);
}

TEST(SvodPack, ForeignCpuPackageIsRecompiledWithANote) {
  const std::string lacking = test::feature_this_cpu_lacks();
  if (lacking.empty()) GTEST_SKIP() << "this CPU has every feature the check knows";
  TempDir dir;
  const auto package = dir / "foreign.svodpkg";
  write_package(package, test::with_manifest(pack_plan(kMlp), [&](nlohmann::json& m) {
                  m["cpu"]["target_features"].push_back("+" + lacking);
                }));

  const ProcessResult refused = svod({"SVOD_COMPILE=0"}, {"run", package.string()});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("they need " + lacking + ", which this CPU lacks"), std::string::npos) << refused.err;

  const ProcessResult run = svod({"SVOD_DEBUG=1", "SVOD_CACHE=0"}, {"run", package.string()});
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_EQ(count(run.out, "expect: ok"), 2u) << run.out;
  EXPECT_NE(run.err.find("compiling from the packaged source"), std::string::npos) << run.err;
}

// `svod pack --target-cpu` builds objects for another CPU, `svod info`
// says what they need and what this CPU lacks, and `svod run
// --on-cpu-mismatch refuse` fails naming it where the default recompiles;
// `--sources-only` packs no object and runs wherever it compiles.
TEST(SvodPack, PackagesForAnotherCpuAndSourcesOnly) {
  if (host_arch() != "x86_64") GTEST_SKIP() << "an x86-64 CPU name";
  TempDir dir;
  const std::string package = (dir / "spr.svodpkg").string();
  const ProcessResult packed = svod({}, {"pack", kMlp, "-o", package, "--target-cpu", "sapphirerapids"});
  ASSERT_TRUE(packed.ok()) << packed.err;
  EXPECT_NE(packed.out.find("4 as CPU objects for x86_64-pc-linux-gnu cpu sapphirerapids"), std::string::npos)
      << packed.out;
  const ProcessResult info = svod({}, {"info", package});
  ASSERT_TRUE(info.ok()) << info.err;
  EXPECT_NE(info.out.find("cpu sapphirerapids"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("  they need: "), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("amx-tile"), std::string::npos) << info.out;

  const std::string bytes = read_regular_file(package, "package");
  const PackageManifest m =
      read_manifest(PackageReader(std::as_bytes(std::span(bytes)), package).text(kManifestSection), package);
  const std::vector<std::string> lacking = missing_cpu_features(m.cpu->target_features);
  if (lacking.empty()) GTEST_SKIP() << "this CPU has every feature of sapphirerapids that svod checks";
  EXPECT_NE(info.out.find(fmt::format("this CPU lacks {}", fmt::join(lacking, ", "))), std::string::npos) << info.out;
  const ProcessResult refused = svod({}, {"run", package, "--on-cpu-mismatch", "refuse"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find(fmt::format("they need {}, which this CPU lacks", fmt::join(lacking, ", "))),
            std::string::npos)
      << refused.err;
  const ProcessResult recompiled = svod({"SVOD_CACHE=0"}, {"run", package});
  ASSERT_TRUE(recompiled.ok()) << recompiled.err;
  EXPECT_EQ(count(recompiled.out, "expect: ok"), 2u) << recompiled.out;
  EXPECT_EQ(svod({}, {"run", package, "--on-cpu-mismatch", "sometimes"}).exit_code, 2);

  const std::string sources = (dir / "sources.svodpkg").string();
  const ProcessResult packed_sources = svod({}, {"pack", kMlp, "-o", sources, "--sources-only"});
  ASSERT_TRUE(packed_sources.ok()) << packed_sources.err;
  EXPECT_NE(packed_sources.out.find("4 as source only"), std::string::npos) << packed_sources.out;
  const ProcessResult ran = svod({"SVOD_CACHE=0"}, {"run", sources, "--on-cpu-mismatch", "refuse"});
  ASSERT_TRUE(ran.ok()) << ran.err;
  EXPECT_EQ(count(ran.out, "expect: ok"), 2u) << ran.out;
  EXPECT_EQ(svod({"SVOD_COMPILE=0", "SVOD_CACHE=0"}, {"run", sources}).exit_code, 2);
}

TEST(SvodPack, SignedPackagesAndTrustedKeys) {
  TempDir dir;
  const std::string alice = (dir / "alice").string(), bob = (dir / "bob").string();
  for (const auto& name : {alice, bob}) {
    const ProcessResult keygen = svod({}, {"pack", "--keygen", name});
    ASSERT_TRUE(keygen.ok()) << keygen.err;
    EXPECT_NE(keygen.out.find("key id " + read_public_key(name + ".pub").id()), std::string::npos) << keygen.out;
  }
  struct stat st {};
  ASSERT_EQ(::stat((alice + ".key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const ProcessResult again = svod({}, {"pack", "--keygen", alice});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("never overwrites a key file"), std::string::npos) << again.err;
  // A folder is no key name: "/" used to write /.key and /.pub.
  for (const std::string& folder : {std::string("/"), dir.path().string() + "/", dir.path().string() + "/."}) {
    const ProcessResult into_folder = svod({}, {"pack", "--keygen", folder});
    EXPECT_EQ(into_folder.exit_code, 2) << folder;
    EXPECT_NE(into_folder.err.find("names a folder; give a file name without its extension"), std::string::npos)
        << into_folder.err;
  }
  EXPECT_FALSE(std::filesystem::exists("/.key"));
  EXPECT_FALSE(std::filesystem::exists(dir / ".key"));

  const std::string signed_package = (dir / "signed.svodpkg").string();
  const ProcessResult packed = svod({}, {"pack", kMlp, "-o", signed_package, "--sign", alice + ".key"});
  ASSERT_TRUE(packed.ok()) << packed.err;
  EXPECT_NE(packed.out.find("signed by key " + read_public_key(alice + ".pub").id()), std::string::npos) << packed.out;
  const std::string unsigned_package = (dir / "unsigned.svodpkg").string();
  ASSERT_TRUE(svod({}, {"pack", kMlp, "-o", unsigned_package}).ok());

  // Unset: both run. Set: only the package signed by a trusted key.
  for (const auto& package : {signed_package, unsigned_package}) {
    const ProcessResult run = svod({}, {"run", package});
    ASSERT_TRUE(run.ok()) << package << ": " << run.err;
    EXPECT_EQ(count(run.out, "expect: ok"), 2u) << run.out;
  }
  const ProcessResult trusted = svod({"SVOD_TRUSTED_KEYS=" + alice + ".pub"}, {"run", signed_package});
  ASSERT_TRUE(trusted.ok()) << trusted.err;
  EXPECT_EQ(count(trusted.out, "expect: ok"), 2u) << trusted.out;
  const ProcessResult other = svod({"SVOD_TRUSTED_KEYS=" + bob + ".pub"}, {"run", signed_package});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("error (validation): " + signed_package + ": the package is signed by key"),
            std::string::npos)
      << other.err;
  const ProcessResult plain = svod({"SVOD_TRUSTED_KEYS=" + dir.path().string()}, {"run", unsigned_package});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_NE(plain.err.find(unsigned_package + ": the package is unsigned"), std::string::npos) << plain.err;

  // Bad keys and missing arguments are errors that say so.
  const ProcessResult with_pub = svod({}, {"pack", kMlp, "-o", (dir / "x.svodpkg").string(), "--sign", alice + ".pub"});
  EXPECT_EQ(with_pub.exit_code, 2);
  EXPECT_NE(with_pub.err.find("svod pack: error (validation): " + alice + ".pub: not an svod secret key file: it is a "
                              "public key file"),
            std::string::npos)
      << with_pub.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.svodpkg"));
  const ProcessResult no_out = svod({}, {"pack", kMlp});
  EXPECT_EQ(no_out.exit_code, 2);
  EXPECT_NE(no_out.err.find("-o MODEL.svodpkg"), std::string::npos) << no_out.err;
  EXPECT_FALSE(svod({}, {"pack", kMlp, "--keygen", (dir / "carol").string()}).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "carol.key"));
}

// A plan whose collectives fit 4 ranks and not one packs on 4 local ranks:
// rank 0 writes the one package (the same bytes whatever the rank count),
// which then runs on 4 ranks without compiling. Under mpirun: tests/comm/mpi.
TEST(SvodPack, PlansWithCollectivesPackOnTheirRanks) {
  TempDir dir;
  const std::string gather = SVOD_SOURCE_DIR "/tests/planfile/data/collective4.json";
  const std::string package = (dir / "gather.svodpkg").string();
  const ProcessResult one = svod({}, {"pack", gather, "-o", package});
  EXPECT_EQ(one.exit_code, 2);
  EXPECT_NE(one.err.find("svod pack: error (validation): "), std::string::npos) << one.err;
  EXPECT_NE(one.err.find("holds 8 elements but must hold 1 ranks x 2"), std::string::npos) << one.err;
  const ProcessResult two = svod({}, {"pack", gather, "-o", package, "--ranks", "2"});
  EXPECT_EQ(two.exit_code, 2);
  for (int k : {0, 1}) {
    EXPECT_NE(two.err.find(fmt::format("[rank {}] svod pack: error (validation): ", k)), std::string::npos) << two.err;
  }
  EXPECT_EQ(count(two.err, "holds 8 elements but must hold 2 ranks x 2"), 2u) << two.err;
  EXPECT_FALSE(std::filesystem::exists(package));

  const ProcessResult packed = svod({}, {"pack", gather, "-o", package, "--ranks", "4"});
  ASSERT_TRUE(packed.ok()) << packed.err;
  EXPECT_EQ(packed.err, "");
  EXPECT_EQ(count(packed.out, "packed "), 1u) << packed.out;
  EXPECT_NE(packed.out.find("  loaded on 4 ranks (local), "), std::string::npos) << packed.out;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()), 1);
  const ProcessResult run = svod({"SVOD_COMPILE=0", "SVOD_CACHE=0"}, {"run", package, "--ranks", "4"});
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_EQ(count(run.out, "expect: ok"), 2u) << run.out;

  // A rank that fails to load leaves the old package as it was: rank 0,
  // which loaded, used to replace it and then fail (issue 40).
  const std::string fails_on_rank_1 = dir.write("fails_on_rank_1.json", R"J({"svod_plan": 1,
    "buffers": {"o": {"dtype": "f32", "count": 4}},
    "programs": {"k": {"language": "c", "entry": "k", "source": "void k(float* o, int x) { o[0] = x; }",
      "buffers": [{"name": "o", "access": "write", "dtype": "f32"}], "scalars": [{"name": "x", "type": "i32"}]}},
    "ops": [{"run": "k", "buffers": ["o"], "scalars": {"x": "100 / (1 - rank)"}}]})J").string();
  const std::string old_package = dir.write("old.svodpkg", "the old package").string();
  const ProcessResult half = svod({}, {"pack", fails_on_rank_1, "-o", old_package, "--ranks", "2"});
  EXPECT_EQ(half.exit_code, 2) << half.out << half.err;
  EXPECT_NE(half.err.find("[rank 1] svod pack: error (validation): "), std::string::npos) << half.err;
  EXPECT_NE(half.err.find("division by zero"), std::string::npos) << half.err;
  std::ifstream old_bytes(old_package);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(old_bytes), {}), "the old package");

  // Nothing in a package depends on the ranks: a plan that loads on any
  // number of them packs to the same bytes on one and on three, signed by
  // rank 0 (the only one that reads the key).
  const std::string plan = SVOD_SOURCE_DIR "/tests/planfile/data/collective.json";
  const std::string key = (dir / "alice").string();
  ASSERT_TRUE(svod({}, {"pack", "--keygen", key}).ok());
  const auto alone = dir / "alone.svodpkg", three = dir / "three.svodpkg";
  ASSERT_TRUE(svod({}, {"pack", plan, "-o", alone.string(), "--sign", key + ".key"}).ok());
  const ProcessResult signed_on_three =
      svod({}, {"pack", plan, "-o", three.string(), "--ranks", "3", "--sign", key + ".key"});
  ASSERT_TRUE(signed_on_three.ok()) << signed_on_three.err;
  EXPECT_EQ(count(signed_on_three.out, "  signed by key "), 1u) << signed_on_three.out;
  auto bytes = [](const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(alone), bytes(three));

  // --keygen makes no package: --ranks goes with packing only.
  EXPECT_FALSE(svod({}, {"pack", "--keygen", (dir / "bob").string(), "--ranks", "2"}).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "bob.key"));
}

}  // namespace
}  // namespace svod

namespace svod {
namespace {

// `svod run MODEL --input x=@x.npy --output y=@y.npy`: the npy's shape sets
// the variable dimension, the output is written at that shape; `svod info`
// lists what the package holds.
TEST(SvodPack, APackageRunsByNameAndInfoDescribesIt) {
  TempDir dir;
  // y = x * 2 + 1 over n rows of 3: x an input of [n, 3] floats, n in [1, 4].
  const std::string plan = SVOD_SOURCE_DIR "/tests/planfile/data/named_inputs.json";
  const std::string package = (dir / "affine.svodpkg").string();
  ASSERT_TRUE(svod({}, {"pack", plan, "-o", package}).ok());

  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const size_t shape[] = {2, 3};
  write_npy(dir / "x.npy", DType::F32, shape, std::as_bytes(std::span(x)));
  const ProcessResult run = svod({"SVOD_COMPILE=0"}, {"run", package, "--input", "x=@" + (dir / "x.npy").string(),
                                                      "--output", "y=@" + (dir / "y.npy").string()});
  ASSERT_TRUE(run.ok()) << run.out << run.err;
  EXPECT_NE(run.out.find("y: f32 [2, 3] [3, 5, 7, 9, 11, 13]"), std::string::npos) << run.out;
  const NpyArray y = read_npy(dir / "y.npy");
  EXPECT_EQ(y.shape, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(reinterpret_cast<const float*>(y.data.data())[5], 13.0f);

  const size_t too_many[] = {5, 3};
  const std::vector<float> big(15, 1.0f);
  write_npy(dir / "big.npy", DType::F32, too_many, std::as_bytes(std::span(big)));
  const ProcessResult refused = svod({}, {"run", package, "--input", "x=@" + (dir / "big.npy").string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.err.find("variables.n"), std::string::npos) << refused.err;

  const ProcessResult info = svod({}, {"info", package});
  ASSERT_TRUE(info.ok()) << info.err;
  for (const char* line : {"format 2", "inputs:\n  x  f32 [n, 3]", "outputs:\n  y  f32 [n, 3]", "n in [1, 4], 4",
                           "kernels: 1 (1 elf_object for CPU)", "constant: 1 buffer, 48 B", "signed by: nobody",
                           "cpu objects: "})
    EXPECT_NE(info.out.find(line), std::string::npos) << line << "\n" << info.out;
}

}  // namespace
}  // namespace svod
