#include "tools/svod/usage.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <variant>

#include "tools/svod/exit_status.h"

namespace svod::cli {
namespace {

// Optimal string alignment distance: Levenshtein's, plus a swap of two
// neighbouring characters as one edit ("rnu" is one edit from "run").
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& choices) {
  const auto near = nearest(word, choices);
  return near ? fmt::format("; did you mean {}?", *near) : std::string();
}

// "svod", "svod run", "svod cache stats": the words that name `command`.
std::string command_words(const CLI::App* command) {
  std::string words = command->get_name();
  for (const CLI::App* up = command->get_parent(); up != nullptr; up = up->get_parent())
    words = up->get_name() + " " + words;
  return words;
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); }))
    names.push_back(sub->get_name());
  return names;
}

CLI::App* find_command(CLI::App& app, std::string_view name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

// Every flag `command` takes, as written: "--profile", "-o".
std::vector<std::string> flag_names(const CLI::App* command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command->get_options()) {
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
    for (const auto& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

// The help `svod help COMMAND` and `svod COMMAND --help` print: the usage
// line names the whole command ("Usage: svod run [OPTIONS] plan").
std::string command_help(const CLI::App* command) {
  const CLI::App* parent = command->get_parent();
  return parent == nullptr ? command->help() : command->help(command_words(parent));
}

// "Usage: svod run [OPTIONS] plan".
std::string usage_line(const CLI::App* command) {
  const std::string help = command_help(command);
  const size_t at = help.find("Usage: ");
  return at == std::string::npos ? std::string() : help.substr(at, help.find('\n', at) - at);
}

int usage_error(const CLI::App* command, std::string_view problem) {
  const std::string words = command_words(command);
  fmt::print(stderr, "{}: error (usage): {}\nRun `{} --help` for {}.\n", words, problem, words,
             command->get_parent() == nullptr ? "the commands" : "its options");
  return kExitFailed;
}

// The command the first words of `args` name (`svod` itself when none), or a
// usage error for a word that names none: the first word that is not a flag
// names a command wherever commands are to be chosen (their parents take no
// flag with a value, so no such word is a flag's value).
std::variant<CLI::App*, int> named_command(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* at = &app;
  for (const auto& word : args) {
    const std::vector<std::string> names = command_names(*at);
    if (names.empty()) break;
    if (word.starts_with("-")) {
      const std::string flag = word.substr(0, word.find('='));
      const std::vector<std::string> flags = flag_names(at);
      if (std::find(flags.begin(), flags.end(), flag) == flags.end())
        return usage_error(at, fmt::format("unknown option {}{}", flag, did_you_mean(flag, flags)));
      continue;
    }
    CLI::App* next = find_command(*at, word);
    if (next == nullptr) {
      return usage_error(at, fmt::format("\"{}\" is not a command{} (the commands: {})", word,
                                         did_you_mean(word, names), fmt::join(names, ", ")));
    }
    at = next;
  }
  return at;
}

// The deepest command the parser chose.
const CLI::App* chosen_command(const CLI::App& app) {
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  return at;
}

// What is wrong, in svod's words, for a refusal of the parser's.
std::string problem_text(const CLI::App* command, const CLI::ParseError& e) {
  std::string text = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    for (const CLI::App* at = command; at != nullptr; at = at->get_parent()) {
      const std::vector<std::string> extra = at->remaining();
      if (extra.empty()) continue;
      const auto flag = std::find_if(extra.begin(), extra.end(), [](const auto& a) { return a.starts_with("-"); });
      if (flag != extra.end()) {
        const std::string name = flag->substr(0, flag->find('='));
        return fmt::format("unknown option {}{}", name, did_you_mean(name, flag_names(command)));
      }
      return fmt::format("unexpected argument \"{}\"", extra.front());
    }
    return text;
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && command->get_subcommands().empty()) {
    if (const auto names = command_names(*command); !names.empty())
      return fmt::format("a command is required: {}", fmt::join(names, ", "));
    // "plan is required": say which argument, as the usage line writes it.
    return fmt::format("{} ({})", text, usage_line(command));
  }
  // The validators below say "must ...": "--repeat: must be" reads "--repeat must be".
  if (const size_t at = text.find(": must "); at != std::string::npos) text.erase(at, 1);
  return text;
}

}  // namespace

std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& choices) {
  std::optional<std::string> best;
  // A name of one or two letters ("-x") is near every other: nothing is suggested.
  if (word.size() - std::min(word.find_first_not_of('-'), word.size()) < 3) return best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (const auto& choice : choices) {
    if (const size_t d = edit_distance(word, choice); d < best_distance) {
      best = choice;
      best_distance = d;
    }
  }
  return best;
}

namespace {

// Whole numbers from `minimum` to `maximum`; `range` says which in words.
CLI::Validator integer_validator(long long minimum, long long maximum, std::string range) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        long long value = 0;
        if (!CLI::detail::lexical_cast(text, value) || value < minimum || value > maximum)
          return fmt::format("must be a whole number {}; got {}", range, text);
        return {};
      },
      "");
}

}  // namespace

CLI::Validator at_least(long long minimum) {
  return integer_validator(minimum, std::numeric_limits<int>::max(), fmt::format("of at least {}", minimum));
}

CLI::Validator between(long long minimum, long long maximum) {
  return integer_validator(minimum, maximum, fmt::format("from {} to {}", minimum, maximum));
}

CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double seconds = 0;
        if (!CLI::detail::lexical_cast(text, seconds) || !std::isfinite(seconds) || seconds <= 0 || seconds > 1e9)
          return "must be a positive number of seconds, at most 1e9; got " + text;
        return {};
      },
      "SECONDS");
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    fmt::print("{}", app.help());
    return 0;
  }
  if (args.front() == "help") {
    const auto named = named_command(app, {args.begin() + 1, args.end()});
    if (const int* status = std::get_if<int>(&named)) return *status;
    fmt::print("{}", command_help(std::get<CLI::App*>(named)));
    return 0;
  }
  if (const auto named = named_command(app, args); std::holds_alternative<int>(named)) return std::get<int>(named);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const CLI::App* command = chosen_command(app);
    return usage_error(command, problem_text(command, e));
  }
  return std::nullopt;
}

}  // namespace svod::cli
