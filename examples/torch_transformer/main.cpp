// SPDX-License-Identifier: Apache-2.0
// A small decoder-only transformer (LibTorch C++) trained on the GPL text Debian ships, under
// an mldiag monitor. Plant a fault with --fault NAME (see --help) and watch the monitor find it.
#include "transformer.hpp"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) try {
  const examples::run_options o = examples::parse_options(argc, argv, "mldiag_torch_transformer");
  torch::set_num_threads(1);  // one step at a time, reproducible; the suite runs runs in parallel
  const auto text = examples::lm::load_corpus(o.data.empty() ? examples::lm::default_text : o.data);
  examples::lm::shape s;
  s.moe = o.moe;
  std::printf("data: %s\n", text.source.c_str());
  std::printf("model: %lld blocks, d=%lld, %lld heads, context %lld, %s\n", static_cast<long long>(s.blocks),
              static_cast<long long>(s.d), static_cast<long long>(s.heads), static_cast<long long>(s.context),
              s.moe ? "top-1 MoE (4 experts) in odd blocks" : "dense");
  std::printf("fault: %s", std::string(examples::info(o.planted).name).c_str());
  if (o.planted != examples::fault::none) std::printf(" from step %lld", static_cast<long long>(o.onset_step()));
  std::printf("\n");
  mldiag::monitor mon(examples::lm::monitor_settings(text));
  const auto r = examples::lm::train(o, mon, text, s);
  std::printf("chance level: ln %lld = %.4f\n", static_cast<long long>(text.vocab), std::log(static_cast<double>(text.vocab)));
  examples::print_run(r);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
