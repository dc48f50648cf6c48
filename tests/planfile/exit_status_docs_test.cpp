// The svod command's exit statuses as the docs give them against the ones the
// code returns (tools/svod/exit_status.h): docs/PLAN_FORMAT.md's table lists
// exactly those, every status the documents mention is one of them, and a
// wrong command line exits with the status the table gives it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "svod/base/subprocess.h"
#include "tools/svod/exit_status.h"

namespace svod {
namespace {

using namespace svod::cli;

std::string read_doc(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first column of the table that follows "Exit status:" in `text`.
std::vector<std::string> exit_status_table(const std::string& text) {
  const size_t at = text.find("\nExit status:\n");
  EXPECT_NE(at, std::string::npos) << "no \"Exit status:\" table";
  std::vector<std::string> statuses;
  std::istringstream lines(text.substr(at + 1));
  std::string line;
  std::getline(lines, line);  // "Exit status:"
  bool in_table = false;
  while (std::getline(lines, line)) {
    if (line.empty() && !in_table) continue;
    if (line.rfind("|", 0) != 0) break;
    in_table = true;
    const std::string cell = line.substr(2, line.find(" |", 2) - 2);
    if (cell != "status" && cell.find("---") == std::string::npos) statuses.push_back(cell);
  }
  return statuses;
}

TEST(ExitStatusDocs, ThePlanFormatTableListsTheStatusesTheCommandReturns) {
  const std::vector<std::string> table = exit_status_table(read_doc(SVOD_SOURCE_DIR "/docs/PLAN_FORMAT.md"));
  const std::set<std::string> documented(table.begin(), table.end());
  const std::set<std::string> returned = {
      std::to_string(kExitOk),          std::to_string(kExitMismatch), std::to_string(kExitFailed),
      std::to_string(kExitKernelFault), std::to_string(kExitKernelExit), std::to_string(kExitTimeout),
      std::to_string(kExitSignalBase) + " + N"};
  EXPECT_EQ(documented, returned);
}

// Every "exit status N", "exits with status N", "status N", "exits N" and
// "exit N" in README.md and docs/ ("128 + ..." included; the benchmark pages quote CI's and other
// programs' statuses, not svod's) is a status of the table, or 128 + N.
TEST(ExitStatusDocs, EveryStatusTheDocumentsMentionIsOneTheCommandReturns) {
  const std::set<int> statuses = {kExitOk, kExitMismatch, kExitFailed, kExitKernelFault, kExitKernelExit, kExitTimeout};
  std::vector<std::filesystem::path> documents = {SVOD_SOURCE_DIR "/README.md"};
  for (const auto& entry : std::filesystem::directory_iterator(SVOD_SOURCE_DIR "/docs"))
    if (entry.path().extension() == ".md" && entry.path().filename().string().rfind("BENCHMARKS", 0) != 0)
      documents.push_back(entry.path());
  const std::regex mention(R"((?:exit(?:s|ed)?(?: with)?(?: status)?|status) (\d+)( \+ )?)");
  size_t mentions = 0;
  for (const auto& document : documents) {
    const std::string text = read_doc(document);
    for (auto m = std::sregex_iterator(text.begin(), text.end(), mention); m != std::sregex_iterator(); ++m) {
      const int status = std::stoi((*m)[1]);
      ++mentions;
      if ((*m)[2].matched || (status > kExitSignalBase && status <= kExitSignalBase + 64)) {
        EXPECT_EQ((*m)[2].matched ? status : kExitSignalBase, kExitSignalBase)
            << document.filename() << ": \"" << m->str() << "\"";
        continue;
      }
      EXPECT_TRUE(statuses.contains(status)) << document.filename() << ": \"" << m->str() << "\" is not a status "
                                             << "svod exits with (tools/svod/exit_status.h)";
    }
  }
  EXPECT_GE(mentions, 10u);  // the pattern still finds the documents' wording
}

ProcessResult svod(std::vector<std::string> args) {
  args.insert(args.begin(), SVOD_BINARY_DIR "/svod");
  return run_process(args, "", std::chrono::seconds(60));
}

TEST(ExitStatusDocs, AWrongCommandLineExitsWithTheFailedStatus) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"run"}, {"run", "--no-such-option", "plan.json"}, {"no-such-command"}}) {
    const ProcessResult r = svod(args);
    EXPECT_EQ(r.exit_code, kExitFailed) << args[0] << r.out << r.err;
  }
  EXPECT_EQ(svod({"run", "--help"}).exit_code, kExitOk);
}

}  // namespace
}  // namespace svod
