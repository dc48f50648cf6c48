// The module order of docs/ARCHITECTURE.md, checked: every #include of a svod
// header in svod/, python/ and tools/ must name a module in the including
// file's own layer or a lower one. The layer table below is the one place the
// order is defined; the document quotes it and a test keeps the two equal.
// And no side channel past the layers: no source (benchmarks included) sets
// one of svod's own environment variables for other code of the process to
// read, and only svod/base/env.* reads them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Lowest first. A module may include modules of its own layer and of the
// layers before it. Containment (svod/guard/) sits just above base so that
// every layer that runs kernels or plans can reach it. The device core (svod/device/) compiles through the
// object cache below it; each backend (svod/backends/NAME/, any NAME: the
// table lists none of them) implements the core's contract, and the registry
// above them is the one place that names them.
const std::vector<std::vector<std::string_view>> kLayers = {
    {"base"},
    {"guard"},
    {"program"},
    {"loader"},
    {"compile"},
    {"cache"},
    {"device"},
    {"backends/*"},
    {"registry"},
    {"custom", "comm"},
    {"plan"},
    {"executor", "sandbox"},
    {"planfile", "package"},
    {"profile", "tune"},
    {"capi"},
    {"python", "tools"},
};

bool is_backend(std::string_view module) { return module.starts_with("backends/"); }

std::optional<std::size_t> layer_of(std::string_view module) {
  if (is_backend(module)) module = "backends/*";
  for (std::size_t i = 0; i < kLayers.size(); ++i) {
    if (std::find(kLayers[i].begin(), kLayers[i].end(), module) != kLayers[i].end()) return i;
  }
  return std::nullopt;
}

// The module of a path relative to the source root ("svod/backends/cpu/x.h"
// -> "backends/cpu", "svod/registry/registry.h" -> "registry",
// "svod/compile/llvm/x.cpp" -> "compile", "python/..." -> "python").
std::string module_of(std::string_view path) {
  std::vector<std::string> parts;
  std::stringstream stream{std::string(path)};
  for (std::string part; std::getline(stream, part, '/');) parts.push_back(part);
  if (parts.size() < 2) return {};
  if (parts[0] != "svod") return parts[0];
  if (parts.size() < 3) return {};
  if (parts[1] == "backends" && parts.size() > 3) return "backends/" + parts[2];
  return parts[1];
}

struct Violation {
  std::string file;
  std::string include;
  std::string why;
};

// Checks the svod includes of one file's text.
std::vector<Violation> check_file(const std::string& path, const std::string& text) {
  static const std::regex kInclude(R"(^\s*#\s*include\s*[<"](svod/[^>"]+)[>"])");
  std::vector<Violation> found;
  const std::string module = module_of(path);
  const auto own = layer_of(module);
  if (!own) {
    found.push_back({path, "", "module '" + module + "' is not in the layer table"});
    return found;
  }
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (!std::regex_search(line, match, kInclude)) continue;
    const std::string included = match[1];
    const std::string target = module_of(included);
    const auto layer = layer_of(target);
    if (!layer) {
      found.push_back({path, included, "module '" + target + "' is not in the layer table"});
    } else if (*layer > *own) {
      found.push_back({path, included,
                       "'" + module + "' (layer " + std::to_string(*own) + ") includes '" +
                           target + "' (layer " + std::to_string(*layer) + ")"});
    } else if (is_backend(target) && *own > *layer_of("registry")) {
      // Above the registry, devices are reached through the device core
      // (Device, Program, Queue, Event) and the registry only: a new device
      // is its folder and a registry line.
      found.push_back({path, included, "'" + module + "' is above the registry and must not include a device backend ('" +
                                           target + "')"});
    } else if (is_backend(module) && is_backend(target) && module != target) {
      found.push_back({path, included, "backend '" + module + "' must not include another backend ('" + target + "')"});
    }
  }
  return found;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The order as docs/ARCHITECTURE.md writes it: one line per layer.
std::string layer_listing() {
  std::string listing;
  for (std::size_t i = 0; i < kLayers.size(); ++i) {
    listing += std::to_string(i) + ".";
    for (std::size_t j = 0; j < kLayers[i].size(); ++j) {
      listing += (j == 0 ? " " : ", ");
      listing += kLayers[i][j];
    }
    listing += "\n";
  }
  return listing;
}

// The folders of the library and its front ends, which the layers order.
constexpr std::initializer_list<const char*> kLayered = {"svod", "python", "tools"};
// Those and the benchmarks, which are held to the rules of the environment.
constexpr std::initializer_list<const char*> kWithBenchmarks = {"svod", "python", "tools", "bench"};

// Calls fn(path relative to the source root, text) for every C and C++ source
// under the folders `tops`; returns how many.
template <typename Fn>
std::size_t for_each_source(std::initializer_list<const char*> tops, Fn&& fn) {
  const fs::path root = SVOD_SOURCE_DIR;
  std::size_t scanned = 0;
  for (const char* top : tops) {
    if (!fs::exists(root / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string extension = entry.path().extension().string();
      if (!entry.is_regular_file() ||
          (extension != ".h" && extension != ".cpp" && extension != ".hpp" && extension != ".c")) {
        continue;
      }
      fn(entry.path().lexically_relative(root).generic_string(), read_text(entry.path()));
      ++scanned;
    }
  }
  EXPECT_GT(scanned, 100u) << "the scan found almost no sources under " << root;
  return scanned;
}

TEST(Layering, NoFileIncludesAModuleAboveItsOwn) {
  std::vector<Violation> violations;
  for_each_source(kLayered, [&](const std::string& relative, const std::string& text) {
    auto found = check_file(relative, text);
    violations.insert(violations.end(), found.begin(), found.end());
  });
  for (const Violation& v : violations) {
    ADD_FAILURE() << v.file << (v.include.empty() ? "" : ": #include \"" + v.include + "\"")
                  << ": " << v.why;
  }
}

// A choice reaches the code that needs it as an argument or an option (e.g.
// LoadOptions::cpu_compiler), never by setting SVOD_* in the process's
// environment: that would reach every later reader, other threads and child
// processes included, and race with them.
// (A benchmark that needs another value in a child process it starts passes
// it in the child's environment alone: run_process's `environment`.)
TEST(Layering, NoSourceSetsSvodsOwnEnvironmentVariables) {
  const std::regex sets_variable(R"((setenv|putenv)\s*\(\s*"SVOD_)");
  for_each_source(kWithBenchmarks, [&](const std::string& relative, const std::string& text) {
    std::smatch found;
    if (std::regex_search(text, found, sets_variable)) ADD_FAILURE() << relative << ": " << found.str();
  });
}

// svod/base/env.* is the one reader of svod's variables, with the one table
// of them and one rule for their values: no other source, the benchmarks and
// Python's package included, reads an SVOD_ variable itself.
const std::regex kReadsSvodVariable(R"((getenv|secure_getenv|foreign_env)\s*\(\s*"SVOD_)");

TEST(Layering, OnlyBaseEnvReadsSvodsEnvironmentVariables) {
  std::size_t reads = 0;
  for_each_source(kWithBenchmarks, [&](const std::string& relative, const std::string& text) {
    if (relative == "svod/base/env.h" || relative == "svod/base/env.cpp") return;
    for (std::sregex_iterator it(text.begin(), text.end(), kReadsSvodVariable), end; it != end; ++it) {
      ADD_FAILURE() << relative << ": " << it->str();
      ++reads;
    }
  });
  const std::regex python_reads(R"(environ(\.get)?\s*[\[(]\s*["']SVOD_|getenv\s*\(\s*["']SVOD_)");
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(SVOD_SOURCE_DIR) / "python")) {
    if (entry.path().extension() != ".py" && entry.path().extension() != ".pyi") continue;
    const std::string text = read_text(entry.path());
    for (std::sregex_iterator it(text.begin(), text.end(), python_reads), end; it != end; ++it) {
      ADD_FAILURE() << entry.path().string() << ": " << it->str();
      ++reads;
    }
  }
  EXPECT_EQ(reads, 0u);
}

TEST(Layering, TheEnvironmentScanFindsADirectRead) {
  EXPECT_TRUE(std::regex_search(std::string("if (std::getenv( \"SVOD_CACHE_DIR\") == nullptr)"), kReadsSvodVariable));
  EXPECT_TRUE(std::regex_search(std::string("foreign_env(\"SVOD_THREADS\")"), kReadsSvodVariable));
  EXPECT_FALSE(std::regex_search(std::string("env_string(EnvVar::CacheDir)"), kReadsSvodVariable));
  EXPECT_FALSE(std::regex_search(std::string("foreign_env(\"HOME\")"), kReadsSvodVariable));
}

TEST(Layering, DocumentStatesTheSameOrder) {
  const std::string doc = read_text(fs::path(SVOD_SOURCE_DIR) / "docs" / "ARCHITECTURE.md");
  ASSERT_FALSE(doc.empty()) << "docs/ARCHITECTURE.md is missing";
  EXPECT_NE(doc.find(layer_listing()), std::string::npos)
      << "docs/ARCHITECTURE.md must list the layers exactly as the test does:\n"
      << layer_listing();
}

TEST(Layering, ModulesAreNamedByTheirFolders) {
  EXPECT_EQ(module_of("svod/base/error.h"), "base");
  EXPECT_EQ(module_of("svod/compile/llvm/llvm_compiler.cpp"), "compile");
  EXPECT_EQ(module_of("svod/device/buffer.h"), "device");
  EXPECT_EQ(module_of("svod/guard/checked_mode.h"), "guard");
  EXPECT_EQ(module_of("svod/registry/registry.cpp"), "registry");
  EXPECT_EQ(module_of("svod/backends/cuda/cuda_device.h"), "backends/cuda");
  EXPECT_EQ(module_of("tools/svod/main.cpp"), "tools");
}

TEST(Layering, AnUpwardIncludeIsReported) {
  const auto upward = check_file("svod/device/kernel_cache.cpp",
                                 "#include <vector>\n#include \"svod/backends/cpu/cpu_device.h\"\n");
  ASSERT_EQ(upward.size(), 1u);
  EXPECT_EQ(upward[0].include, "svod/backends/cpu/cpu_device.h");

  EXPECT_TRUE(check_file("svod/backends/cpu/cpu_device.cpp",
                         "#include \"svod/device/kernel_cache.h\"\n#include \"svod/device/device.h\"\n")
                  .empty());
  EXPECT_EQ(check_file("svod/cache/object_cache.cpp", "#include \"svod/device/device.h\"\n").size(), 1u);
  EXPECT_TRUE(check_file("svod/registry/registry.cpp", "#include \"svod/backends/cuda/cuda_device.h\"\n").empty());
  // A new backend folder is in the backend layer with no edit of the table.
  EXPECT_TRUE(check_file("svod/backends/metal/metal_device.cpp", "#include \"svod/device/device.h\"\n").empty());
  EXPECT_EQ(check_file("svod/backends/metal/metal_device.cpp", "#include \"svod/plan/execution_plan.h\"\n").size(), 1u);
  EXPECT_EQ(check_file("svod/package/x.cpp", "#include \"svod/backends/cpu/cpu_device.h\"\n").size(), 1u);
  EXPECT_EQ(check_file("tools/svod/x.cpp", "#include \"svod/backends/cuda/cuda_api.h\"\n").size(), 1u);
  EXPECT_EQ(check_file("svod/backends/opencl/x.cpp", "#include \"svod/backends/cpu/cpu_device.h\"\n").size(), 1u);
  EXPECT_EQ(check_file("svod/base/log.cpp", "  #  include <svod/plan/dag.h>\n").size(), 1u);
  EXPECT_EQ(check_file("svod/newmodule/x.h", "").size(), 1u);  // every folder needs a layer
  EXPECT_EQ(check_file("svod/plan/x.cpp", "#include \"svod/backends/opencl/opencl_device.h\"\n").size(), 1u);
  EXPECT_TRUE(check_file("svod/plan/x.cpp", "#include \"svod/device/queue.h\"\n").empty());
  EXPECT_EQ(check_file("svod/base/x.h", "#include \"svod/nowhere/y.h\"\n").size(), 1u);
}

}  // namespace
