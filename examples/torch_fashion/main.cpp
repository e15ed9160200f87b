// SPDX-License-Identifier: Apache-2.0
// LibTorch's MNIST example (pytorch/examples, cpp/mnist/mnist.cpp) on Fashion-MNIST, with an
// mldiag monitor in it: the same Net, the same torch::data::datasets::MNIST + Normalize +
// Stack<> + make_data_loader, the same SGD and train/test functions. The lines that are
// mldiag's are marked `// mldiag k/15`; everything else is the example as a LibTorch user
// has it (plus the command line, the data preparation and the verdict at the end).
//
//   mldiag_torch_fashion                       # the user's run: 10 epochs over all 60,000 images
//   mldiag_torch_fashion --epochs 4 --train-limit 19200 --fault lr_x100 --onset 600  # as CTest
#include <mldiag/adapters/torch.hpp>
#include <mldiag/monitor.hpp>
#include <mldiag/report/attach.hpp>
#include <mldiag/report/console.hpp>
#include <mldiag/report/format.hpp>  // fmt::print("{}", finding)

#include <fmt/format.h>
#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <unistd.h>  // getpid: a temporary file name no other process uses
#include <vector>

namespace {

// The constants of LibTorch's example, except the normalization: Fashion-MNIST's own mean and
// standard deviation (the example's 0.1307 / 0.3081 are MNIST's).
constexpr std::int64_t kTrainBatchSize = 64;
constexpr std::int64_t kTestBatchSize = 1000;
constexpr std::size_t kLogInterval = 100;  // the example's 10, with a line each instead of "\r"
constexpr double kMean = 0.2860, kStd = 0.3530;

struct Net : torch::nn::Module {
  Net()
      : conv1(torch::nn::Conv2dOptions(1, 10, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(10, 20, /*kernel_size=*/5)),
        fc1(320, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = tap("conv2.relu", torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2)));  // mldiag 1/15
    x = x.view({-1, 320});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/0.5, /*training=*/is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  mldiag::activation_tap tap;  // mldiag 2/15: statistics of the activations passed through it
};

// ---- the command line ------------------------------------------------------------------------

enum class fault { none, no_zero_grad, lr_x100 };

struct options {
  std::size_t epochs = 10;  // LibTorch's kNumberOfEpochs
  std::size_t train_limit = 60000;
  std::uint64_t seed = 1;  // the example's torch::manual_seed(1)
  fault planted = fault::none;
  std::int64_t onset = -1;  // -1: the fault's default (no_zero_grad 0, lr_x100 the middle of the run)
  std::string jsonl = "torch_fashion.jsonl", html = "torch_fashion.html";
  std::string data = "/usr/share/datasets/fashion-mnist";
#ifdef MLDIAG_FASHION_CACHE
  std::string cache = MLDIAG_FASHION_CACHE;
#else
  std::string cache = (std::filesystem::temp_directory_path() / "mldiag-fashion-mnist").string();
#endif
};

constexpr std::string_view usage =
    "usage: mldiag_torch_fashion [--epochs N] [--train-limit N] [--seed N]\n"
    "                            [--fault none|no_zero_grad|lr_x100] [--onset STEP]\n"
    "                            [--jsonl PATH] [--html PATH] [--data DIR] [--cache DIR]\n"
    "  --epochs N       epochs (10, as LibTorch's MNIST example)\n"
    "  --train-limit N  train on the first N of the 60,000 images, shuffled each epoch (all)\n"
    "  --fault F        no_zero_grad: optimizer.zero_grad() forgotten from --onset (0) on;\n"
    "                   lr_x100: the learning rate x100 at --onset (the middle of the run)\n"
    "  --data DIR       Fashion-MNIST IDX files, gzipped or not (/usr/share/datasets/fashion-mnist)\n"
    "  --cache DIR      where gzipped files are decompressed to, once (the build directory)\n";

[[noreturn]] void bad_usage(const std::string& why) {
  throw std::invalid_argument("mldiag_torch_fashion: " + why + "\n" + std::string(usage));
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(std::string(usage).c_str(), stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) bad_usage(std::string(a) + " needs a value (or is not an option)");
    const std::string v = argv[++i];
    auto number = [&](long long lo) {
      std::size_t used = 0;
      long long n = 0;
      try {
        n = std::stoll(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || n < lo) bad_usage(std::string(a) + " takes an integer >= " + std::to_string(lo) + ", not '" + v + "'");
      return n;
    };
    if (a == "--epochs") o.epochs = static_cast<std::size_t>(number(1));
    else if (a == "--train-limit") o.train_limit = static_cast<std::size_t>(number(1));
    else if (a == "--seed") o.seed = static_cast<std::uint64_t>(number(0));
    else if (a == "--onset") o.onset = number(0);
    else if (a == "--jsonl") o.jsonl = v;
    else if (a == "--html") o.html = v;
    else if (a == "--data") o.data = v;
    else if (a == "--cache") o.cache = v;
    else if (a == "--fault") {
      if (v == "none") o.planted = fault::none;
      else if (v == "no_zero_grad") o.planted = fault::no_zero_grad;
      else if (v == "lr_x100") o.planted = fault::lr_x100;
      else bad_usage("unknown fault '" + v + "'");
    } else {
      bad_usage("unknown option " + std::string(a));
    }
  }
  return o;
}

std::string_view name(fault f) {
  switch (f) {
    case fault::none: return "none";
    case fault::no_zero_grad: return "no_zero_grad";
    case fault::lr_x100: return "lr_x100";
  }
  return "?";
}

// ---- the data --------------------------------------------------------------------------------

// torch::data::datasets::MNIST reads the four IDX files uncompressed, by their canonical names;
// Debian (and the Fashion-MNIST download) ship them gzipped. They are decompressed here, with
// zlib, into `cache` once: a temporary file per process renamed into place, so CTest's
// parallel runs never see a half-written file, and the program runs the same from CTest, from
// a shell or on a machine with no gzip binary and no configure step. Returns the root to give
// the dataset.
std::string prepare_data(const options& o) {
  namespace fs = std::filesystem;
  static constexpr const char* files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  if (std::all_of(std::begin(files), std::end(files), [&](const char* f) { return fs::exists(fs::path(o.data) / f); }))
    return o.data;
  fs::create_directories(o.cache);
  for (const char* f : files) {
    const fs::path out = fs::path(o.cache) / f, in = fs::path(o.data) / (std::string(f) + ".gz");
    if (fs::exists(out)) continue;
    gzFile gz = gzopen(in.c_str(), "rb");
    if (gz == nullptr)
      throw std::runtime_error("mldiag_torch_fashion: cannot open " + in.string() +
                               "; install Fashion-MNIST (apt-get install dataset-fashion-mnist) or pass --data DIR");
    const fs::path tmp = out.string() + ".tmp." + std::to_string(::getpid());
    std::ofstream w(tmp, std::ios::binary);
    std::vector<char> buf(1 << 16);
    int n = 0;
    while ((n = gzread(gz, buf.data(), static_cast<unsigned>(buf.size()))) > 0) w.write(buf.data(), n);
    gzclose(gz);
    w.close();
    if (n < 0 || !w) {
      fs::remove(tmp);
      throw std::runtime_error("mldiag_torch_fashion: " + in.string() + " is not a readable gzip file, or " +
                               o.cache + " is not writable");
    }
    fs::rename(tmp, out);  // atomic: another run sees the whole file or none
  }
  return o.cache;
}

// ---- training --------------------------------------------------------------------------------

double learning_rate(torch::optim::Optimizer& optimizer) {
  return static_cast<torch::optim::SGDOptions&>(optimizer.param_groups().front().options()).lr();
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
}

struct epoch_result {
  double loss = 0, accuracy = 0;  // the epoch's mean training loss; accuracy with dropout on
  std::size_t steps = 0;
  double seconds = 0, monitor_seconds = 0;  // the whole epoch; the monitor's calls after optimizer.step()
};

using clock_type = std::chrono::steady_clock;

template <typename DataLoader>
epoch_result train(size_t epoch, Net& model, torch::Device device, DataLoader& data_loader,
                   torch::optim::Optimizer& optimizer, size_t dataset_size, const options& o, std::int64_t& step,
                   mldiag::monitor& mon, mldiag::module_observer& watch) {  // mldiag 3/15
  model.train();
  epoch_result r;
  size_t batch_idx = 0, seen = 0, correct = 0;
  const auto start = clock_type::now();
  for (auto& batch : data_loader) {
    // The planted faults: what a user's slip does to this loop.
    if (o.planted == fault::lr_x100 && step == o.onset) set_learning_rate(optimizer, 100 * learning_rate(optimizer));
    const bool zero_grad = !(o.planted == fault::no_zero_grad && step >= o.onset);

    auto data = batch.data.to(device), targets = batch.target.to(device);
    if (zero_grad) optimizer.zero_grad();
    auto output = model.forward(data);
    auto loss = torch::nll_loss(output, targets);
    loss.backward();
    optimizer.step();

    const auto before = clock_type::now();
    mon.observe(mldiag::role::input, "images", data);  // mldiag 4/15: inputs normalized?
    mon.observe(mldiag::scalar::loss, loss.template item<double>());   // mldiag 5/15
    mon.observe(mldiag::scalar::learning_rate, learning_rate(optimizer));         // mldiag 6/15
    watch.observe(mon);  // mldiag 7/15: parameters, gradients, updates, gradient cosines
    mon.end_step();  // mldiag 8/15: the detectors run; findings go to the sinks
    r.monitor_seconds += std::chrono::duration<double>(clock_type::now() - before).count();

    r.loss += loss.template item<double>();
    correct += static_cast<size_t>(output.argmax(1).eq(targets).sum().template item<int64_t>());
    seen += static_cast<size_t>(batch.data.size(0));
    ++step;
    if (batch_idx++ % kLogInterval == 0) {
      std::printf("Train Epoch: %zu [%5zu/%5zu] Loss: %.4f\n", epoch, seen, dataset_size, loss.template item<float>());
      std::fflush(stdout);
    }
  }
  r.steps = batch_idx;
  r.loss /= static_cast<double>(std::max<size_t>(batch_idx, 1));
  r.accuracy = static_cast<double>(correct) / static_cast<double>(std::max<size_t>(seen, 1));
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return r;
}

template <typename DataLoader>
std::pair<double, double> test(Net& model, torch::Device device, DataLoader& data_loader, size_t dataset_size) {
  torch::NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  int64_t correct = 0;
  for (const auto& batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    auto output = model.forward(data);
    test_loss += torch::nll_loss(output, targets, /*weight=*/{}, torch::Reduction::Sum).template item<float>();
    auto pred = output.argmax(1);
    correct += pred.eq(targets).sum().template item<int64_t>();
  }
  test_loss /= static_cast<double>(dataset_size);
  const double accuracy = static_cast<double>(correct) / static_cast<double>(dataset_size);
  std::printf("Test set: Average loss: %.4f | Accuracy: %.3f\n", test_loss, accuracy);
  return {test_loss, accuracy};
}

// ---- the verdict (this example's output; a user need not copy it) ----------------------------

void print_verdict(mldiag::monitor& mon, const options& o, const epoch_result& last, std::pair<double, double> tested,
                   std::size_t steps, double seconds, double monitor_seconds) {
  mon.finish();  // the HTML report is written now; an error is an exception here
  std::printf("\n== verdict ==\n");
  std::printf("fault: %s", std::string(name(o.planted)).c_str());
  if (o.planted != fault::none) std::printf(" from step %lld", static_cast<long long>(o.onset));
  std::printf("\n");
  // The findings at warning and above (the baseline keeps them), one line per question and
  // symptom: the step it started, the step it was first reported (its last_step then), how
  // often, where first, by which detector.
  const mldiag::protocol::evidence_summary base = mon.baseline();
  std::map<std::pair<int, std::string>, std::tuple<std::int64_t, std::int64_t, int, std::string, std::string>> by_symptom;
  const mldiag::finding* first_after_onset = nullptr;
  int before_onset = 0;
  for (const auto& f : base.findings) {
    auto [it, fresh] = by_symptom.try_emplace({static_cast<int>(f.question), f.symptom}, f.first_step, f.last_step, 0,
                                              f.where.empty() ? std::string("-") : f.where.front().first, f.detector);
    ++std::get<2>(it->second);
    if (o.planted == fault::none) continue;
    if (f.first_step < o.onset) ++before_onset;
    else if (first_after_onset == nullptr) first_after_onset = &f;
  }
  // The monitor keeps the first 1,024 (a finding that holds is reported again each step: loss_spike).
  std::printf("findings (warning and above): %zu%s\n", base.findings.size(), base.findings.size() >= 1024 ? " (the first kept)" : "");
  for (const auto& [key, v] : by_symptom)
    std::printf("  %s | %s | first step %lld, reported at %lld | %d report(s) | at %s | detector %s\n",
                std::string(mldiag::name(static_cast<mldiag::question>(key.first))).c_str(), key.second.c_str(),
                static_cast<long long>(std::get<0>(v)), static_cast<long long>(std::get<1>(v)), std::get<2>(v),
                std::get<3>(v).c_str(), std::get<4>(v).c_str());
  if (o.planted != fault::none) {
    std::printf("before the onset: %d finding(s)\n", before_onset);
    if (first_after_onset != nullptr)
      std::printf("found: %s | %s | reported at step %lld, %lld step(s) after the onset\n",
                  std::string(mldiag::name(first_after_onset->question)).c_str(), first_after_onset->symptom.c_str(),
                  static_cast<long long>(first_after_onset->last_step),
                  static_cast<long long>(first_after_onset->last_step - o.onset));
    else
      std::printf("found: nothing from the onset on\n");
  }
  std::printf("open diagnoses: %zu\n", mon.open_diagnoses());
  for (std::size_t i = 0; i < mon.open_diagnoses(); ++i)
    std::printf("  %s: %s (step %lld)\n", std::string(mldiag::name(mon.opened_by(i).question)).c_str(),
                mon.opened_by(i).symptom.c_str(), static_cast<long long>(mon.opened_by(i).first_step));
  std::printf("final: train loss %.4f, accuracy %.3f (last epoch, dropout on) | test loss %.4f, accuracy %.3f\n",
              last.loss, last.accuracy, tested.first, tested.second);
  std::printf("time: %zu steps in %.1f s, %.2f ms/step of which the monitor's calls after optimizer.step() %.2f ms\n",
              steps, seconds, 1e3 * seconds / static_cast<double>(std::max<std::size_t>(steps, 1)),
              1e3 * monitor_seconds / static_cast<double>(std::max<std::size_t>(steps, 1)));
  std::printf("reports: %s, %s\n", o.jsonl.c_str(), o.html.c_str());
}

}  // namespace

int main(int argc, char** argv) try {
  options o = parse(argc, argv);
  // One thread: reproducible step for step, and CTest runs several programs on a few cores.
  torch::set_num_threads(1);
  torch::manual_seed(o.seed);
  torch::Device device(torch::kCPU);

  Net model;
  model.to(device);

  const std::string root = prepare_data(o);
  auto train_dataset = torch::data::datasets::MNIST(root)
                           .map(torch::data::transforms::Normalize<>(kMean, kStd))
                           .map(torch::data::transforms::Stack<>());
  const size_t train_dataset_size = std::min(train_dataset.size().value(), o.train_limit);
  // The example's SequentialSampler shows the batches in the same order every epoch; a
  // RandomSampler over the first train_dataset_size images shuffles them (seeded above).
  auto train_loader = torch::data::make_data_loader(std::move(train_dataset),
                                                    torch::data::samplers::RandomSampler(train_dataset_size),
                                                    torch::data::DataLoaderOptions().batch_size(kTrainBatchSize));

  auto test_dataset = torch::data::datasets::MNIST(root, torch::data::datasets::MNIST::Mode::kTest)
                          .map(torch::data::transforms::Normalize<>(kMean, kStd))
                          .map(torch::data::transforms::Stack<>());
  const size_t test_dataset_size = test_dataset.size().value();
  auto test_loader = torch::data::make_data_loader(std::move(test_dataset), kTestBatchSize);

  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));

  const auto steps_per_epoch = static_cast<std::int64_t>((train_dataset_size + kTrainBatchSize - 1) / kTrainBatchSize);
  if (o.onset < 0) o.onset = o.planted == fault::lr_x100 ? steps_per_epoch * static_cast<std::int64_t>(o.epochs) / 2 : 0;
  std::printf("Fashion-MNIST from %s: %zu training images (%lld steps an epoch), %zu test images; %zu epochs, seed %llu, fault %s",
              root.c_str(), train_dataset_size, static_cast<long long>(steps_per_epoch), test_dataset_size, o.epochs,
              static_cast<unsigned long long>(o.seed), std::string(name(o.planted)).c_str());
  if (o.planted != fault::none) std::printf(" from step %lld", static_cast<long long>(o.onset));
  std::printf("\n");

  mldiag::monitor mon({.task = {.classes = 10}});  // mldiag 9/15: the default detectors; 10 classes
  mldiag::report::attach_jsonl(mon, o.jsonl, "torch_fashion");  // mldiag 10/15: as the run goes
  mldiag::report::attach_html(mon, o.html, "torch_fashion");    // mldiag 11/15: at the end
  mon.attach(mldiag::report::console_sink(stdout));          // mldiag 12/15: once per episode
  mldiag::module_observer watch(model, model.tap);  // mldiag 13/15: and the tap's activations

  epoch_result last;
  std::pair<double, double> tested;
  std::int64_t step = 0;
  double seconds = 0, monitor_seconds = 0;
  for (size_t epoch = 1; epoch <= o.epochs; ++epoch) {
    last = train(epoch, model, device, *train_loader, optimizer, train_dataset_size, o, step, mon, watch);  // mldiag 14/15
    tested = test(model, device, *test_loader, test_dataset_size);
    mon.observe_evaluation(tested.first);  // mldiag 15/15: the test loss, at the epoch's last step
    seconds += last.seconds;
    monitor_seconds += last.monitor_seconds;
  }
  print_verdict(mon, o, last, tested, static_cast<std::size_t>(step), seconds, monitor_seconds);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
