// SPDX-License-Identifier: Apache-2.0
// A hand-written Eigen MLP trained on the UCI digits under an mldiag monitor. Plant a fault
// with --fault NAME (see --help) and watch the monitor find it.
#include "mlp.hpp"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) try {
  const examples::run_options o = examples::parse_options(argc, argv, "mldiag_eigen_mlp");
  const auto data = examples::mlp::load_digits(o.data.empty() ? MLDIAG_DIGITS_CSV : o.data);
  std::printf("data: %s\n", data.source.c_str());
  std::printf("fault: %s", std::string(examples::info(o.planted).name).c_str());
  if (o.planted != examples::fault::none) std::printf(" from step %lld", static_cast<long long>(o.onset_step()));
  std::printf("\n");
  mldiag::monitor mon(examples::mlp::monitor_settings());
  const auto r = examples::mlp::train(o, mon, data);
  examples::print_run(r);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
