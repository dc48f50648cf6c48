// svod's environment: the one rule for values (whitespace, switch words,
// errors that name the variable and quote its value), each type's reader on
// the real process environment, and the table against docs/ENVIRONMENT.md.
#include "svod/base/env.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::ScopedEnv;

std::string message_of(const Error& e) { return e.what(); }

TEST(Env, SwitchWordsAreOneListInAnyCase) {
  for (const char* on : {"1", "true", "yes", "on", "TRUE", "Yes", "ON"}) EXPECT_EQ(switch_word(on), true) << on;
  for (const char* off : {"0", "false", "no", "off", "False", "NO", "Off"}) EXPECT_EQ(switch_word(off), false) << off;
  for (const char* neither : {"", "2", "enabled", "y", "onn", "0 "})
    EXPECT_EQ(switch_word(neither), std::nullopt) << neither;
}

TEST(Env, AnUnknownSwitchWordIsAnErrorNamingTheVariable) {
  ScopedEnv set("SVOD_COMPILE", "maybe");
  const Error e = test::expect_error([] { env_switch(EnvVar::Compile); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_EQ(message_of(e), "SVOD_COMPILE=\"maybe\": expected 1 or 0 (or true/false, yes/no, on/off)");
}

TEST(Env, WhitespaceAroundAnyValueIsIgnoredAndBlankIsUnset) {
  for (const char* text : {" 0.3", "0.3 ", "\t0.3\n"}) {
    ScopedEnv set("SVOD_OP_TIMEOUT", text);
    EXPECT_EQ(env_seconds(EnvVar::OpTimeout), 0.3) << '"' << text << '"';
  }
  {
    ScopedEnv set("SVOD_CACHE", "  off ");
    EXPECT_EQ(env_switch(EnvVar::Cache), false);
  }
  {
    ScopedEnv set("SVOD_CACHE_DIR", " /tmp/cache\t");
    EXPECT_EQ(env_string(EnvVar::CacheDir), "/tmp/cache");
  }
  for (const char* blank : {"", " ", "\t\n"}) {
    ScopedEnv set("SVOD_THREADS", blank);
    EXPECT_EQ(env_int(EnvVar::Threads, 7), 7);
    EXPECT_EQ(env_value(EnvVar::Threads), std::nullopt);
  }
  // The error quotes the value as read, without the whitespace.
  ScopedEnv set("SVOD_THREADS", " 4x ");
  EXPECT_EQ(message_of(test::expect_error([] { env_int(EnvVar::Threads, 0); })),
            "SVOD_THREADS=\"4x\": expected an integer from 0 to 4096");
}

TEST(Env, IntegersAreCheckedAgainstTheirRange) {
  {
    ScopedEnv set("SVOD_THREADS", "12");
    EXPECT_EQ(env_int(EnvVar::Threads, 0), 12);
  }
  for (const char* bad : {"-1", "4097", "1.5", "+3", "0x10", "99999999999999999999"}) {
    ScopedEnv set("SVOD_THREADS", bad);
    const Error e = test::expect_error([] { env_int(EnvVar::Threads, 0); });
    EXPECT_EQ(e.kind(), ErrorKind::Validation) << bad;
    EXPECT_EQ(message_of(e), fmt::format("SVOD_THREADS=\"{}\": expected an integer from 0 to 4096", bad));
  }
  ScopedEnv set("SVOD_KERNEL_CACHE_MAX", "-1");
  EXPECT_EQ(message_of(test::expect_error([] { env_int(EnvVar::KernelCacheMax, 0); })),
            "SVOD_KERNEL_CACHE_MAX=\"-1\": expected an integer, at least 0");
}

TEST(Env, DebugLevelsTakeNumbersAndSwitchWords) {
  EXPECT_EQ(env_level(EnvVar::Debug), 0);  // the tests run without it
  const std::vector<std::pair<const char*, int>> levels = {{"yes", 1}, {"on", 1},    {"true", 1},  {"1", 1},
                                                           {"no", 0},  {"off", 0},  {"false", 0}, {"0", 0},
                                                           {"3", 3},   {"4", 4}};
  for (const auto& [text, level] : levels) {
    ScopedEnv set("SVOD_DEBUG", text);
    EXPECT_EQ(env_level(EnvVar::Debug), level) << text;
  }
  for (const char* bad : {"5", "-1", "verbose", "2.5"}) {
    ScopedEnv set("SVOD_DEBUG", bad);
    EXPECT_EQ(message_of(test::expect_error([] { env_level(EnvVar::Debug); })),
              fmt::format("SVOD_DEBUG=\"{}\": expected a level from 0 to 4 (or a switch: on is 1, off is 0)", bad));
  }
}

TEST(Env, SecondsArePositiveAndBounded) {
  {
    ScopedEnv set("SVOD_COMM_TIMEOUT", "1e-3");
    EXPECT_EQ(env_seconds(EnvVar::CommTimeout), 0.001);
  }
  for (const char* bad : {"0", "-2", "soon", "inf", "nan", "2e9", "1 s"}) {
    ScopedEnv set("SVOD_OP_TIMEOUT", bad);
    EXPECT_EQ(message_of(test::expect_error([] { env_seconds(EnvVar::OpTimeout); })),
              fmt::format("SVOD_OP_TIMEOUT=\"{}\": expected a positive number of seconds, at most 1000000000", bad));
  }
}

TEST(Env, SizesTakeBinarySuffixes) {
  EXPECT_EQ(parse_byte_size("32768K"), uint64_t{32} << 20);
  EXPECT_EQ(parse_byte_size("1GiB"), uint64_t{1} << 30);
  EXPECT_EQ(parse_byte_size("512"), 512u);
  EXPECT_EQ(parse_byte_size("2x"), std::nullopt);
  EXPECT_EQ(parse_byte_size("20000000000000000000"), std::nullopt);  // past 2^64
  EXPECT_EQ(parse_byte_size("17179869184G"), std::nullopt);          // 2^34 GiB = 2^64 bytes
  {
    ScopedEnv set("SVOD_LLC_SIZE", "32M");
    EXPECT_EQ(env_bytes(EnvVar::LlcSize), uint64_t{32} << 20);
  }
  for (const char* bad : {"0", "huge", "-1M"}) {
    ScopedEnv set("SVOD_LLC_SIZE", bad);
    EXPECT_EQ(message_of(test::expect_error([] { env_bytes(EnvVar::LlcSize); })),
              fmt::format("SVOD_LLC_SIZE=\"{}\": expected a size such as 32M, 512K or 1G", bad));
  }
}

TEST(Env, ARenamedVariableIsReadUnderItsOldNameToo) {
  ScopedEnv unset("SVOD_CPU_COMPILER", std::nullopt);
  ScopedEnv old("SVOD_CPU_BACKEND", " clang ");
  std::optional<EnvValue> value = env_value(EnvVar::CpuCompiler);
  ASSERT_TRUE(value);
  EXPECT_EQ(value->name, "SVOD_CPU_BACKEND");
  EXPECT_EQ(value->text, "clang");
  {
    ScopedEnv same("SVOD_CPU_COMPILER", "clang");
    value = env_value(EnvVar::CpuCompiler);
    ASSERT_TRUE(value);
    EXPECT_EQ(value->name, "SVOD_CPU_COMPILER");
  }
  ScopedEnv other("SVOD_CPU_COMPILER", "llvm");
  const Error e = test::expect_error([] { env_value(EnvVar::CpuCompiler); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_EQ(message_of(e),
            "SVOD_CPU_COMPILER=\"llvm\" and SVOD_CPU_BACKEND=\"clang\" differ (SVOD_CPU_BACKEND is the old name of "
            "SVOD_CPU_COMPILER): set one");
}

TEST(Env, AReaderOfTheWrongTypeIsAnInternalError) {
  EXPECT_EQ(test::expect_error([] { env_switch(EnvVar::Threads); }).kind(), ErrorKind::Internal);
  EXPECT_EQ(test::expect_error([] { env_string(EnvVar::Debug); }).kind(), ErrorKind::Internal);
}

TEST(Env, OtherProgramsVariablesAreReadAsTheyAre) {
  ScopedEnv set("XDG_CACHE_HOME", " /somewhere ");
  EXPECT_EQ(foreign_env("XDG_CACHE_HOME"), " /somewhere ");
  const Error e = test::expect_error([] { foreign_env("SVOD_CACHE_DIR"); });
  EXPECT_EQ(e.kind(), ErrorKind::Internal);
  EXPECT_NE(message_of(e).find("SVOD_CACHE_DIR"), std::string::npos);
}

TEST(Env, TheTableNamesEachVariableOnce) {
  std::set<std::string_view> names;
  for (const EnvVariable& variable : env_variables()) {
    EXPECT_TRUE(variable.name.starts_with("SVOD_")) << variable.name;
    EXPECT_TRUE(names.insert(variable.name).second) << variable.name << " twice";
    if (!variable.alias.empty()) {
      EXPECT_TRUE(variable.alias.starts_with("SVOD_")) << variable.alias;
      EXPECT_TRUE(names.insert(variable.alias).second) << variable.alias << " twice";
    }
    EXPECT_EQ(&env_variable(variable.var), &variable);
  }
}

// The type a variable's row in docs/ENVIRONMENT.md must state in its value
// column; empty where the column describes the words (Text).
std::string documented_type(const EnvVariable& variable) {
  switch (variable.type) {
    case EnvType::Text: return {};
    case EnvType::Switch: return "switch";
    case EnvType::Integer:
      return variable.max == std::numeric_limits<int64_t>::max()
                 ? fmt::format("integer, at least {}", variable.min)
                 : fmt::format("integer from {} to {}", variable.min, variable.max);
    case EnvType::Level: return fmt::format("level {} to {}", variable.min, variable.max);
    case EnvType::Seconds: return "seconds";
    case EnvType::Bytes: return "size";
  }
  return {};
}

TEST(Env, TheDocumentListsTheTable) {
  std::ifstream in(std::string(SVOD_SOURCE_DIR) + "/docs/ENVIRONMENT.md");
  ASSERT_TRUE(in) << "docs/ENVIRONMENT.md is missing";
  std::stringstream text;
  text << in.rdbuf();
  // The rows of the section "Variables svod reads": the first column is
  // the variable, the second its value.
  const std::string doc = text.str();
  const size_t section = doc.find("\n## Variables svod reads\n");
  ASSERT_NE(section, std::string::npos);
  const size_t section_end = doc.find("\n## ", section + 1);
  std::stringstream rows(doc.substr(section, section_end - section));
  struct Row {
    std::string name_column;
    std::string value_column;
  };
  std::map<std::string, Row> documented;  // by the variable's name
  for (std::string line; std::getline(rows, line);) {
    if (!line.starts_with("| `SVOD_")) continue;
    const size_t name_end = line.find('`', 3);
    const size_t name_column_end = line.find(" | ", name_end);
    const size_t value_end = line.find(" | ", name_column_end + 3);
    documented[line.substr(3, name_end - 3)] = {line.substr(2, name_column_end - 2),
                                                line.substr(name_column_end + 3, value_end - name_column_end - 3)};
  }
  for (const EnvVariable& variable : env_variables()) {
    const auto row = documented.find(std::string(variable.name));
    if (row == documented.end()) {
      ADD_FAILURE() << variable.name << " has no row in docs/ENVIRONMENT.md";
      continue;
    }
    EXPECT_NE(row->second.value_column.find(documented_type(variable)), std::string::npos)
        << variable.name << ": the value column \"" << row->second.value_column << "\" does not say \""
        << documented_type(variable) << "\"";
    if (!variable.alias.empty())  // "`SVOD_CPU_COMPILER` (old name: `SVOD_CPU_BACKEND`)"
      EXPECT_NE(row->second.name_column.find(fmt::format("old name: `{}`", variable.alias)), std::string::npos)
          << variable.name << "'s row does not give its old name " << variable.alias;
    documented.erase(row);
  }
  for (const auto& [name, row] : documented) ADD_FAILURE() << name << " is documented but svod does not read it";
}

}  // namespace
}  // namespace svod
