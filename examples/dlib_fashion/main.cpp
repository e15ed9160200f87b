// SPDX-License-Identifier: Apache-2.0
// dlib's dnn_trainer trains a LeNet on Fashion-MNIST with an mldiag monitor embedded in the
// loop, and the program sets mldiag's verdict beside dlib's own (its plateau logic, which
// lowers the learning rate when the loss stops falling). A trainer nobody here wrote: its
// loop, worker thread and learning-rate schedule live in dlib's headers; mldiag sees it only
// through what dlib offers (train_one_step, get_average_loss, get_learning_rate, the layer
// visitors). Plant a fault with --fault NAME; --table runs the five healthy seeds and the
// faults and prints the comparison; --check makes the exit code the verdict (CTest).
#include "../common/faults.hpp"
#include "../common/verdict.hpp"

#include <mldiag/adapters/dlib.hpp>
#include <mldiag/monitor.hpp>

#include <dlib/dnn.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

// The LeNet of dlib's dnn_introduction_ex.cpp, unchanged. con's padding is "same" at stride 1:
// 28x28x6 -> pool 14x14 -> 14x14x16 -> pool 7x7 -> 120 -> 84 -> 10. dlib's layer indices
// (`cout << net`): 1 fc10, 3 fc84, 5 fc120, 8 con16, 11 con6; 0 is the loss, 12 the input.
// dlib's own layout, a layer a line, as dnn_introduction_ex writes it.
// clang-format off
using lenet = dlib::loss_multiclass_log<
                  dlib::fc<10,
                  dlib::relu<dlib::fc<84,
                  dlib::relu<dlib::fc<120,
                  dlib::max_pool<2, 2, 2, 2, dlib::relu<dlib::con<16, 5, 5, 1, 1,
                  dlib::max_pool<2, 2, 2, 2, dlib::relu<dlib::con<6, 5, 5, 1, 1,
                  dlib::input<dlib::matrix<unsigned char>>>>>>>>>>>>>>;
// clang-format on
constexpr std::size_t frozen_layer_index = 8;  // the frozen_layer fault: the second convolution
constexpr const char* frozen_layer_name = "layer8.con";
constexpr double base_lr = 0.01;  // dnn_introduction_ex's rate (dnn_trainer's default too)

struct images {
  std::vector<dlib::matrix<unsigned char>>
      x;  // 28x28 pixels, 0-255 (dlib's input layer divides by 256)
  std::vector<unsigned long> y;
};

// The first `bytes` bytes of a gzipped file (all of it if shorter): the subset needs only the
// head of each IDX file.
std::vector<unsigned char> read_gz(const std::string& path, std::size_t bytes) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr)
    throw std::runtime_error("mldiag: cannot read " + path +
                             "; apt-get install dataset-fashion-mnist");
  std::vector<unsigned char> out(bytes);
  std::size_t got = 0;
  int n = 0;
  while (got < bytes &&
         (n = gzread(f, out.data() + got,
                     static_cast<unsigned>(std::min<std::size_t>(bytes - got, 1 << 20)))) > 0)
    got += static_cast<std::size_t>(n);
  gzclose(f);
  if (n < 0)
    throw std::runtime_error("mldiag: " + path +
                             " is not a readable gzip file; reinstall dataset-fashion-mnist");
  out.resize(got);
  return out;
}

std::uint32_t big_endian(const std::vector<unsigned char>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) |
         (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

// The first `limit` images of an IDX pair (gzipped, as Debian ships them).
images load_idx(const std::string& dir, const std::string& stem, std::size_t limit) {
  const auto im = read_gz(dir + stem + "-images-idx3-ubyte.gz", 16 + limit * 784);
  const auto lb = read_gz(dir + stem + "-labels-idx1-ubyte.gz", 8 + limit);
  if (im.size() < 16 || big_endian(im, 0) != 2051 || lb.size() < 8 || big_endian(lb, 0) != 2049 ||
      big_endian(im, 8) != 28 || big_endian(im, 12) != 28)
    throw std::runtime_error("mldiag: " + dir + stem +
                             "-*.gz are not 28x28 IDX files; reinstall dataset-fashion-mnist");
  const std::size_t n = std::min<std::size_t>(limit, big_endian(im, 4));
  if (im.size() < 16 + n * 784 || lb.size() < 8 + n)
    throw std::runtime_error(
        "mldiag: " + dir + stem +
        "-*.gz are shorter than their headers say; reinstall dataset-fashion-mnist");
  images out;
  out.x.resize(n);
  out.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    out.x[i].set_size(28, 28);
    std::copy_n(im.begin() + static_cast<std::ptrdiff_t>(16 + i * 784), 784, &out.x[i](0, 0));
    out.y[i] = lb[8 + i];
  }
  return out;
}

struct options {
  examples::fault planted = examples::fault::none;
  std::int64_t onset = -1;  // -1: the fault's default (from the start, or steps / 3)
  std::uint64_t seed = 1;
  std::int64_t steps = 600;
  std::size_t batch = 64, train = 12000, test = 1000;
  unsigned long dlib_threshold = 200;  // dnn_trainer's iterations-without-progress threshold
  bool table = false, check = false, plain = false;
  std::string data = "/usr/share/datasets/fashion-mnist/";
  [[nodiscard]] std::int64_t onset_step() const {
    if (onset >= 0) return onset;
    return examples::info(planted).from_start ? 0 : steps / 3;
  }
};

// What one run shows: mldiag's findings, dlib's own reactions, and how it went.
struct result {
  options o;
  std::vector<examples::seen_finding> findings;  // warning and above, in order
  std::size_t infos = 0, diagnoses = 0;          // info findings; diagnoses the findings opened
  std::vector<std::int64_t> dlib_lr_drops;  // steps after which dnn_trainer lowered the rate itself
  unsigned long dlib_max_without_progress = 0, dlib_final_without_progress = 0;
  double first_lr = 0, final_lr = 0, min_lr = 0;
  double first_loss = 0, final_loss = 0;  // the first step's; the mean of the last 20
  double test_accuracy = 0, seconds = 0, monitor_seconds = 0;
  std::vector<double> losses;
};

// Mini-batches in a fresh random order each epoch (dlib's own train() takes the data in the
// order given; dnn_introduction2_ex's train_one_step loop draws random images).
class batches {
 public:
  batches(const images& d, std::size_t batch, std::uint64_t seed)
      : d_(d), batch_(batch), rng_(seed), order_(d.x.size()) {
    std::iota(order_.begin(), order_.end(), std::size_t{0});
  }
  void next(std::vector<dlib::matrix<unsigned char>>& x, std::vector<unsigned long>& y) {
    x.clear();
    y.clear();
    while (x.size() < batch_) {
      if (at_ == 0) std::shuffle(order_.begin(), order_.end(), rng_);
      x.push_back(d_.x[order_[at_]]);
      y.push_back(d_.y[order_[at_]]);
      at_ = (at_ + 1) % order_.size();
    }
  }

 private:
  const images& d_;
  std::size_t batch_, at_ = 0;
  std::mt19937_64 rng_;
  std::vector<std::size_t> order_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The faults planted during the run: the learning rate x100 from the onset (a schedule or a
// config typo), or one layer frozen from the onset (its learning-rate multiplier set to 0: a
// freeze for fine-tuning aimed at the wrong layer index, or never lifted). labels_shuffled is
// planted in the data before the run.
void plant(const options& o, std::int64_t step, dlib::dnn_trainer<lenet>& trainer, lenet& net) {
  if (step != o.onset_step()) return;
  if (o.planted == examples::fault::lr_100x)
    trainer.set_learning_rate(100 * trainer.get_learning_rate());
  if (o.planted == examples::fault::frozen_layer)
    dlib::layer<frozen_layer_index>(net).layer_details().set_learning_rate_multiplier(0);
}

// A step's findings: warning and above kept, info counted.
void keep(result& r, std::int64_t step, const mldiag::finding& f) {
  if (f.severity >= mldiag::severity::warning)
    r.findings.push_back({step, f});
  else
    ++r.infos;
}

// dlib's own verdict after a step: did its plateau logic lower the rate, and how many steps
// has it counted without progress?
void watch_dlib(result& r, const dlib::dnn_trainer<lenet>& trainer, double lr, double loss) {
  if (trainer.get_learning_rate() < lr)
    r.dlib_lr_drops.push_back(static_cast<std::int64_t>(r.losses.size()));
  r.dlib_max_without_progress =
      std::max(r.dlib_max_without_progress, trainer.get_steps_without_progress());
  r.losses.push_back(loss);
}

result train(const options& o, images data, const images& test) {
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  result r;
  r.o = o;
  std::srand(static_cast<unsigned>(o.seed));  // dlib initializes its layers from std::rand()
  std::mt19937_64 rng(o.seed);
  // labels_shuffled: the labels shuffled apart from their images (a pipeline that shuffles
  // two parallel vectors with two different random draws).
  if (o.planted == examples::fault::labels_shuffled)
    std::shuffle(data.y.begin(), data.y.end(), rng);

  lenet net;
  dlib::dnn_trainer<lenet> trainer(net);  // dlib's defaults: SGD, momentum 0.9, weight decay 5e-4
  trainer.set_learning_rate(base_lr);
  trainer.set_min_learning_rate(1e-5);
  trainer.set_iterations_without_progress_threshold(o.dlib_threshold);
  r.min_lr = trainer.get_min_learning_rate();
  batches feed(data, o.batch, o.seed + 1000);
  std::vector<dlib::matrix<unsigned char>> x;
  std::vector<unsigned long> y;

  // [walkthrough]
  mldiag::monitor mon({.task = {.classes = 10}});  // the default detectors; 10 classes: the ln(10) checks
  mldiag::dlib_layers layers;  // names "layer1.fc" ... "layer11.con": dlib's layer index, type
  for (std::int64_t step = 0; step < o.steps; ++step) {
    plant(o, step, trainer, net);  // the planted fault, if any
    feed.next(x, y);
    const double lr = trainer.get_learning_rate();  // this step's rate: dlib's thread is idle
    trainer.train_one_step(x, y);
    const double loss = trainer.get_average_loss();  // waits for dlib's thread: step applied
    trainer.clear_average_loss();  // so that the next read is the next step's loss alone
    const auto t0 = clock::now();  // (what the monitor costs, for the table)
    mon.observe(mldiag::scalar::learning_rate, lr);
    mon.observe(mldiag::scalar::loss, loss);
    // Every layer's parameters and gradients; get_net waits too, and skips the disk sync.
    layers.observe(mon, trainer.get_net(dlib::force_flush_to_disk::no));
    for (const auto& f : mon.end_step())
      keep(r, step, f);
    r.monitor_seconds += seconds_since(t0);
    watch_dlib(r, trainer, lr, loss);  // dlib's own verdict, for the comparison
  }
  // [walkthrough]
  r.diagnoses = mon.open_diagnoses();
  r.first_lr = base_lr;
  r.final_lr = trainer.get_learning_rate();
  r.dlib_final_without_progress = trainer.get_steps_without_progress();
  r.first_loss = r.losses.front();
  const std::size_t tail = std::min<std::size_t>(20, r.losses.size());
  r.final_loss =
      std::accumulate(r.losses.end() - static_cast<std::ptrdiff_t>(tail), r.losses.end(), 0.0) /
      static_cast<double>(tail);
  const std::vector<unsigned long> predicted = trainer.get_net()(test.x);
  std::size_t right = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i)
    right += predicted[i] == test.y[i] ? 1u : 0u;
  r.test_accuracy =
      static_cast<double>(right) / static_cast<double>(std::max<std::size_t>(1, predicted.size()));
  r.seconds = seconds_since(t_start);
  return r;
}

// The same training without mldiag: dlib's own loop, where train_one_step returns as soon as
// dlib's thread has taken the batch, so the next batch is converted while this one trains.
// Its time against train()'s is what the embedding costs, the per-step wait included.
double train_plain_seconds(const options& o, const images& data) {
  const auto t0 = std::chrono::steady_clock::now();
  std::srand(static_cast<unsigned>(o.seed));
  lenet net;
  dlib::dnn_trainer<lenet> trainer(net);
  trainer.set_learning_rate(base_lr);
  trainer.set_min_learning_rate(1e-5);
  trainer.set_iterations_without_progress_threshold(o.dlib_threshold);
  batches feed(data, o.batch, o.seed + 1000);
  std::vector<dlib::matrix<unsigned char>> x;
  std::vector<unsigned long> y;
  for (std::int64_t step = 0; step < o.steps; ++step) {
    feed.next(x, y);
    trainer.train_one_step(x, y);
  }
  trainer.get_net();  // waits for the last step
  return seconds_since(t0);
}

examples::expectation expected(const options& o) {
  examples::expectation e;
  e.healthy = o.planted == examples::fault::none;
  e.onset = o.onset_step();
  e.expected = examples::info(o.planted).expected;
  e.has_layer = o.planted == examples::fault::frozen_layer;
  if (e.has_layer) e.layer = frozen_layer_name;
  return e;
}

// The first finding of `q` at or after the onset from the run's own state (loss, gradients,
// parameters), not from the learning rate: lr_x100's first finding is lr_sanity seeing the
// planted change itself, which the loop observes; what the change does to the run comes next.
const examples::seen_finding* first_effect(const result& r, mldiag::question q) {
  for (const auto& s : r.findings)
    if (s.step >= r.o.onset_step() && s.f.question == q && s.f.detector != "lr_sanity") return &s;
  return nullptr;
}

// Whether a run shows what it should: a healthy run nothing at warning or above; a faulty one
// its question first from the onset on (in the planted layer where it has one), nothing
// before it, and, where the first finding read the learning rate, the question's finding on
// the run's own evidence within 10 steps.
bool as_expected(const result& r) {
  const auto v = examples::judge(r.findings, expected(r.o));
  if (r.o.planted == examples::fault::none) return v.healthy_alarms == 0;
  if (!(v.detected && v.right_question && v.alarms_before_onset == 0 && v.top1.value_or(true)))
    return false;
  if (v.detector != "lr_sanity") return true;
  const auto* e = first_effect(r, expected(r.o).expected);
  return e != nullptr && e->step - r.o.onset_step() <= 10;
}

std::string run_name(const options& o) {
  if (o.planted == examples::fault::none) return "healthy seed " + std::to_string(o.seed);
  return std::string(examples::info(o.planted).name) + " from step " +
         std::to_string(o.onset_step()) + " (seed " + std::to_string(o.seed) + ")";
}

std::string by_question(const result& r) {
  std::size_t n[3] = {0, 0, 0};
  for (const auto& s : r.findings)
    ++n[static_cast<int>(s.f.question) - 1];
  return "Q1 " + std::to_string(n[0]) + ", Q2 " + std::to_string(n[1]) + ", Q3 " +
         std::to_string(n[2]);
}

std::string mldiag_verdict(const result& r) {
  const auto v = examples::judge(r.findings, expected(r.o));
  if (r.o.planted == examples::fault::none)
    return v.healthy_alarms == 0
               ? "quiet"
               : std::to_string(v.healthy_alarms) + " finding(s), first " + v.false_alarm;
  if (!v.detected) return "missed";
  std::string s = v.question.substr(0, 2) + " " + v.symptom +
                  (v.location.empty() ? "" : " at " + v.location) + ", +" +
                  std::to_string(v.steps_to_detect) + " steps";
  if (v.detector == "lr_sanity") {
    if (const auto* e = first_effect(r, expected(r.o).expected))
      s += "; then " + std::string(mldiag::name(e->f.question)).substr(0, 2) + " " + e->f.symptom +
           (e->f.where.empty() ? "" : " at " + e->f.where.front().first) + ", +" +
           std::to_string(e->step - r.o.onset_step());
  }
  if (v.alarms_before_onset > 0)
    s += "; " + std::to_string(v.alarms_before_onset) + " before onset, first " + v.false_alarm;
  return s;
}

std::string dlib_verdict(const result& r) {
  std::string s;
  if (r.dlib_lr_drops.empty()) {
    s = "no reaction";
  } else {
    s = "lowered lr x" + std::to_string(r.dlib_lr_drops.size()) + " (first after step " +
        std::to_string(r.dlib_lr_drops.front()) + ")";
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, "; final lr %.3g; steps w/o progress %lu (max %lu)%s",
                r.final_lr, r.dlib_final_without_progress, r.dlib_max_without_progress,
                r.final_lr < r.min_lr ? "; below min lr: train() would stop" : "");
  return s + tail;
}

void print_run(const result& r) {
  std::printf("run: %s, %lld steps of %zu images from %zu training images\n", run_name(r.o).c_str(),
              static_cast<long long>(r.o.steps), r.o.batch, r.o.train);
  std::printf(
      "loss: first %.4f, last 20 steps %.4f; test accuracy %.3f on %zu images; %.1f s (monitor "
      "%.2f s)\n",
      r.first_loss, r.final_loss, r.test_accuracy, r.o.test, r.seconds, r.monitor_seconds);
  std::printf("mldiag: findings (warning and above): %zu; info: %zu\n", r.findings.size(), r.infos);
  for (mldiag::question q : {mldiag::question::convergence, mldiag::question::early_anomaly,
                             mldiag::question::efficiency}) {
    std::size_t n = 0;
    for (const auto& s : r.findings)
      n += s.f.question == q ? 1u : 0u;
    std::printf("  %s: %zu\n", std::string(mldiag::name(q)).c_str(), n);
    std::size_t shown = 0;
    for (const auto& s : r.findings)
      if (s.f.question == q && shown++ < 8) {
        std::printf("  ");
        examples::print_finding(stdout, s);
      }
    if (shown > 8) std::printf("    ... and %zu more\n", shown - 8);
  }
  // The two verdicts side by side: what each saw first, when, and what it does about it.
  const bool any = !r.findings.empty();
  const auto& first = any ? r.findings.front() : examples::seen_finding{};
  const std::string m_saw =
      !any ? "nothing"
           : std::string(mldiag::name(first.f.question)).substr(0, 2) + " " + first.f.symptom;
  const std::string d_saw =
      r.dlib_lr_drops.empty() ? "nothing" : "loss not decreasing (its plateau test)";
  const std::string m_when = any ? "step " + std::to_string(first.step) : "-";
  const std::string d_when =
      r.dlib_lr_drops.empty() ? "-" : "step " + std::to_string(r.dlib_lr_drops.front());
  const std::string m_does = any ? std::to_string(r.findings.size()) + " findings (" +
                                       by_question(r) + "), " + std::to_string(r.diagnoses) +
                                       " diagnoses opened in phase 1"
                                 : "-";
  char d_does[96];
  std::snprintf(d_does, sizeof d_does, "%s; lr %.3g -> %.3g",
                r.dlib_lr_drops.empty() ? "keeps going" : "lowers the lr x0.1",
                r.o.planted == examples::fault::lr_100x ? 100 * r.first_lr : r.first_lr,
                r.final_lr);
  std::printf("%-12s | %-66s | %s\n", "", "mldiag monitor", "dlib dnn_trainer");
  std::printf("%-12s | %-66s | %s\n", "first sign", m_saw.c_str(), d_saw.c_str());
  std::printf("%-12s | %-66s | %s\n", "when", m_when.c_str(), d_when.c_str());
  std::printf("%-12s | %-66s | %s\n", "what it does", m_does.c_str(), d_does);
  std::printf("mldiag verdict: %s\n", mldiag_verdict(r).c_str());
  std::printf("dlib verdict: %s\n", dlib_verdict(r).c_str());
  std::printf(
      "verdict: %s%s\n", as_expected(r) ? "as expected" : "NOT as expected",
      r.o.planted == examples::fault::none
          ? " (healthy: nothing at warning or above)"
          : (" (" + std::string(mldiag::name(expected(r.o).expected)) + " expected)").c_str());
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "mldiag: %s\nusage: mldiag_dlib_fashion [--fault "
               "none|lr_100x|labels_shuffled|frozen_layer] [--onset STEP] "
               "[--seed N] [--steps N] [--batch N] [--train N] [--test N] [--dlib-threshold N] "
               "[--data DIR] [--table] "
               "[--plain] [--check]\n",
               why.c_str());
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  auto number = [&](const char* flag, const char* text) -> std::uint64_t {
    char* end = nullptr;
    const long long v = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < 0)
      usage(std::string(flag) + " wants a whole number >= 0, not '" + text + "'");
    return static_cast<std::uint64_t>(v);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--table")
      o.table = true;
    else if (a == "--plain")
      o.plain = true;
    else if (a == "--check")
      o.check = true;
    else if (a == "--help" || a == "-h")
      usage("help");
    else if (i + 1 >= argc)
      usage("flag " + std::string(a) + " needs a value (or is unknown)");
    else if (a == "--fault") {
      const auto f = examples::parse_fault(argv[++i]);
      if (!f || (*f != examples::fault::none && *f != examples::fault::lr_100x &&
                 *f != examples::fault::labels_shuffled && *f != examples::fault::frozen_layer))
        usage(std::string(
                  "this example plants none, lr_100x, labels_shuffled or frozen_layer, not '") +
              argv[i] + "'");
      o.planted = *f;
    } else if (a == "--onset")
      o.onset = static_cast<std::int64_t>(number("--onset", argv[++i]));
    else if (a == "--seed")
      o.seed = number("--seed", argv[++i]);
    else if (a == "--steps")
      o.steps = static_cast<std::int64_t>(number("--steps", argv[++i]));
    else if (a == "--batch")
      o.batch = number("--batch", argv[++i]);
    else if (a == "--train")
      o.train = number("--train", argv[++i]);
    else if (a == "--test")
      o.test = number("--test", argv[++i]);
    else if (a == "--dlib-threshold")
      o.dlib_threshold = number("--dlib-threshold", argv[++i]);
    else if (a == "--data")
      o.data = std::string(argv[++i]) + "/";
    else
      usage("unknown flag " + std::string(a));
  }
  if (o.steps < 1 || o.batch < 1 || o.train < o.batch || o.test < 1)
    usage("--steps, --batch, --test >= 1 and --train >= --batch");
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const options o = parse(argc, argv);
  const images data = load_idx(o.data, "train", o.train), test = load_idx(o.data, "t10k", o.test);
  if (o.plain) {
    std::printf("dlib alone (no monitor, seed %llu): %.1f s for %lld steps\n",
                static_cast<unsigned long long>(o.seed), train_plain_seconds(o, data),
                static_cast<long long>(o.steps));
    return 0;
  }
  if (!o.table) {
    const result r = train(o, data, test);
    print_run(r);
    return o.check && !as_expected(r) ? 1 : 0;
  }
  // The comparison: five healthy seeds, then each fault (seed 1), as one markdown table.
  std::vector<options> runs;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    options h = o;
    h.planted = examples::fault::none;
    h.seed = seed;
    runs.push_back(h);
  }
  for (auto f : {examples::fault::lr_100x, examples::fault::labels_shuffled,
                 examples::fault::frozen_layer}) {
    options p = o;
    p.planted = f;
    runs.push_back(p);
  }
  const double plain = train_plain_seconds(o, data);
  std::printf("dlib alone (no monitor, seed %llu): %.1f s for %lld steps\n",
              static_cast<unsigned long long>(o.seed), plain, static_cast<long long>(o.steps));
  std::fflush(stdout);
  std::vector<result> results;
  for (const auto& run : runs) {
    results.push_back(train(run, data, test));
    print_run(results.back());
    std::fflush(stdout);
  }
  std::printf(
      "\n| run | mldiag: first finding (warning and above) | findings | dlib dnn_trainer | final "
      "loss | test acc | time (monitor) | as expected |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  bool all = true;
  for (const auto& r : results) {
    all = all && as_expected(r);
    std::printf("| %s | %s | %s | %s | %.3f | %.3f | %.1f s (%.2f s) | %s |\n",
                run_name(r.o).c_str(), mldiag_verdict(r).c_str(), by_question(r).c_str(),
                dlib_verdict(r).c_str(), r.final_loss, r.test_accuracy, r.seconds,
                r.monitor_seconds, as_expected(r) ? "yes" : "no");
  }
  return o.check && !all ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
