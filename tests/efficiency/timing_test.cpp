// SPDX-License-Identifier: Apache-2.0
// Step-phase timing and the layer profiler: real sleeps (lower bounds strict, upper bounds
// loose, so a loaded CI machine cannot make them flake), exact arithmetic through a clock the
// test advances by hand, misuse errors, no allocation after the first step, and a planted
// slow layer found by the monitor's layer_dominates detector.
#include <doctest/doctest.h>

#include "mldiag/efficiency/profiler.hpp"
#include "mldiag/efficiency/timing.hpp"
#include "mldiag/monitor.hpp"

#include "../support/count_allocations.hpp"

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

namespace {

using mldiag::efficiency::pass;
using mldiag::efficiency::phase;
using mldiag::efficiency::substructure;

// A clock the test moves by hand. Ticks of 1/1024 s: every time and every sum of them is
// exact in binary floating point, so the roll-ups can be checked with ==.
struct manual_clock {
  using rep = std::int64_t;
  using period = std::ratio<1, 1024>;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<manual_clock>;
  static constexpr bool is_steady = true;
  static inline time_point t{};
  static time_point now() noexcept { return t; }
  static void advance(rep ticks) noexcept { t += duration(ticks); }
};
constexpr double tick = 1.0 / 1024.0;

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Busy-waits (a sleeping layer would leave the CPU; a slow layer keeps it).
void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

TEST_CASE("step_timer: phases measured against known sleeps") {
  mldiag::efficiency::step_timer timer;
  timer.begin_step();
  timer.mark(phase::data_wait);
  sleep_ms(20);
  timer.mark(phase::forward);
  sleep_ms(10);
  {
    auto g = timer.scope(phase::backward);
    sleep_ms(15);
    {
      auto c = timer.scope(phase::communication);  // nested: taken out of backward
      sleep_ms(5);
    }
    CHECK(timer.current() == phase::backward);
  }
  CHECK(timer.current() == phase::forward);  // the guard restored the phase before it
  timer.mark(phase::optimizer);
  sleep_ms(5);
  const auto t = timer.end_step();
  // sleep_for sleeps at least as long as asked: lower bounds are strict.
  CHECK(t.data_wait >= 0.020);
  CHECK(t.forward >= 0.010);
  CHECK(t.backward >= 0.015);
  CHECK(t.communication >= 0.005);
  CHECK(t.optimizer >= 0.005);
  CHECK(t.total >= 0.055);
  // Loose upper bounds: a preempted CI machine may oversleep, not by a second.
  CHECK(t.data_wait < 1.0);
  CHECK(t.total < 5.0);
  // Every instant belongs to one phase: the phases (other included) add up to the total.
  const auto& all = timer.last_step();
  double sum = 0.0;
  for (double s : all.seconds)
    sum += s;
  CHECK(sum == doctest::Approx(t.total.value()).epsilon(1e-12));
  CHECK(all[phase::other] >= 0.0);
  CHECK(all[phase::other] < 0.005);  // only the gap before the first mark: nanoseconds
}

TEST_CASE("step_timer: exact arithmetic, unmarked phases are absent, other = total - named") {
  mldiag::efficiency::basic_step_timer<manual_clock> timer;
  timer.begin_step();
  manual_clock::advance(3);  // other
  timer.mark(phase::forward);
  manual_clock::advance(10);
  {
    auto g = timer.scope(phase::communication);
    manual_clock::advance(4);
  }
  manual_clock::advance(2);  // forward again
  timer.mark(phase::other);
  manual_clock::advance(1);
  const auto t = timer.end_step();
  CHECK(t.forward == 12 * tick);
  CHECK(t.communication == 4 * tick);
  CHECK(t.total == 20 * tick);
  CHECK(!t.data_wait);  // never marked: "not measured", not 0
  CHECK(!t.backward);
  CHECK(!t.optimizer);
  CHECK(timer.last_step()[phase::other] == 4 * tick);
  CHECK(timer.last_step()[phase::other] == *t.total - *t.forward - *t.communication);
  CHECK(timer.last_step().was_entered(phase::forward));
  CHECK(!timer.last_step().was_entered(phase::data_wait));

  // A second step starts from zero.
  timer.begin_step();
  timer.mark(phase::data_wait);
  manual_clock::advance(7);
  const auto t2 = timer.end_step();
  CHECK(t2.data_wait == 7 * tick);
  CHECK(!t2.forward);
  CHECK(t2.total == 7 * tick);
}

TEST_CASE("step_timer: misuse is an mldiag::error that says what to do") {
  mldiag::efficiency::basic_step_timer<manual_clock> timer;
  CHECK_THROWS_WITH_AS(
      timer.mark(phase::forward),
      "mldiag: step_timer::mark(forward): no step is open; call begin_step() first", mldiag::error);
  CHECK_THROWS_WITH_AS((void)timer.end_step(), doctest::Contains("no step is open"), mldiag::error);
  CHECK_THROWS_WITH_AS((void)timer.scope(phase::backward),
                       doctest::Contains("scope(backward): no step is open"), mldiag::error);
  timer.begin_step();
  CHECK_THROWS_WITH_AS(timer.begin_step(), doctest::Contains("a step is already open"),
                       mldiag::error);
  {
    auto g = timer.scope(phase::backward);
    CHECK_THROWS_WITH_AS(
        (void)timer.end_step(),
        doctest::Contains("1 phase scope(s) still open (current phase 'backward')"), mldiag::error);
  }
  CHECK_NOTHROW((void)timer.end_step());  // the guard ended: the step closes normally

  // Guards on the heap can end out of order; end_step says so and discards the step.
  timer.begin_step();
  auto* outer = new auto(timer.scope(phase::forward));
  auto* inner = new auto(timer.scope(phase::backward));
  delete outer;
  delete inner;
  CHECK_THROWS_WITH_AS((void)timer.end_step(), doctest::Contains("ended out of order"),
                       mldiag::error);
  CHECK(!timer.step_open());
  timer.begin_step();  // starts clean
  CHECK_NOTHROW((void)timer.end_step());

  // abandon_step recovers from an error in the middle of a step.
  timer.begin_step();
  timer.abandon_step();
  CHECK_NOTHROW(timer.begin_step());
  CHECK_NOTHROW((void)timer.end_step());
}

TEST_CASE("step_timer: no allocation in a step") {
  mldiag::efficiency::step_timer timer;
  const auto before = mldiag_test::allocations();
  for (int i = 0; i < 1000; ++i) {
    timer.begin_step();
    timer.mark(phase::data_wait);
    timer.mark(phase::forward);
    {
      auto g = timer.scope(phase::backward);
      auto c = timer.scope(phase::communication);
    }
    timer.mark(phase::optimizer);
    (void)timer.end_step();
  }
  CHECK(mldiag_test::allocations() == before);
}

TEST_CASE("substructure_patterns: defaults on common names, left-most component decides") {
  const mldiag::efficiency::substructure_patterns p;
  CHECK(p.classify("blocks.3.attn") == substructure::attention);
  CHECK(p.classify("model.layers.0.self_attn.q_proj") == substructure::attention);
  CHECK(p.classify("encoder.layer.2.attention.output") == substructure::attention);
  CHECK(p.classify("blocks.3.mlp.fc1") == substructure::ffn);
  CHECK(p.classify("model.layers.0.mlp.gate_proj") == substructure::ffn);  // Llama's gated MLP
  CHECK(p.classify("h.0.ffn") == substructure::ffn);
  CHECK(p.classify("model.embed_tokens") == substructure::embedding);
  CHECK(p.classify("transformer.wte") == substructure::embedding);
  CHECK(p.classify("blocks.1.moe.router") == substructure::moe);
  CHECK(p.classify("blocks.1.moe.experts.2.fc1") == substructure::moe);  // experts, not a dense FFN
  CHECK(p.classify("blocks.1.gate") == substructure::moe);
  CHECK(p.classify("blocks.3") == substructure::other);
  CHECK(p.classify("lm_head") == substructure::other);
  CHECK(p.classify("blocks.3.ln_1") == substructure::norm);
  CHECK(p.classify("model.layers.0.post_attention_layernorm") == substructure::norm);  // a norm, though "attention" is in it
  CHECK(p.classify("blocks.0.attn.q_norm") == substructure::attention);  // the outer component decides
  CHECK(p.classify("model.norm") == substructure::norm);
  CHECK(p.classify("") == substructure::other);

  const mldiag::efficiency::substructure_patterns mine({{"mixer", substructure::attention}});
  CHECK(mine.classify("layers.0.mixer.in_proj") == substructure::attention);
  CHECK(mine.classify("layers.0.mlp") == substructure::other);
  CHECK_THROWS_WITH_AS(mldiag::efficiency::substructure_patterns({{"", substructure::ffn}}),
                       doctest::Contains("empty pattern"), mldiag::error);
  CHECK_THROWS_WITH_AS(mldiag::efficiency::substructure_patterns({{"mlp.fc1", substructure::ffn}}),
                       doctest::Contains("contains '.'"), mldiag::error);
}

TEST_CASE("layer_profiler: self and total time, roll-ups and the dominating layer, exactly") {
  using M = manual_clock;
  mldiag::efficiency::basic_layer_profiler<M> prof;
  // Two blocks, each with attention and an MLP, an embedding and a head; forward and backward.
  // Ticks per layer (forward, backward), chosen by hand:
  //   embed           2, 4
  //   blocks.0        1 own + attn 8 + mlp 5      | backward: 1 own + attn 16 + mlp 10
  //   blocks.1        1 own + attn 8 + moe (router 1, experts 12) | backward: 0 own + attn 16
  //   lm_head         3, 6
  prof.begin_step();
  M::advance(1);  // outside every layer
  prof.begin("embed", pass::forward);
  M::advance(2);
  prof.end("embed", pass::forward);
  {
    auto b = prof.scope("blocks.0", pass::forward);
    M::advance(1);
    {
      auto a = prof.scope("blocks.0.attn", pass::forward);
      M::advance(8);
    }
    {
      auto m = prof.scope("blocks.0.mlp", pass::forward);
      M::advance(5);
    }
  }
  {
    auto b = prof.scope("blocks.1", pass::forward);
    {
      auto a = prof.scope("blocks.1.attn", pass::forward);
      M::advance(8);
    }
    M::advance(1);
    {
      auto moe = prof.scope("blocks.1.moe", pass::forward);
      {
        auto r = prof.scope("blocks.1.moe.router", pass::forward);
        M::advance(1);
      }
      {
        auto e = prof.scope("blocks.1.moe.experts", pass::forward);
        M::advance(12);
      }
    }
  }
  {
    auto h = prof.scope("lm_head", pass::forward);
    M::advance(3);
  }
  // Backward, in reverse.
  {
    auto h = prof.scope("lm_head", pass::backward);
    M::advance(6);
  }
  {
    auto b = prof.scope("blocks.1", pass::backward);
    {
      auto a = prof.scope("blocks.1.attn", pass::backward);
      M::advance(16);
    }
  }
  {
    auto b = prof.scope("blocks.0", pass::backward);
    {
      auto m = prof.scope("blocks.0.mlp", pass::backward);
      M::advance(10);
    }
    {
      auto a = prof.scope("blocks.0.attn", pass::backward);
      M::advance(16);
    }
    M::advance(1);
  }
  {
    auto e = prof.scope("embed", pass::backward);
    M::advance(4);
  }
  M::advance(2);  // outside every layer
  prof.end_step();

  const auto layers = prof.layers();
  REQUIRE(layers.size() == 10);
  // Order of first begin (model order).
  CHECK(layers[0].name == "embed");
  CHECK(layers[1].name == "blocks.0");
  CHECK(layers[2].name == "blocks.0.attn");
  CHECK(layers[9].name == "lm_head");
  const auto find = [&](std::string_view n) {
    for (const auto& l : layers)
      if (l.name == n) return l;
    FAIL("no layer ", n);
    return mldiag::efficiency::layer_result{};
  };
  CHECK(find("blocks.0").self.forward == 1 * tick);
  CHECK(find("blocks.0").total.forward == 14 * tick);
  CHECK(find("blocks.0").self.backward == 1 * tick);
  CHECK(find("blocks.0").total.backward == 27 * tick);
  CHECK(find("blocks.0").calls == 2);
  CHECK(find("blocks.1").self.forward == 1 * tick);
  CHECK(find("blocks.1").total.forward == 22 * tick);
  CHECK(find("blocks.1.moe").self.forward == 0.0);
  CHECK(find("blocks.1.moe").total.forward == 13 * tick);
  CHECK(find("blocks.1.moe.experts").self.backward == 0.0);
  CHECK(find("embed").self.sum() == 6 * tick);
  CHECK(prof.step_seconds() == 97 * tick);

  // Roll-up by substructure: self times, so nothing counts twice.
  const auto s = prof.by_substructure();
  CHECK(s[substructure::attention].forward == 16 * tick);
  CHECK(s[substructure::attention].backward == 32 * tick);
  CHECK(s[substructure::ffn].forward == 5 * tick);
  CHECK(s[substructure::ffn].backward == 10 * tick);
  CHECK(s[substructure::embedding].sum() == 6 * tick);
  CHECK(s[substructure::moe].forward == 13 * tick);  // moe (0 own) + router 1 + experts 12
  CHECK(s[substructure::moe].backward == 0.0);
  CHECK(s[substructure::other].forward == 2 * tick + 3 * tick);  // blocks' own time + lm_head
  CHECK(s[substructure::other].backward == 1 * tick + 6 * tick);
  CHECK(s.sum() == 94 * tick);  // the step minus the 3 ticks outside every layer

  // Roll-up by prefix: a block = its own time + everything under it.
  CHECK(prof.by_prefix("blocks.0").forward == 14 * tick);
  CHECK(prof.by_prefix("blocks.0").backward == 27 * tick);
  CHECK(prof.by_prefix("blocks.1").sum() == 22 * tick + 16 * tick);
  CHECK(prof.by_prefix("blocks.1.moe").sum() == 13 * tick);
  CHECK(prof.by_prefix("blocks").sum() == 14 * tick + 27 * tick + 38 * tick);
  CHECK(prof.by_prefix("blocks.").sum() == 0.0);  // a prefix ends at a component boundary
  CHECK(prof.by_prefix("block").sum() == 0.0);

  std::vector<mldiag::efficiency::prefix_time> groups;
  mldiag::efficiency::rollup_by_depth(layers, 2, groups);
  REQUIRE(groups.size() == 4);
  CHECK(groups[0].prefix == "embed");
  CHECK(groups[1].prefix == "blocks.0");
  CHECK(groups[1].self.sum() == 41 * tick);
  CHECK(groups[2].prefix == "blocks.1");
  CHECK(groups[2].self.sum() == 38 * tick);
  CHECK(groups[3].prefix == "lm_head");

  // The dominating layer, by self time: blocks.0.attn and blocks.1.attn have 24 each, first wins.
  const auto d = prof.dominant();
  REQUIRE(d.has_value());
  CHECK(d->name == "blocks.0.attn");
  CHECK(d->seconds == 24 * tick);
  CHECK(d->share_of_layers == doctest::Approx(24.0 / 94.0));
  CHECK(d->share_of_step == doctest::Approx(24.0 / 97.0));
}

TEST_CASE("layer_profiler: repeated and recursive layers, and times against real sleeps") {
  using M = manual_clock;
  mldiag::efficiency::basic_layer_profiler<M> prof;
  prof.begin_step();
  for (int micro = 0; micro < 3; ++micro) {  // gradient accumulation: three intervals add up
    auto l = prof.scope("shared", pass::forward);
    M::advance(2);
  }
  {
    auto outer = prof.scope("rec", pass::forward);
    M::advance(1);
    auto inner = prof.scope("rec", pass::forward);  // nested in itself
    M::advance(3);
  }
  prof.end_step();
  REQUIRE(prof.layers().size() == 2);
  CHECK(prof.layers()[0].self.forward == 6 * tick);
  CHECK(prof.layers()[0].calls == 3);
  CHECK(prof.layers()[1].self.forward == 4 * tick);
  CHECK(prof.layers()[1].total.forward == 4 * tick);  // once, not 4 + 3

  mldiag::efficiency::layer_profiler real;
  real.begin_step();
  real.begin("slow", pass::forward);
  sleep_ms(20);
  real.end();
  real.end_step();
  CHECK(real.layers()[0].self.forward >= 0.020);
  CHECK(real.layers()[0].self.forward < 2.0);
  CHECK(real.step_seconds() >= real.layers()[0].total.forward);
}

TEST_CASE("layer_profiler: misuse is an mldiag::error naming the layer") {
  mldiag::efficiency::basic_layer_profiler<manual_clock> prof;
  CHECK_THROWS_WITH_AS(
      prof.begin("blocks.0.attn", pass::forward),
      "mldiag: layer_profiler::begin('blocks.0.attn', forward): no step is open; call "
      "begin_step() first",
      mldiag::error);
  CHECK_THROWS_WITH_AS(prof.end(), doctest::Contains("no step is open"), mldiag::error);
  prof.begin_step();
  CHECK_THROWS_WITH_AS(prof.end(), doctest::Contains("no layer is open"), mldiag::error);
  CHECK_THROWS_WITH_AS(prof.begin("", pass::forward), doctest::Contains("empty layer name"),
                       mldiag::error);
  prof.begin("blocks.0", pass::forward);
  prof.begin("blocks.0.attn", pass::forward);
  CHECK_THROWS_WITH_AS(
      prof.end("blocks.0", pass::forward),
      "mldiag: layer_profiler::end('blocks.0', forward): the innermost open layer is "
      "'blocks.0.attn' (forward); end layers in reverse order of begin",
      mldiag::error);
  CHECK_THROWS_WITH_AS(prof.end("blocks.0.attn", pass::backward),
                       doctest::Contains("innermost open layer"), mldiag::error);
  CHECK_THROWS_WITH_AS(
      prof.end_step(),
      doctest::Contains("2 layer(s) still open (innermost 'blocks.0.attn', forward)"),
      mldiag::error);
  CHECK_THROWS_WITH_AS(prof.begin_step(), doctest::Contains("already open"), mldiag::error);
  prof.end("blocks.0.attn", pass::forward);
  prof.end();
  CHECK_NOTHROW(prof.end_step());
  CHECK_THROWS_WITH_AS(prof.begin(99u, pass::forward), doctest::Contains("no step is open"),
                       mldiag::error);

  // A guarded layer closed by hand: the guard finds nothing to close and end_step says so.
  prof.begin_step();
  {
    auto g = prof.scope("x", pass::forward);
    prof.end();
  }
  CHECK_THROWS_WITH_AS(prof.end_step(), doctest::Contains("ended out of order"), mldiag::error);
  CHECK(!prof.step_open());

  // abandon_step recovers from layers left open.
  prof.begin_step();
  prof.begin("y", pass::backward);
  prof.abandon_step();
  prof.begin_step();
  CHECK_NOTHROW(prof.end_step());
  CHECK(prof.layers().empty());
}

TEST_CASE("layer_profiler: no allocation after the first step") {
  mldiag::efficiency::layer_profiler prof;
  std::vector<std::string> names;
  for (int b = 0; b < 12; ++b) {
    names.push_back("blocks." + std::to_string(b));
    names.push_back("blocks." + std::to_string(b) + ".attn");
    names.push_back("blocks." + std::to_string(b) + ".mlp");
  }
  struct null_sink {
    double sum = 0.0;
    void observe(const mldiag::layer_timing& t) { sum += t.seconds; }
  } sink;
  std::vector<mldiag::efficiency::prefix_time> groups;
  const auto step = [&] {
    prof.begin_step();
    for (std::size_t b = 0; b < 12; ++b) {
      auto block = prof.scope(names[3 * b], pass::forward);
      { auto a = prof.scope(names[3 * b + 1], pass::forward); }
      { auto m = prof.scope(names[3 * b + 2], pass::forward); }
    }
    for (std::size_t b = 12; b-- > 0;) {
      prof.begin(names[3 * b + 2], pass::backward);
      prof.end();
      prof.begin(names[3 * b + 1], pass::backward);
      prof.end();
    }
    prof.end_step();
    prof.observe(sink);
    (void)prof.dominant();
    (void)prof.by_prefix("blocks.3");
    mldiag::efficiency::rollup_by_depth(prof.layers(), 2, groups);
  };
  step();  // interns the names
  const auto before = mldiag_test::allocations();
  for (int i = 0; i < 200; ++i)
    step();
  CHECK(mldiag_test::allocations() == before);
  CHECK(prof.layers().size() == 36);
}

TEST_CASE("end to end: a planted slow layer is named by layer_dominates through the monitor") {
  mldiag::monitor mon({.detectors = {"layer_dominates"}});
  mldiag::efficiency::layer_profiler prof;
  mldiag::efficiency::step_timer timer;
  const std::vector<std::string> layers = {"blocks.0.attn", "blocks.0.mlp",  "blocks.1.attn",
                                           "blocks.1.mlp",  "blocks.2.attn", "blocks.2.mlp"};
  std::vector<mldiag::finding> found;
  for (int step = 0; step < 12; ++step) {
    timer.begin_step();
    timer.mark(phase::forward);
    prof.begin_step();
    for (const auto& name : layers) {
      auto s = prof.scope(name, pass::forward);
      // The planted fault: one layer busy-waits 20x as long as the others.
      spin_for(std::chrono::microseconds(name == "blocks.1.mlp" ? 4000 : 200));
    }
    prof.end_step();
    mon.observe(mldiag::scalar::loss, 1.0);
    mon.observe(timer.end_step());
    prof.observe(mon);
    for (const auto& f : mon.end_step())
      found.push_back(f);
  }
  // Onsets only: once, unless a preempted step broke the run of five and it began again.
  REQUIRE(!found.empty());
  for (const auto& f : found) {
    CHECK(f.symptom == "one layer dominates step time");
    REQUIRE(!f.where.empty());
    CHECK(f.where[0].first == "blocks.1.mlp");
    CHECK(f.where[0].second > 0.5);
  }
}
