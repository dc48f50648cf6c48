#include "compile_c.h"

#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "svod/base/subprocess.h"

namespace svod::test {

const std::vector<std::byte>& compile_c(std::string_view source, const CompileOptions& options) {
  std::vector<std::string> argv = {"clang-19", "-c", "-x", "c", "-O2", "-ffreestanding",
                                   "-fno-math-errno", "-fno-stack-protector", "-fno-ident"};
  if (options.target.empty()) {
    argv.push_back("-march=native");
  } else {
    argv.push_back("--target=" + options.target);
  }
  argv.push_back(options.pic ? "-fPIC" : "-fno-pic");
  argv.insert(argv.end(), options.flags.begin(), options.flags.end());
  argv.insert(argv.end(), {"-", "-o", "-"});

  static std::mutex mutex;
  static std::map<std::pair<std::vector<std::string>, std::string>, std::vector<std::byte>> cache;
  std::lock_guard lock(mutex);
  auto key = std::make_pair(argv, std::string(source));
  if (auto it = cache.find(key); it != cache.end()) return it->second;

  const ProcessResult result = run_process(argv, source, std::chrono::seconds(60));
  if (!result.ok()) {
    throw std::runtime_error("clang-19 failed (exit " + std::to_string(result.exit_code) +
                             "):\n" + result.err + "\nsource:\n" + std::string(source));
  }
  const auto* data = reinterpret_cast<const std::byte*>(result.out.data());
  return cache.emplace(std::move(key), std::vector<std::byte>(data, data + result.out.size()))
      .first->second;
}

const std::vector<std::byte>& compile_c_aarch64(std::string_view source, bool pic,
                                                std::vector<std::string> flags) {
  CompileOptions options;
  options.pic = pic;
  options.target = "aarch64-none-elf";
  options.flags = std::move(flags);
  return compile_c(source, options);
}

}  // namespace svod::test
