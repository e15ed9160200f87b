// SPDX-License-Identifier: Apache-2.0
// The README's training loop, compiled and run: a LibTorch MLP on the UCI digits (real data,
// scripts/fetch-digits.sh) with the monitor embedded as the README shows it, a JSON Lines file
// and the HTML report. The test docs.readme_loop checks that the README holds the code between
// the [readme] markers, line for line. `--lr-x100-at STEP` plants a fault a user makes: the
// learning rate multiplied by 100 from that step.
#include <mldiag/adapters/torch.hpp>
#include <mldiag/monitor.hpp>
#include <mldiag/report/attach.hpp>
#include <mldiag/report/console.hpp>

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace F = torch::nn::functional;

namespace {

struct digits {
  torch::Tensor x, y;  // [n, 64] scaled to [0, 1], [n] labels 0-9
};

digits load_digits(const char* path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "mldiag: readme_loop: cannot read %s; run scripts/fetch-digits.sh first\n", path);
    std::exit(2);
  }
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::string line; std::getline(in, line);) {
    std::stringstream row(line);
    std::string cell;
    for (int i = 0; i < 64 && std::getline(row, cell, ','); ++i) x.push_back(std::stof(cell) / 16.0f);
    if (std::getline(row, cell, ',')) y.push_back(std::stoll(cell));
  }
  const auto n = static_cast<std::int64_t>(y.size());
  return {torch::from_blob(x.data(), {n, 64}).clone(), torch::from_blob(y.data(), {n}, torch::kLong).clone()};
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t lr_x100_at = -1;
  std::string out_dir = ".";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--lr-x100-at") lr_x100_at = std::stoll(argv[i + 1]);
    else if (a == "--out") out_dir = argv[i + 1];
  }
  torch::manual_seed(1);
  const digits data = load_digits(MLDIAG_DIGITS_CSV);

  // [readme]
  const std::int64_t n = data.y.size(0), train_n = n * 4 / 5, batch = 32, epochs = 10;
  torch::nn::Sequential model(torch::nn::Linear(64, 64), torch::nn::ReLU(), torch::nn::Linear(64, 10));
  double lr = 0.05;
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(lr).momentum(0.9));
  const std::string jsonl = out_dir + "/readme_loop.jsonl", html = out_dir + "/readme_loop.html";
  mldiag::monitor mon({.task = {.classes = 10}});                      // the default detectors (Q1-Q3)
  mldiag::report::attach_jsonl(mon, jsonl);                  // one line a step, finding, diagnosis
  mldiag::report::attach_html(mon, html);                    // written when the run ends
  mon.attach(mldiag::report::console_sink());              // a finding once per episode
  mldiag::module_observer watch(model);                      // parameters, gradients, updates
  std::int64_t step = 0;
  for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
    const torch::Tensor order = torch::randperm(train_n);
    for (std::int64_t b = 0; b + batch <= train_n; b += batch, ++step) {
      const torch::Tensor idx = order.slice(0, b, b + batch);
      if (step == lr_x100_at) for (auto& g : opt.param_groups()) g.options().set_lr(lr *= 100);
      opt.zero_grad();
      const torch::Tensor loss = F::cross_entropy(model->forward(data.x.index({idx})), data.y.index({idx}));
      loss.backward();
      opt.step();
      mon.observe(mldiag::scalar::loss, loss.item<double>());
      mon.observe(mldiag::scalar::learning_rate, lr);
      watch.observe(mon);
      mon.end_step();
    }
    torch::NoGradGuard no_grad;                              // evaluation: at the epoch's last step
    const auto test = torch::indexing::Slice(train_n, torch::indexing::None);
    mon.observe_evaluation(F::cross_entropy(model->forward(data.x.index({test})), data.y.index({test})).item<double>());
  }
  mon.finish();                                              // the HTML report is written now
  // [readme]

  std::size_t warnings = 0;
  for (const auto& d : mldiag::report::read_jsonl(jsonl).findings) warnings += d.finding.severity >= mldiag::severity::warning ? 1 : 0;
  std::printf("readme_loop: %lld steps, %zu finding(s) at warning or above, %zu open diagnosis(es); %s and %s written\n",
              static_cast<long long>(step), warnings, mon.open_diagnoses(), jsonl.c_str(), html.c_str());
  return 0;
}
