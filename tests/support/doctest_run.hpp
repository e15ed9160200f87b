// SPDX-License-Identifier: Apache-2.0
// Runs doctest and fails a run in which no test case matched the filter: CTest runs each test
// case by name, and a name doctest cannot match (a comma or semicolon in it) would otherwise
// pass having checked nothing. Include this once, in the TU that defines main.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>

namespace mldiag_test {

inline int test_cases_run = -1;

struct count_listener : doctest::IReporter {
  explicit count_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    test_cases_run = static_cast<int>(stats.numTestCasesPassingFilters);
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

inline int run(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;  // --list-test-cases and other queries
  if (test_cases_run == 0) {
    std::fprintf(stderr, "mldiag: no test case matched the filter; check the test's name\n");
    return 1;
  }
  return result;
}

}  // namespace mldiag_test

DOCTEST_REGISTER_LISTENER("mldiag_count", 1, mldiag_test::count_listener);
