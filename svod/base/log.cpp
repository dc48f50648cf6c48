#include "svod/base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace svod {

int debug_level() noexcept {
  static const int level = [] {
    const char* value = std::getenv("SVOD_DEBUG");
    return value ? std::atoi(value) : 0;
  }();
  return level;
}

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto log = std::make_shared<spdlog::logger>("svod", sink);
    log->set_pattern("svod: %v");
    log->set_level(debug_level() > 0 ? spdlog::level::debug : spdlog::level::warn);
    return log;
  }();
  return *instance;
}

}  // namespace svod
