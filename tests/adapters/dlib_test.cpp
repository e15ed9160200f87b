// SPDX-License-Identifier: Apache-2.0
// The dlib adapter against dlib itself (the peer): a dlib tensor read in place gives dlib's
// own dot product and extrema, an alias into another tensor reads only its window, NaN and
// Inf are counted; a network's parameters and gradients come under dlib's layer index and
// type, in forward order, and are the tensors dlib's layers hold.
#include <doctest/doctest.h>

#include "mldiag/adapters/dlib.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/stats/compute.hpp"

#include <dlib/dnn.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

static_assert(mldiag::tensor<dlib::tensor>);
static_assert(mldiag::tensor<dlib::resizable_tensor>);
static_assert(mldiag::tensor<dlib::alias_tensor_instance>);

namespace {

void fill(dlib::tensor& t, float scale) {
  float* p = t.host();
  for (std::size_t i = 0; i < t.size(); ++i)
    p[i] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f);
}

// What `monitor::observe` receives, kept in order.
struct sink {
  struct seen {
    mldiag::role r;
    std::string name;
    mldiag::tensor_stats s;
    const float* data;
  };
  std::vector<seen> got;
  void observe(mldiag::role r, std::string_view name, const dlib::tensor& t) {
    got.push_back({r, std::string(name), mldiag::compute_stats(t), t.host()});
  }
};

}  // namespace

TEST_CASE("a dlib tensor is read in place and agrees with dlib's dot and max") {
  dlib::resizable_tensor t(3, 4, 5, 7);  // [n, k, nr, nc]
  fill(t, 2.5f);
  const auto s = mldiag::compute_stats(t);
  CHECK(s.count == t.size());
  // dlib::dot rounds each product to float before summing in double: 1e-6, the accuracy contract.
  CHECK(s.l2_norm() == doctest::Approx(std::sqrt(dlib::dot(t, t))).epsilon(1e-6));
  CHECK(s.max == static_cast<double>(dlib::max(dlib::mat(t))));
  CHECK(s.min == static_cast<double>(dlib::min(dlib::mat(t))));
  const auto v = mldiag::view_traits<dlib::resizable_tensor>::view(t);
  CHECK(v.data() == t.host());
  CHECK(v.rank() == 4);

  // Through the base class, as a layer hands it out.
  const dlib::tensor& base = t;
  CHECK(mldiag::compute_stats(base) == s);

  t.host()[5] = std::numeric_limits<float>::quiet_NaN();
  t.host()[6] = std::numeric_limits<float>::infinity();
  t.host()[7] = -std::numeric_limits<float>::infinity();
  const auto bad = mldiag::compute_stats(t);
  CHECK(bad.nan == 1);
  CHECK(bad.pos_inf == 1);
  CHECK(bad.neg_inf == 1);
}

TEST_CASE("an alias tensor reads only its window, and an empty tensor is empty") {
  dlib::resizable_tensor whole(10, 6);
  fill(whole, 1.0f);
  dlib::alias_tensor window(2, 6);  // samples 4 and 5
  auto part = window(whole, 4 * 6);
  std::vector<float> copy(whole.host() + 24, whole.host() + 36);
  CHECK(mldiag::compute_stats(part) == mldiag::compute_stats(copy));

  const dlib::resizable_tensor empty;
  const auto e = mldiag::compute_stats(empty);
  CHECK(e.count == 0);
}

TEST_CASE("a network's parameters and gradients by dlib's layer index and type, in forward order") {
  using net_type = dlib::loss_multiclass_log<
      dlib::fc<3, dlib::relu<dlib::fc<4, dlib::input<dlib::matrix<float>>>>>>;
  net_type net;
  mldiag::dlib_layers layers;
  sink before;
  layers.observe(before, net);  // not set up yet: no parameters to read
  CHECK(before.got.empty());
  CHECK(layers.names() ==
        std::vector<std::string>{"", "layer1.fc", "layer2.relu", "layer3.fc", ""});

  std::srand(3);
  std::vector<dlib::matrix<float>> x(8, dlib::matrix<float>(5, 1));
  std::vector<unsigned long> y(8);
  for (std::size_t i = 0; i < x.size(); ++i) {
    for (long j = 0; j < 5; ++j)
      x[i](j) =
          static_cast<float>(std::cos(static_cast<double>(i * 5 + static_cast<std::size_t>(j))));
    y[i] = i % 3;
  }
  dlib::resizable_tensor in;
  net.to_tensor(x.begin(), x.end(), in);
  net.compute_parameter_gradients(in, y.begin());

  sink after;
  layers.observe(after, net);
  REQUIRE(after.got.size() == 4);
  // Forward order: the input side first (layer3), each layer's parameters then its gradient.
  CHECK(after.got[0].name == "layer3.fc");
  CHECK(after.got[0].r == mldiag::role::parameter);
  CHECK(after.got[1].name == "layer3.fc");
  CHECK(after.got[1].r == mldiag::role::gradient);
  CHECK(after.got[2].name == "layer1.fc");
  CHECK(after.got[3].r == mldiag::role::gradient);
  // The very tensors dlib's layers hold (fc keeps weights and biases in one: (5 + 1) x 4).
  const auto& fc3 = dlib::layer<3>(net);
  CHECK(after.got[0].data == fc3.layer_details().get_layer_params().host());
  CHECK(after.got[0].s.count == 6 * 4);
  CHECK(after.got[1].data == fc3.get_parameter_gradient().host());
  CHECK(after.got[1].s == mldiag::compute_stats(fc3.get_parameter_gradient()));
  CHECK(after.got[3].s.l2_norm() > 0.0);

  // Straight into a recorder (the monitor's own), names interned once.
  mldiag::recorder rec(4);
  rec.begin_step(0);
  struct rec_sink {
    mldiag::recorder& rec;
    void observe(mldiag::role r, std::string_view name, const dlib::tensor& t) {
      rec.observe(r, name, t);
    }
  } rs{rec};
  layers.observe(rs, net);
  const auto& snap = rec.end_step();
  CHECK(snap.gradients.size() == 2);
  CHECK(snap.parameters.size() == 2);
}

TEST_CASE("a layer's type is the word dlib prints for it") {
  CHECK(mldiag::dlib_layer_type(dlib::con_<16, 5, 5, 1, 1, 2, 2>()) == "con");
  CHECK(mldiag::dlib_layer_type(dlib::fc_<10, dlib::FC_HAS_BIAS>()) == "fc");
  CHECK(mldiag::dlib_layer_type(dlib::bn_<dlib::CONV_MODE>()) == "bn_con");
  CHECK(mldiag::dlib_layer_type(dlib::max_pool_<2, 2, 2, 2, 0, 0>()) == "max_pool");
}
