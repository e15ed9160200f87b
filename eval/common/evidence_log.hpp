// SPDX-License-Identifier: Apache-2.0
/// The evidence of a monitored run, written to a file as it goes and replayed later through a
/// fresh monitor: the evaluation harnesses record their runs once and judge any later detector
/// layer on exactly the same evidence (a refactor must leave every finding as it was; a policy
/// change is measured on runs that took hours to train, in seconds).
///
/// A log holds what a monitor was told: its configuration (classes, from_checkpoint), the
/// training configuration it checked, every closed step's snapshot with the names it
/// interned, and evaluations. Beside it, a text file lists every finding the monitor
/// delivered, one line each with every field printed to 17 digits (`finding_line`); replaying
/// the log prints the same lines, so `diff` says whether two detector layers agree.
///
/// The format is this harness's own (native byte order, the statistics as their bytes): it is
/// read on the machine that wrote it, by the program built from this repository.
#pragma once

#include <mldiag/monitor.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace eval {

/// What a harness tells the monitor before the first step (the parts the zoo and the fault
/// suite use).
struct run_setup {
  mldiag::task task;
};

/// A run's description as a file name: letters, digits, '.', '-' and '_' kept, anything else '_'.
[[nodiscard]] inline std::string file_name(std::string_view description) {
  std::string s(description);
  for (char& c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_')) c = '_';
  return s;
}

/// One finding as a line of text: the step that delivered it (-1 before the first step), then
/// every field. Two runs agree on their findings when their lines are equal.
[[nodiscard]] inline std::string finding_line(std::int64_t step, const mldiag::finding& f) {
  std::string s;
  char buf[64];
  const auto num = [&](double v) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    s += buf;
  };
  s += std::to_string(step) + "\t" + f.detector + "\t" + f.symptom + "\t" + std::string(mldiag::name(f.severity)) + "\t" +
       std::string(mldiag::name(f.question)) + "\t" + std::to_string(f.first_step) + "\t" + std::to_string(f.last_step) +
       "\t" + f.consequence_of + "\t" + std::to_string(f.consequence_of_step) + "\twhere";
  for (const auto& [k, v] : f.where) {
    s += " " + k + "=";
    num(v);
  }
  s += "\tevidence";
  for (const auto& [k, v] : f.evidence) {
    s += " " + k + "=";
    num(v);
  }
  return s;
}

namespace detail {

inline constexpr char magic[8] = {'M', 'L', 'D', 'E', 'V', 'D', '1', '\n'};

template <class T>
void put(std::ostream& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class A, class B>
void put(std::ostream& out, const std::pair<A, B>& v) {
  put(out, v.first);
  put(out, v.second);
}
template <class T>
void put_vector(std::ostream& out, const std::vector<T>& v) {
  put(out, static_cast<std::uint64_t>(v.size()));
  for (const auto& x : v) put(out, x);
}
template <class T>
T get(std::istream& in) {
  static_assert(std::is_trivially_copyable_v<T>);
  T v;
  in.read(reinterpret_cast<char*>(&v), sizeof v);
  if (!in) throw std::runtime_error("mldiag: evidence log ends early; record the run again");
  return v;
}
template <class T>
void get_into(std::istream& in, T& v) {
  v = get<T>(in);
}
template <class A, class B>
void get_into(std::istream& in, std::pair<A, B>& v) {
  v.first = get<A>(in);
  v.second = get<B>(in);
}
template <class T>
void get_vector(std::istream& in, std::vector<T>& v) {
  const auto n = get<std::uint64_t>(in);
  if (n > (std::uint64_t{1} << 32)) throw std::runtime_error("mldiag: evidence log is corrupt (a vector of " + std::to_string(n) + " entries)");
  v.resize(static_cast<std::size_t>(n));
  for (auto& x : v) get_into(in, x);
}
inline void put_optional(std::ostream& out, const std::optional<double>& v) {
  put(out, static_cast<std::uint8_t>(v.has_value()));
  put(out, v.value_or(0.0));
}
inline std::optional<double> get_optional(std::istream& in) {
  const bool has = get<std::uint8_t>(in) != 0;
  const double v = get<double>(in);
  return has ? std::optional<double>(v) : std::nullopt;
}

// The snapshot's scalars, in one order for writing and reading: each as a flag and a value.
template <class Snapshot, class F>
void each_scalar(Snapshot& s, F&& f) {
  for (auto* v : {&s.loss, &s.val_loss, &s.lr, &s.loss_scale, &s.grad_norm, &s.grad_cosine, &s.grad_increment_cosine}) f(*v);
}

// Timings, memory and efficiency as doubles, absent as NaN (the log's first format, kept).
inline std::array<double, 6> flat(const mldiag::step_timings& t) {
  const auto v = [](const std::optional<double>& x) { return x.value_or(std::numeric_limits<double>::quiet_NaN()); };
  return {v(t.data_wait), v(t.forward), v(t.backward), v(t.optimizer), v(t.communication), v(t.total)};
}
inline std::array<double, 8> flat(const mldiag::memory_evidence& m) {
  const auto v = [](const std::optional<double>& x) { return x.value_or(std::numeric_limits<double>::quiet_NaN()); };
  return {v(m.allocated), v(m.reserved), v(m.peak), v(m.capacity), v(m.largest_free_block), v(m.used), v(m.host_rss), v(m.host_rss_peak)};
}
inline std::array<double, 6> flat(const mldiag::efficiency_evidence& e) {
  const auto v = [](const std::optional<double>& x) { return x.value_or(std::numeric_limits<double>::quiet_NaN()); };
  return {v(e.mfu), v(e.tensor_core_activity), v(e.throughput), v(e.throughput_target), v(e.communication_bytes), v(e.link_bandwidth)};
}
inline std::optional<double> present(double x) { return std::isnan(x) ? std::nullopt : std::optional<double>(x); }
inline mldiag::step_timings timings_from(const std::array<double, 6>& a) {
  return {present(a[0]), present(a[1]), present(a[2]), present(a[3]), present(a[4]), present(a[5])};
}
inline mldiag::memory_evidence memory_from(const std::array<double, 8>& a) {
  return {present(a[0]), present(a[1]), present(a[2]), present(a[3]), present(a[4]), present(a[5]), present(a[6]), present(a[7])};
}
inline mldiag::efficiency_evidence efficiency_from(const std::array<double, 6>& a) {
  return {present(a[0]), present(a[1]), present(a[2]), present(a[3]), present(a[4]), present(a[5])};
}

}  // namespace detail

/// Writes a run's evidence log and its findings file as the monitor runs. Attach it before
/// the first step; call `configured` with what the harness told the monitor.
class evidence_writer final : public mldiag::monitor_sink {
 public:
  evidence_writer(const std::string& log_path, const std::string& findings_path)
      : log_(log_path, std::ios::binary), findings_(findings_path) {
    if (!log_ || !findings_) throw std::runtime_error("mldiag: cannot write " + log_path + " or " + findings_path);
    log_.write(detail::magic, sizeof detail::magic);
  }
  /// The monitor's setup, written first (before any step).
  void configured(const run_setup& r) {
    // The first format's fields: the monitor's classes and start, then the training
    // configuration a harness checked (flag set), which the task holds now.
    const mldiag::task& t = r.task;
    detail::put(log_, static_cast<double>(t.classes));
    detail::put(log_, static_cast<std::uint8_t>(t.from_checkpoint));
    const bool checked = t.learning_rate || t.max_grad_norm || t.full_batch;
    detail::put(log_, static_cast<std::uint8_t>(checked));
    detail::put_optional(log_, t.learning_rate);
    detail::put_optional(log_, checked && t.classes > 0 ? std::optional<double>(static_cast<double>(t.classes)) : std::nullopt);
    detail::put_optional(log_, t.max_grad_norm);
    detail::put(log_, static_cast<std::uint8_t>(t.full_batch));
  }
  /// A finding delivered outside a step (check_configuration's), at step -1.
  void on_finding(const mldiag::finding& f) override { findings_ << finding_line(step_, f) << '\n'; }
  void on_step(const mldiag::snapshot& s, const mldiag::name_table& names) override {
    step_ = s.step;
    for (; known_ < names.size(); ++known_) {
      const auto n = names[static_cast<std::uint32_t>(known_)];
      log_.put('N');
      detail::put(log_, static_cast<std::uint64_t>(n.size()));
      log_.write(n.data(), static_cast<std::streamsize>(n.size()));
    }
    log_.put('S');
    detail::put(log_, s.step);
    detail::each_scalar(s, [&](const std::optional<double>& v) {
      detail::put(log_, static_cast<std::uint8_t>(v.has_value()));
      detail::put(log_, v.value_or(std::numeric_limits<double>::quiet_NaN()));
    });
    for (const auto r : mldiag::all_roles) detail::put_vector(log_, s.of(r));
    detail::put_vector(log_, s.drift);
    detail::put_vector(log_, s.attention);
    detail::put_vector(log_, s.routers);
    detail::put(log_, detail::flat(s.timings));
    detail::put_vector(log_, s.layer_times);
    detail::put(log_, detail::flat(s.memory));
    detail::put(log_, detail::flat(s.efficiency));
    detail::put_vector(log_, s.rank_step_times);
  }
  void on_evaluation(const mldiag::snapshot& s, const mldiag::name_table&) override {
    step_ = s.step;  // the findings it raises are delivered at that step
    log_.put('E');
    detail::put(log_, s.step);
    detail::put(log_, s.val_loss.value_or(std::numeric_limits<double>::quiet_NaN()));
  }
  void on_finish(const mldiag::monitor&) override {
    log_.flush();
    findings_.flush();
  }

 private:
  std::ofstream log_;
  std::ofstream findings_;
  std::size_t known_ = 0;
  std::int64_t step_ = -1;
};

/// Replays an evidence log through a fresh monitor built the way the harness built its own,
/// and returns the finding lines it delivered (as `evidence_writer` wrote them).
[[nodiscard]] inline std::vector<std::string> replay(const std::string& log_path) {
  std::ifstream in(log_path, std::ios::binary);
  if (!in) throw std::runtime_error("mldiag: cannot read " + log_path);
  char m[sizeof detail::magic];
  in.read(m, sizeof m);
  if (!in || std::memcmp(m, detail::magic, sizeof m) != 0)
    throw std::runtime_error("mldiag: " + log_path + " is not an evidence log (no MLDEVD1 header)");
  mldiag::task t;
  t.classes = static_cast<std::size_t>(detail::get<double>(in));
  t.from_checkpoint = detail::get<std::uint8_t>(in) != 0;
  const bool checked = detail::get<std::uint8_t>(in) != 0;
  const auto learning_rate = detail::get_optional(in);
  (void)detail::get_optional(in);  // the checked configuration's classes: the monitor's, above
  const auto max_grad_norm = detail::get_optional(in);
  const bool full_batch = detail::get<std::uint8_t>(in) != 0;
  if (checked) {
    t.learning_rate = learning_rate;
    t.max_grad_norm = max_grad_norm;
    t.full_batch = full_batch;
  }

  std::vector<std::string> lines;
  std::int64_t step = -1;
  // As evidence_writer numbers them: by the last step a sink saw close (-1 before the first).
  struct collect final : mldiag::monitor_sink {
    std::vector<std::string>* lines;
    std::int64_t* step;
    void on_step(const mldiag::snapshot& s, const mldiag::name_table&) override { *step = s.step; }
    void on_evaluation(const mldiag::snapshot& s, const mldiag::name_table&) override { *step = s.step; }
    void on_finding(const mldiag::finding& f) override { lines->push_back(finding_line(*step, f)); }
  };
  mldiag::monitor mon({.task = t});
  auto sink = std::make_unique<collect>();
  sink->lines = &lines;
  sink->step = &step;
  mon.attach(std::move(sink));

  std::vector<std::string> pending_names;
  mldiag::snapshot recorded;
  mon.set_step_hook([&](mldiag::snapshot& s, mldiag::name_table& names) {
    for (const auto& n : pending_names) (void)names.intern(n);
    pending_names.clear();
    s = recorded;
  });
  for (int tag = in.get(); tag != std::char_traits<char>::eof(); tag = in.get()) {
    if (tag == 'N') {
      const auto n = detail::get<std::uint64_t>(in);
      std::string name(static_cast<std::size_t>(n), '\0');
      in.read(name.data(), static_cast<std::streamsize>(n));
      pending_names.push_back(std::move(name));
    } else if (tag == 'S') {
      recorded.clear(detail::get<std::int64_t>(in));
      detail::each_scalar(recorded, [&](std::optional<double>& v) {
        const bool has = detail::get<std::uint8_t>(in) != 0;
        const double x = detail::get<double>(in);
        v.reset();
        if (has) v = x;
      });
      for (const auto r : mldiag::all_roles) detail::get_vector(in, recorded.of(r));
      detail::get_vector(in, recorded.drift);
      detail::get_vector(in, recorded.attention);
      detail::get_vector(in, recorded.routers);
      recorded.timings = detail::timings_from(detail::get<std::array<double, 6>>(in));
      detail::get_vector(in, recorded.layer_times);
      recorded.memory = detail::memory_from(detail::get<std::array<double, 8>>(in));
      recorded.efficiency = detail::efficiency_from(detail::get<std::array<double, 6>>(in));
      detail::get_vector(in, recorded.rank_step_times);
      mon.begin_step(recorded.step);
      (void)mon.end_step();
    } else if (tag == 'E') {
      const auto at = detail::get<std::int64_t>(in);
      const auto v = detail::get<double>(in);
      (void)mon.observe_evaluation(at, v);
    } else {
      throw std::runtime_error("mldiag: " + log_path + " is corrupt (record tag " + std::to_string(tag) + ")");
    }
  }
  mon.finish();
  return lines;
}

}  // namespace eval
