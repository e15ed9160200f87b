// SPDX-License-Identifier: Apache-2.0
// mldiag-replay: replays the evidence logs a harness recorded (`mldiag-zoo --evidence DIR`,
// `mldiag-fault-suite --evidence DIR`) through this build's monitor and compares the findings
// with the ones recorded beside each log. A refactor of the detector layer must leave every
// line as it was; a policy change shows here, run by run, what it moved.
#include "../common/evidence_log.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

[[noreturn]] void usage(const std::string& why, int code = 2) {
  std::fprintf(code ? stderr : stdout,
               "%s"
               "usage: mldiag-replay DIR [--write OUT] [--quiet]\n"
               "  replays every DIR/*.evd through this build's monitor and compares its findings with\n"
               "  DIR/*.findings (what the recording build delivered); exit 1 when any run differs\n"
               "  --write OUT  also write the replayed findings to OUT/<run>.findings\n"
               "  --quiet      print only the differing runs and the summary\n",
               why.empty() ? "" : ("mldiag: " + why + "\n").c_str());
  std::exit(code);
}

std::vector<std::string> read_lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("mldiag: cannot read " + p.string() + "; record the run again");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string dir, out;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--write") {
      if (i + 1 >= argc) usage("--write needs a folder");
      out = argv[++i];
    } else if (a == "--quiet") quiet = true;
    else if (a == "--help" || a == "-h") usage("", 0);
    else if (!a.empty() && a[0] == '-') usage("unknown flag " + std::string(a));
    else if (dir.empty()) dir = a;
    else usage("one folder only");
  }
  if (dir.empty()) usage("give the folder of evidence logs");
  if (!std::filesystem::is_directory(dir)) usage(dir + " is not a folder");
  if (!out.empty()) std::filesystem::create_directories(out);
  std::vector<std::filesystem::path> logs;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".evd") logs.push_back(e.path());
  std::sort(logs.begin(), logs.end());
  if (logs.empty()) usage("no .evd files in " + dir);
  std::size_t same = 0, differ = 0, lines_total = 0;
  for (const auto& log : logs) {
    auto expected_path = log;
    expected_path.replace_extension(".findings");
    const auto expected = read_lines(expected_path);
    const auto got = eval::replay(log.string());
    lines_total += got.size();
    if (!out.empty()) {
      std::ofstream w(std::filesystem::path(out) / expected_path.filename());
      for (const auto& l : got) w << l << '\n';
    }
    if (got == expected) {
      ++same;
      if (!quiet) std::printf("same    %s (%zu findings)\n", log.filename().c_str(), got.size());
      continue;
    }
    ++differ;
    std::printf("DIFFERS %s: %zu recorded, %zu replayed\n", log.filename().c_str(), expected.size(), got.size());
    const std::size_t n = std::max(expected.size(), got.size());
    for (std::size_t i = 0, shown = 0; i < n && shown < 4; ++i) {
      const std::string e = i < expected.size() ? expected[i] : "(none)", g = i < got.size() ? got[i] : "(none)";
      if (e == g) continue;
      ++shown;
      std::printf("  recorded: %s\n  replayed: %s\n", e.c_str(), g.c_str());
    }
  }
  std::printf("%zu runs replayed: %zu with the recorded findings, %zu differ; %zu findings in all\n", logs.size(), same,
              differ, lines_total);
  std::printf("{\"bench\":\"replay\",\"runs\":%zu,\"same\":%zu,\"differ\":%zu,\"findings\":%zu}\n", logs.size(), same, differ,
              lines_total);
  return differ == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
