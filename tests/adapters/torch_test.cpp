// SPDX-License-Identifier: Apache-2.0
// The LibTorch adapter against LibTorch itself (the peer): norms, NaN counts and extrema of
// the same tensors, contiguous and strided, in four dtypes; entropy against softmax; a
// module's parameters and gradients in layer order.
#include "mldiag/adapters/torch.hpp"
#include "mldiag/evidence/recorder.hpp"

#include <torch/torch.h>

// LibTorch's logging defines CHECK (glog style), which would silently replace doctest's and
// take the assertions out of the count: drop it before doctest defines its own.
#undef CHECK
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace {

// torch's own answers, in float64 over the finite elements.
struct peer {
  double norm, amax, amin, absmax;
  std::int64_t nan, inf, count;
};

peer torch_peer(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble);
  const at::Tensor finite = torch::isfinite(d);
  const at::Tensor f = d.masked_select(finite);
  return {torch::linalg_vector_norm(f, 2).item<double>(), f.amax().item<double>(), f.amin().item<double>(),
          f.abs().amax().item<double>(), torch::isnan(d).sum().item<std::int64_t>(),
          torch::isinf(d).sum().item<std::int64_t>(), d.numel()};
}

void check_against_torch(const at::Tensor& t) {
  const auto s = mldiag::compute_stats(t);
  const auto p = torch_peer(t);
  CHECK(static_cast<std::int64_t>(s.count) == p.count);
  CHECK(static_cast<std::int64_t>(s.nan) == p.nan);
  CHECK(static_cast<std::int64_t>(s.pos_inf + s.neg_inf) == p.inf);
  CHECK(s.max == p.amax);
  CHECK(s.min == p.amin);
  CHECK(s.max_abs == p.absmax);
  // The contract of docs/stats.md: 1e-12 for float64, 1e-6 for the narrower formats (summed in
  // float lanes since issue 18).
  CHECK(s.l2_norm() == doctest::Approx(p.norm).epsilon(t.scalar_type() == at::kDouble ? 1e-12 : 1e-6));
}

}  // namespace

TEST_CASE("statistics of torch tensors agree with linalg_vector_norm isnan and amax") {
  torch::manual_seed(0);
  for (auto type : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    CAPTURE(c10::toString(type));
    at::Tensor t = torch::randn({257, 129}).to(type);
    t.index_put_({3, 5}, std::numeric_limits<float>::quiet_NaN());
    t.index_put_({100, 7}, std::numeric_limits<float>::infinity());
    check_against_torch(t);
    check_against_torch(t.t());                           // transposed: strided, read in place
    check_against_torch(t.index({torch::indexing::Slice(1, 200, 3), torch::indexing::Slice(2, 100)}));
  }
}

TEST_CASE("entropy of torch logits agrees with torch's softmax entropy") {
  torch::manual_seed(1);
  const at::Tensor logits = torch::randn({4, 16, 33}) * 3;
  const auto e = mldiag::entropy_from_logits(logits);
  const at::Tensor logp = torch::log_softmax(logits.to(at::kDouble), -1);
  const at::Tensor h = -(logp.exp() * logp).sum(-1);
  CHECK(e.rows == 64);
  // fp32 logits: each row within 2e-6 (1 + ln n) nats (docs/stats.md).
  const double tol = 2e-6 * (1.0 + std::log(33.0));
  CHECK(std::fabs(e.mean() - h.mean().item<double>()) <= tol);
  CHECK(std::fabs(e.max - h.max().item<double>()) <= tol);
}

TEST_CASE("a module's parameters and gradients are recorded in layer order") {
  torch::manual_seed(2);
  torch::nn::Sequential net(torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 3));
  const at::Tensor x = torch::randn({32, 8});
  net->forward(x).pow(2).mean().backward();
  mldiag::recorder rec;
  rec.begin_step(0);
  mldiag::observe_module(rec, *net);
  mldiag::observe_activation(rec, "0.out", net[0]->as<torch::nn::Linear>()->forward(x));
  const auto& s = rec.end_step();
  REQUIRE(s.parameters.size() == 4);
  REQUIRE(s.gradients.size() == 4);
  CHECK(rec.names()[s.parameters[0].id] == "0.weight");
  CHECK(rec.names()[s.parameters[3].id] == "2.bias");
  const auto params = net->named_parameters();
  CHECK(s.gradients[2].stats.l2_norm() ==
        doctest::Approx(torch::linalg_vector_norm(params["2.weight"].grad().to(at::kDouble), 2).item<double>()).epsilon(1e-6));
  CHECK(s.activations.size() == 1);
}

TEST_CASE("router load and logits entropy come from the router's tensors") {
  const at::Tensor assignments = torch::tensor({0, 0, 0, 1, 1, 3}, at::kLong);  // expert 2 is dead
  const at::Tensor logits = torch::zeros({6, 4});
  mldiag::recorder rec;
  rec.begin_step(0);
  mldiag::observe_router(rec, "moe.0", logits, assignments);
  const auto& s = rec.end_step();
  REQUIRE(s.routers.size() == 1);
  CHECK(s.routers[0].experts == 4);
  CHECK(s.routers[0].dead == 1);
  CHECK(s.routers[0].max_over_mean == doctest::Approx(2.0));  // 3 / (6 / 4)
  REQUIRE(s.attention.size() == 1);
  CHECK(s.attention[0].stats.normalized_mean() == doctest::Approx(1.0).epsilon(1e-6));  // uniform logits
}

TEST_CASE("integer tensors are refused with a message") {
  CHECK_THROWS_WITH_AS((void)mldiag::compute_stats(torch::ones({3}, at::kInt)),
                       doctest::Contains("mldiag: torch adapter: dtype Int is not a floating-point type"), mldiag::error);
}

// The monitor takes torch tensors directly, and one call a step observes a module.
#include "mldiag/monitor.hpp"

namespace {
double torch_norm(const at::Tensor& t) { return torch::linalg_vector_norm(t.to(at::kDouble), 2).item<double>(); }
}  // namespace

TEST_CASE("the monitor observes torch tensors as they are (no compute_stats)") {
  static_assert(mldiag::tensor<at::Tensor>, "a torch::Tensor is an mldiag tensor with the adapter included");
  torch::manual_seed(5);
  const at::Tensor g = torch::randn({7, 9}).to(at::kBFloat16);
  const at::Tensor strided = torch::randn({6, 10}, at::kDouble).t();  // not contiguous
  mldiag::monitor mon;
  mon.observe(mldiag::scalar::loss, 1.0);
  mon.observe(mldiag::role::gradient, "fc.weight", g);
  mon.observe(mldiag::role::activation, "fc.out", strided);
  mon.end_step();
  const auto& s = mon.evidence().current();
  REQUIRE(s.gradients.size() == 1);
  REQUIRE(s.activations.size() == 1);
  CHECK(mon.evidence().names()[s.gradients[0].id] == "fc.weight");
  CHECK(s.gradients[0].stats.l2_norm() == doctest::Approx(torch_norm(g)).epsilon(1e-6));
  CHECK(s.activations[0].stats.l2_norm() == doctest::Approx(torch_norm(strided)).epsilon(1e-6));
  CHECK(s.activations[0].stats.count == 60);
}

TEST_CASE("module_observer: parameters, gradients and updates of one step, against torch") {
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Linear(6, 12), torch::nn::ReLU(), torch::nn::Linear(12, 4));
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  mldiag::monitor mon;
  mldiag::module_observer watch(*net);
  std::vector<at::Tensor> before;
  for (int step = 0; step < 3; ++step) {
    before.clear();
    for (const auto& p : net->parameters()) before.push_back(p.detach().clone());
    opt.zero_grad();
    const at::Tensor loss = net->forward(torch::randn({16, 6})).pow(2).mean();
    loss.backward();
    opt.step();
    mon.observe(mldiag::scalar::loss, loss.item<double>());
    watch.observe(mon);
    mon.end_step();
  }
  const auto& s = mon.evidence().current();
  const auto params = net->named_parameters();
  REQUIRE(s.parameters.size() == 4);
  REQUIRE(s.gradients.size() == 4);
  REQUIRE(s.updates.size() == 4);  // from the second call on
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& p = params[i].value();
    CHECK(mon.evidence().names()[s.updates[i].id] == params[i].key());
    CHECK(s.parameters[i].stats.l2_norm() == doctest::Approx(torch_norm(p)).epsilon(1e-6));
    CHECK(s.gradients[i].stats.l2_norm() == doctest::Approx(torch_norm(p.grad())).epsilon(1e-6));
    // The update is what this step's optimizer did: the parameters after minus before.
    CHECK(s.updates[i].stats.l2_norm() == doctest::Approx(torch_norm(p.detach() - before[i])).epsilon(1e-6));
  }
  CHECK(s.grad_cosine.has_value());  // from the second step: consecutive gradients' cosine
}

namespace {
// A model held the way the pytorch/examples MNIST program holds it: a plain module by value.
struct plain_net : torch::nn::Module {
  plain_net() : fc(register_module("fc", torch::nn::Linear(3, 2))) {}
  torch::nn::Linear fc;
};

// The gradient norms one step of `watch` records for `module`'s parameters.
std::vector<double> watched_gradient_norms(mldiag::module_observer& watch) {
  mldiag::monitor mon;
  mon.begin_step(0);
  watch.observe(mon);
  mon.end_step();
  std::vector<double> out;
  for (const auto& g : mon.evidence().current().gradients) out.push_back(g.stats.l2_norm());
  return out;
}
}  // namespace

TEST_CASE("module_observer: a module, a module holder and a shared_ptr to a module all watch the same") {
  torch::manual_seed(5);
  plain_net plain;
  plain.fc->forward(torch::randn({4, 3})).sum().backward();
  torch::nn::Linear holder(3, 2);
  holder->forward(torch::randn({4, 3})).sum().backward();
  auto shared = std::make_shared<plain_net>();
  shared->fc->forward(torch::randn({4, 3})).sum().backward();

  mldiag::module_observer by_ref(plain);           // the module itself
  mldiag::module_observer by_holder(holder);       // a holder, without `*`
  mldiag::module_observer by_deref(*holder);       // a holder, dereferenced (as before)
  mldiag::module_observer by_shared(shared);       // a shared_ptr to a module
  const auto norms = [](const torch::nn::Module& m) {
    std::vector<double> out;
    for (const auto& p : m.parameters()) out.push_back(torch_norm(p.grad()));
    return out;
  };
  const auto check = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  };
  check(watched_gradient_norms(by_ref), norms(plain));
  check(watched_gradient_norms(by_holder), norms(*holder));
  check(watched_gradient_norms(by_deref), norms(*holder));
  check(watched_gradient_norms(by_shared), norms(*shared));
  CHECK(watched_gradient_norms(by_holder).size() == 2);  // weight and bias
}

namespace {
struct tapped_net : torch::nn::Module {
  tapped_net() : fc1(register_module("fc1", torch::nn::Linear(5, 8))), fc2(register_module("fc2", torch::nn::Linear(8, 2))) {}
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = tap("fc1.relu", torch::relu(fc1->forward(x)));
    return fc2->forward(h);
  }
  torch::nn::Linear fc1, fc2;
  mldiag::activation_tap tap;
};
}  // namespace

TEST_CASE("activation_tap: a training forward's activations, not an evaluation's") {
  torch::manual_seed(4);
  tapped_net net;
  const at::Tensor x = torch::randn({10, 5});
  mldiag::monitor mon;
  mon.observe(mldiag::scalar::loss, 1.0);
  (void)net.forward(x);
  {
    torch::NoGradGuard evaluation;
    (void)net.forward(torch::full({10, 5}, 100.0f));  // not recorded
  }
  net.tap.observe(mon);
  mon.end_step();
  const auto& s = mon.evidence().current();
  REQUIRE(s.activations.size() == 1);
  CHECK(mon.evidence().names()[s.activations[0].id] == "fc1.relu");
  const at::Tensor h = torch::relu(net.fc1->forward(x)).detach();
  CHECK(s.activations[0].stats.l2_norm() == doctest::Approx(torch_norm(h)).epsilon(1e-6));
  CHECK(s.activations[0].stats.zeros == (h == 0).sum().item<std::int64_t>());
}

TEST_CASE("update_stats on torch tensors: fused where contiguous, a subtraction where not") {
  torch::manual_seed(3);
  const auto p = torch::randn({64, 33});
  auto previous = p.clone();
  const auto moved = p + 1e-3 * torch::randn({64, 33});
  const auto want = mldiag::compute_stats(moved - previous);
  CHECK(mldiag::update_stats(previous, moved) == want);  // float: bit for bit
  CHECK(torch::equal(previous, moved));
  // bf16: the exact difference (formed in float), against double arithmetic on the same values.
  const auto pb = p.to(torch::kBFloat16);
  auto previous_b = pb.clone();
  const auto moved_b = (p + 0.05 * torch::randn({64, 33})).to(torch::kBFloat16);
  const auto exact = moved_b.to(torch::kDouble) - pb.to(torch::kDouble);
  const auto got = mldiag::update_stats(previous_b, moved_b);
  CHECK(got.l2_norm() == doctest::Approx(torch::linalg_vector_norm(exact, 2, {}, false, {}).item<double>()).epsilon(1e-6));
  CHECK(torch::equal(previous_b, moved_b));
  // A transposed parameter takes the subtraction path and gives the same statistics.
  auto previous_t = p.t().contiguous().t();  // same values, column-major
  CHECK_FALSE(previous_t.is_contiguous());
  const auto got_t = mldiag::update_stats(previous_t, moved);
  CHECK(got_t.count == want.count);
  CHECK(got_t.l2_norm() == doctest::Approx(want.l2_norm()).epsilon(1e-12));
  CHECK(torch::equal(previous_t, moved));
  // A kept copy of another size or dtype is an error that says what to do.
  auto wrong = torch::zeros({3});
  CHECK_THROWS_WITH_AS((void)mldiag::update_stats(wrong, moved), doctest::Contains("p.detach().clone()"), mldiag::error);
  auto wrong_type = p.to(torch::kDouble);
  CHECK_THROWS_AS((void)mldiag::update_stats(wrong_type, moved), mldiag::error);
}

TEST_CASE("parameter_and_update_stats on torch tensors: the two calls' results from one pass") {
  torch::manual_seed(4);
  for (const auto dtype : {torch::kFloat, torch::kDouble, torch::kBFloat16, torch::kHalf}) {
    CAPTURE(c10::toString(dtype));
    const auto p = torch::randn({300, 257}).to(dtype);  // 77100 elements: two units, partial blocks
    const auto moved = (p.to(torch::kFloat) + 0.01 * torch::randn({300, 257})).to(dtype);
    auto previous_a = p.clone(), previous_b = p.clone();
    const auto got = mldiag::parameter_and_update_stats(previous_a, moved);
    CHECK(got.parameter == mldiag::compute_stats(moved));
    CHECK(got.update == mldiag::update_stats(previous_b, moved));
    CHECK(torch::equal(previous_a, moved));
  }
  // Not contiguous: the two calls, the same statistics.
  const auto p = torch::randn({40, 30});
  const auto moved = p + 1e-3 * torch::randn({40, 30});
  auto previous_t = p.t().contiguous().t();
  auto previous = p.clone();
  const auto got = mldiag::parameter_and_update_stats(previous_t, moved);
  CHECK(got.parameter == mldiag::compute_stats(moved));
  CHECK(got.update.l2_norm() == doctest::Approx(mldiag::update_stats(previous, moved).l2_norm()).epsilon(1e-12));
  CHECK(torch::equal(previous_t, moved));
  auto wrong = torch::zeros({3});
  CHECK_THROWS_WITH_AS((void)mldiag::parameter_and_update_stats(wrong, moved),
                       doctest::Contains("mldiag: parameter_and_update_stats"), mldiag::error);
}

TEST_CASE("gradient_cosines_of: gradients read in place equal the gathered path, within 0.05 of float64") {
  // Two copies of a layer whose weight (40 x 300 = 12,000 elements) is sampled on a stride:
  // one with contiguous gradients (read in place), one with the same values in non-contiguous
  // gradients (sliced, converted and gathered by LibTorch). Three steps of correlated
  // gradients, g_t = 0.6 g_{t-1} + 0.8 noise.
  torch::manual_seed(3);
  torch::nn::Linear a(300, 40), b(300, 40);
  mldiag::gradient_persistence pa, pb;
  std::optional<mldiag::gradient_cosines> ca, cb;
  std::vector<torch::Tensor> last(2), flat(2);
  for (int step = 0; step < 3; ++step) {
    const auto pa_list = a->parameters(), pb_list = b->parameters();
    std::vector<torch::Tensor> now;
    for (std::size_t i = 0; i < pa_list.size(); ++i) {
      const auto noise = torch::randn(pa_list[i].sizes());
      const auto g = last[i].defined() ? 0.6 * last[i] + 0.8 * noise : noise;
      last[i] = g;
      now.push_back(g.reshape({-1}));
      pa_list[i].mutable_grad() = g.clone();
      auto wide = torch::zeros({2 * g.numel()});
      wide.slice(0, 0, 2 * g.numel(), 2).copy_(g.reshape({-1}));
      pb_list[i].mutable_grad() = wide.slice(0, 0, 2 * g.numel(), 2).view(g.sizes());
      REQUIRE_FALSE(pb_list[i].grad().is_contiguous());
    }
    if (step >= 1) {
      flat[0] = flat[1];
      flat[1] = torch::cat(now).to(torch::kDouble);
    } else {
      flat[1] = torch::cat(now).to(torch::kDouble);
    }
    ca = mldiag::gradient_cosines_of(pa, *a);
    cb = mldiag::gradient_cosines_of(pb, *b);
  }
  REQUIRE(ca.has_value());
  REQUIRE(cb.has_value());
  CHECK(ca->consecutive == cb->consecutive);
  REQUIRE(ca->increments.has_value());
  REQUIRE(cb->increments.has_value());
  CHECK(*ca->increments == *cb->increments);
  const double exact = (flat[0] * flat[1]).sum().item<double>() /
                       std::sqrt((flat[0] * flat[0]).sum().item<double>() * (flat[1] * flat[1]).sum().item<double>());
  CAPTURE(exact);
  CHECK(std::fabs(ca->consecutive - exact) < 0.05);
}

TEST_CASE("each parameter group's learning rate is read from the optimizer itself") {
  torch::nn::Linear backbone(4, 4), head(4, 2);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(backbone->parameters(), std::make_unique<torch::optim::SGDOptions>(0.01));
  groups.emplace_back(head->parameters(), std::make_unique<torch::optim::SGDOptions>(0.1));
  torch::optim::SGD opt(std::move(groups), torch::optim::SGDOptions(0.5));
  mldiag::recorder rec(4);
  rec.begin_step(0);
  mldiag::observe_learning_rates(rec, opt, "sgd");
  const auto& s = rec.end_step();
  REQUIRE(s.group_lrs.size() == 2);
  CHECK(rec.names()[s.group_lrs[0].first] == "sgd/0");
  CHECK(s.group_lrs[0].second == 0.01);  // the group's own rate, not the default 0.5
  CHECK(rec.names()[s.group_lrs[1].first] == "sgd/1");
  CHECK(s.group_lrs[1].second == 0.1);
  // A rate written into the optimizer (what a scheduler does) is what the next step reads.
  static_cast<torch::optim::SGDOptions&>(opt.param_groups()[1].options()).lr(0.05);
  rec.begin_step(1);
  mldiag::observe_learning_rates(rec, opt, "sgd");
  CHECK(rec.end_step().group_lrs[1].second == 0.05);
}
