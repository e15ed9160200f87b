// SPDX-License-Identifier: Apache-2.0
// Eigen objects are read in place; each must give exactly the statistics of its elements
// copied in the same order (outer-major), and agree with Eigen's own reductions.
#include <doctest/doctest.h>

#include "mldiag/adapters/eigen.hpp"
#include "mldiag/stats/compute.hpp"
#include "mldiag/stats/entropy.hpp"

#include <Eigen/Core>

#include <cmath>
#include <vector>

namespace {

// The elements of a dense Eigen object in storage order (outer index slowest).
template <class D>
std::vector<typename D::Scalar> copy_outer_major(const Eigen::DenseBase<D>& x) {
  std::vector<typename D::Scalar> out;
  const auto& d = x.derived();
  for (Eigen::Index o = 0; o < d.outerSize(); ++o)
    for (Eigen::Index i = 0; i < d.innerSize(); ++i)
      out.push_back(D::IsRowMajor ? d.coeff(o, i) : d.coeff(i, o));
  return out;
}

template <class D>
void check_in_place(const D& x) {
  const auto s = mldiag::compute_stats(x);
  const auto copy = copy_outer_major(x);
  CHECK(s == mldiag::compute_stats(copy));
  CHECK(s.count == static_cast<std::uint64_t>(x.size()));
  if constexpr (std::is_floating_point_v<typename D::Scalar>) {
    // The contract (docs/stats.md): 1e-12 for double, 1e-6 for float (float lanes, issue 18).
    CHECK(s.l2_norm() == doctest::Approx(std::sqrt(static_cast<double>(x.template cast<double>().matrix().squaredNorm())))
                             .epsilon(std::is_same_v<typename D::Scalar, double> ? 1e-12 : 1e-6));
    CHECK(s.max == static_cast<double>(x.maxCoeff()));
    CHECK(s.min == static_cast<double>(x.minCoeff()));
  }
}

}  // namespace

TEST_CASE("matrices arrays maps blocks and refs are read in place") {
  Eigen::MatrixXf m = Eigen::MatrixXf::Random(300, 257);
  check_in_place(m);
  check_in_place(m.block(3, 5, 100, 31));            // column-major block: outer stride 300
  check_in_place(m.row(7));                          // inner stride 300
  check_in_place(m.col(9));
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> r =
      Eigen::MatrixXd::Random(64, 90);
  check_in_place(r);
  check_in_place(r.block(10, 20, 30, 40));
  check_in_place(r.col(3));                          // a column of a row-major matrix
  Eigen::ArrayXXd a = Eigen::ArrayXXd::Random(17, 19);
  check_in_place(a);
  std::vector<float> buf(1000);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i) * 0.5f - 100.0f;
  Eigen::Map<const Eigen::MatrixXf, 0, Eigen::OuterStride<>> strided(buf.data(), 10, 20, Eigen::OuterStride<>(40));
  check_in_place(strided);
  Eigen::Map<const Eigen::VectorXf, 0, Eigen::InnerStride<3>> every_third(buf.data(), 300);
  check_in_place(every_third);
  const Eigen::Ref<const Eigen::MatrixXf> ref = m.block(0, 0, 50, 50);
  check_in_place(ref);
  Eigen::MatrixXf empty(0, 5);
  CHECK(mldiag::compute_stats(empty).empty());
}

TEST_CASE("Eigen half and bfloat16 matrices are read as mldiag's 16-bit types") {
  Eigen::Matrix<Eigen::half, Eigen::Dynamic, Eigen::Dynamic> h(8, 9);
  Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, Eigen::Dynamic> b(8, 9);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 9; ++j) {
      h(i, j) = Eigen::half(static_cast<float>(i - j) * 0.25f);
      b(i, j) = Eigen::bfloat16(static_cast<float>(i * j) - 10.0f);
    }
  const auto sh = mldiag::compute_stats(h);
  const auto sb = mldiag::compute_stats(b);
  CHECK(sh.l2_norm() == doctest::Approx(h.cast<float>().cast<double>().norm()).epsilon(1e-12));
  CHECK(sb.l2_norm() == doctest::Approx(b.cast<float>().cast<double>().norm()).epsilon(1e-12));
  CHECK(sh.max == static_cast<double>(static_cast<float>(h.cast<float>().maxCoeff())));
}

TEST_CASE("entropy reads Eigen rows in storage order") {
  Eigen::Matrix<double, 3, 4, Eigen::RowMajor> z;
  z << -1, 0, 1, -std::numeric_limits<double>::infinity(), 0, 0, 0, 0, 10000, 10001, 10002, 10003;
  const auto e = mldiag::entropy_from_logits(z, 4);
  CHECK(e.rows == 3);
  CHECK(e.min == doctest::Approx(0.832396).epsilon(1e-6));
  CHECK(e.max == doctest::Approx(std::log(4.0)).epsilon(1e-14));
}
