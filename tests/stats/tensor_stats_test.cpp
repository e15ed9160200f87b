// SPDX-License-Identifier: Apache-2.0
// tensor_stats and compute_stats against independent references: hand-derived values and
// long double sums over values decoded one by one (tests/support/reference.hpp).
#include <doctest/doctest.h>

#include "mldiag/stats/compute.hpp"

#include "../support/reference.hpp"
#include "wide_reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <span>
#include <vector>

using mldiag_test::check_against;
using mldiag_test::reference_of;
using mldiag_test::relative_error;

namespace {

template <class T>
T from_bits(std::uint64_t bits) {
  if constexpr (std::is_same_v<T, double>) return std::bit_cast<double>(bits);
  else if constexpr (std::is_same_v<T, float>) return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
  else return T::from_bits(static_cast<decltype(T{}.bits)>(bits));
}

template <class T>
T make(double v) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v);
  else return T(v);
}

// Special bit patterns of each format: NaNs with payloads, infinities, denormals, zeros.
template <class T>
std::vector<T> specials() {
  if constexpr (std::is_same_v<T, double>) {
    return {from_bits<T>(0x7ff8000000000001ull), from_bits<T>(0xfff0000000000123ull),
            from_bits<T>(0x7ff0000000000000ull), from_bits<T>(0xfff0000000000000ull),
            from_bits<T>(1), from_bits<T>(0x8000000000000001ull), from_bits<T>(0),
            from_bits<T>(0x8000000000000000ull)};
  } else if constexpr (std::is_same_v<T, float>) {
    return {from_bits<T>(0x7fc00001), from_bits<T>(0xff800123), from_bits<T>(0x7f800000),
            from_bits<T>(0xff800000), from_bits<T>(1), from_bits<T>(0x80000001),
            from_bits<T>(0), from_bits<T>(0x80000000)};
  } else if constexpr (std::is_same_v<T, mldiag::half>) {
    return {from_bits<T>(0x7e01), from_bits<T>(0xfc01), from_bits<T>(0x7c00),
            from_bits<T>(0xfc00), from_bits<T>(1), from_bits<T>(0x8001), from_bits<T>(0),
            from_bits<T>(0x8000)};
  } else if constexpr (std::is_same_v<T, mldiag::bfloat16>) {
    return {from_bits<T>(0x7fc1), from_bits<T>(0xff81), from_bits<T>(0x7f80),
            from_bits<T>(0xff80), from_bits<T>(1), from_bits<T>(0x8001), from_bits<T>(0),
            from_bits<T>(0x8000)};
  } else if constexpr (std::is_same_v<T, mldiag::float8_e4m3>) {
    return {from_bits<T>(0x7f), from_bits<T>(0xff), from_bits<T>(1), from_bits<T>(0x81),
            from_bits<T>(0), from_bits<T>(0x80)};
  } else {
    return {from_bits<T>(0x7d), from_bits<T>(0xff), from_bits<T>(0x7c), from_bits<T>(0xfc),
            from_bits<T>(1), from_bits<T>(0x81), from_bits<T>(0), from_bits<T>(0x80)};
  }
}

// Random values in the format's comfortable range with the specials planted at random spots.
template <class T>
std::vector<T> random_tensor(std::size_t n, std::uint64_t seed, double mean, double sd) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(mean, sd);
  std::vector<T> x(n);
  for (auto& v : x) v = make<T>(normal(rng));
  const auto sp = specials<T>();
  if (n > 0) {
    for (std::size_t k = 0; k < std::min<std::size_t>(n / 3 + 1, 40); ++k) {
      x[std::uniform_int_distribution<std::size_t>(0, n - 1)(rng)] = sp[k % sp.size()];
    }
  }
  return x;
}

// Sizes around the block (4096) and unit (65536) boundaries.
constexpr std::size_t sizes[] = {0, 1, 2, 15, 16, 17, 4095, 4096, 4097, 65535, 65536, 65537, 200003};

template <class T>
void check_random(double mean, double sd) {
  for (std::size_t n : sizes) {
    const auto x = random_tensor<T>(n + 1, 1000 + n, mean, sd);
    // From the second element: a start that is not aligned to the element's natural vector.
    const std::span<const T> view(x.data() + 1, n);
    CAPTURE(n);
    check_against(mldiag::compute_stats(view), reference_of(view), mldiag_test::contract_tol<T>);
  }
}

}  // namespace

TEST_CASE("L2 norm of 1..12 is sqrt(650) = 25.495098") {
  std::vector<float> x;
  for (int i = 1; i <= 12; ++i) x.push_back(static_cast<float>(i));
  const auto s = mldiag::compute_stats(x);
  CHECK(s.count == 12);
  CHECK(s.l2_norm() == doctest::Approx(25.495098).epsilon(1e-7));
  CHECK(s.mean() == doctest::Approx(6.5).epsilon(1e-15));
  // population variance of 1..n is (n^2 - 1) / 12
  CHECK(s.variance() == doctest::Approx(143.0 / 12.0).epsilon(1e-14));
  CHECK(s.min == 1.0);
  CHECK(s.max == 12.0);
  CHECK(s.rms() == doctest::Approx(std::sqrt(650.0 / 12.0)).epsilon(1e-14));
}

TEST_CASE("NaN and Inf and zeros are counted by bit pattern and moments cover finite values") {
  std::vector<float> x = {1.0f, -0.0f, 0.0f, std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), -2.0f};
  const auto s = mldiag::compute_stats(x);
  CHECK(s.count == 9);
  CHECK(s.nan == 2);
  CHECK(s.pos_inf == 1);
  CHECK(s.neg_inf == 1);
  CHECK(s.zeros == 2);  // the denormal is not a zero
  CHECK(s.finite() == 5);
  CHECK(s.min == -2.0);
  CHECK(s.max == 1.0);
  CHECK(s.max_abs == 2.0);
  CHECK(s.l2_norm() == doctest::Approx(std::sqrt(5.0)).epsilon(1e-15));
}

TEST_CASE_TEMPLATE("random tensors with planted specials match the long double reference", T,
                   double, float, mldiag::half, mldiag::bfloat16, mldiag::float8_e4m3,
                   mldiag::float8_e5m2) {
  check_random<T>(0.0, 1.0);
  check_random<T>(3.0, 0.25);  // a mean well away from zero: no cancellation allowed
}

TEST_CASE("the L2 norm stays finite and accurate for huge and tiny float64 and float32") {
  for (double magnitude : {1e300, 1e-300, 3e38, 1e-38, 4.9e-324}) {
    std::vector<double> x(10000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = magnitude * (1.0 + static_cast<double>(i % 7));
    CAPTURE(magnitude);
    const auto s = mldiag::compute_stats(x);
    CHECK(std::isfinite(s.l2_norm()));
    check_against(s, reference_of(std::span<const double>(x)));
  }
  for (float magnitude : {3.0e38f, 1.0e38f, 1.0e-38f, 1.0e-45f}) {
    std::vector<float> x(5000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? -magnitude : magnitude);
    CAPTURE(magnitude);
    const auto s = mldiag::compute_stats(x);
    CHECK(std::isfinite(s.l2_norm()));
    CHECK(relative_error(s.l2_norm(), reference_of(std::span<const float>(x)).l2) < 1e-6);
  }
}

TEST_CASE_TEMPLATE("every finite value of a narrow format at once has the reference L2 norm", T,
                   mldiag::half, mldiag::bfloat16, mldiag::float8_e4m3, mldiag::float8_e5m2) {
  constexpr std::uint32_t patterns = sizeof(T) == 2 ? 65536u : 256u;
  std::vector<T> x;
  for (std::uint32_t b = 0; b < patterns; ++b) x.push_back(from_bits<T>(b));
  const auto s = mldiag::compute_stats(x);
  const auto r = reference_of(std::span<const T>(x));
  CHECK(std::isfinite(s.l2_norm()));
  CHECK(relative_error(s.l2_norm(), r.l2) < 1e-6);
  check_against(s, r, mldiag_test::contract_tol<T>);
}

TEST_CASE("merging partial results equals the statistics of the concatenation") {
  std::vector<double> a = {1, 2, 3, 4}, b = {10, -20, std::numeric_limits<double>::quiet_NaN()};
  std::vector<double> ab = a;
  ab.insert(ab.end(), b.begin(), b.end());
  const auto merged = mldiag::merge(mldiag::compute_stats(a), mldiag::compute_stats(b));
  const auto direct = mldiag::compute_stats(ab);
  CHECK(merged.count == direct.count);
  CHECK(merged.nan == 1);
  CHECK(merged.min == -20.0);
  CHECK(merged.max == 10.0);
  CHECK(merged.mean() == doctest::Approx(0.0).epsilon(1e-15));  // (1+2+3+4+10-20)/6
  CHECK(merged.l2_norm() == doctest::Approx(std::sqrt(530.0)).epsilon(1e-14));
  // Parts of very different scales merge without losing either.
  std::vector<double> big(100, 1e200), tiny(100, 1e-200);
  const auto m = mldiag::merge(mldiag::compute_stats(tiny), mldiag::compute_stats(big));
  CHECK(relative_error(m.l2_norm(), 1e201L) < 1e-12);
  CHECK(m.max_abs == 1e200);
}

TEST_CASE("an empty range gives an empty mergeable result and null with a size is an error") {
  const auto e = mldiag::compute_stats(std::span<const float>());
  CHECK(e.empty());
  CHECK(e.l2_norm() == 0.0);
  CHECK(e.variance() == 0.0);
  std::vector<float> one = {4.0f};
  const auto m = mldiag::merge(e, mldiag::compute_stats(one));
  CHECK(m.count == 1);
  CHECK(m.l2_norm() == 4.0);
  CHECK(mldiag::merge(m, e) == m);
  CHECK_THROWS_WITH_AS((void)mldiag::compute_stats(mldiag::tensor_ref("w", nullptr, 3, mldiag::dtype::f32)),
                       doctest::Contains("mldiag: tensor_ref 'w': null pointer with 3 elements"),
                       mldiag::error);
}

TEST_CASE("a tensor in CUDA memory is refused by the host engine with a message") {
  float x = 1.0f;
  const mldiag::tensor_ref t("grad", &x, 1, mldiag::dtype::f32, mldiag::device::cuda(0));
  CHECK_THROWS_WITH_AS((void)mldiag::compute_stats(t), doctest::Contains("host engine reads host memory"),
                       mldiag::error);
}

TEST_CASE("a strided view of row-major memory gives exactly the contiguous result") {
  const auto x = random_tensor<float>(3 * 70001, 5, 0.5, 2.0);
  // [3, 70001] row-major described with strides, and the whole buffer as a span.
  const mldiag::strided_view<float> v(x.data(), {3, 70001}, {70001, 1},
                                      static_cast<std::int64_t>(x.size()));
  CHECK(mldiag::compute_stats(v) == mldiag::compute_stats(x));
  // Column 7 of the same buffer seen as [70001, 3]: compare with the gathered copy.
  const mldiag::strided_view<float> col(x.data() + 7, {70001 / 3}, {3},
                                        static_cast<std::int64_t>(x.size()) - 7);
  std::vector<float> copy;
  for (std::size_t i = 0; i < 70001 / 3; ++i) copy.push_back(x[7 + 3 * i]);
  CHECK(mldiag::compute_stats(col) == mldiag::compute_stats(copy));
  check_against(mldiag::compute_stats(col), reference_of(std::span<const float>(copy)),
                mldiag_test::contract_tol<float>);
}

TEST_CASE("a part of zeros merges into the scale of the whole") {
  // A part of zeros has scale exponent 0; values below 1 have a negative one. The merge must
  // land on the exponent of the whole's max_abs, as compute_stats of the concatenation does
  // (issue 10: a rank whose shard is all zeros, e.g. dead ReLU rows).
  const std::vector<double> zeros(5, 0.0), small = {0.25, -0.125, 0.0625};
  std::vector<double> all = zeros;
  all.insert(all.end(), small.begin(), small.end());
  const auto whole = mldiag::compute_stats(std::span<const double>(all));
  const auto z = mldiag::compute_stats(std::span<const double>(zeros));
  const auto s = mldiag::compute_stats(std::span<const double>(small));
  CHECK(z.scale_exp == 0);
  CHECK(whole.scale_exp == -1);  // max_abs 0.25 = 0.5 * 2^-1
  for (const auto& m : {mldiag::merge(z, s), mldiag::merge(s, z)}) {
    CHECK(m.scale_exp == whole.scale_exp);
    CHECK(m.count == 8);
    CHECK(m.zeros == 5);
    CHECK(m.mean() == doctest::Approx(whole.mean()).epsilon(1e-15));
    CHECK(m.l2_norm() == doctest::Approx(whole.l2_norm()).epsilon(1e-15));
  }
}

// ---- issue 16: the accuracy contract at its edges, against a __float128 reference ---------

TEST_CASE("the L2 norm and stddev are finite when the true value is near the largest double") {
  constexpr double big = std::numeric_limits<double>::max();
  // {DBL_MAX, 0 x (n-1)}: the L2 norm is DBL_MAX exactly, the stddev DBL_MAX sqrt(n-1) / n.
  // Each size alone, so the first check that fails names it (4088 of them were +Inf).
  std::size_t l2_inf = 0, sd_bad = 0, l2_bad = 0;
  for (std::size_t n = 2; n <= 4096; ++n) {
    std::vector<double> x(n, 0.0);
    x[0] = big;
    const auto s = mldiag::compute_stats(x);
    const auto r = mldiag_test::wide_moments_of(x);
    if (!std::isfinite(s.l2_norm())) ++l2_inf;
    if (!(mldiag_test::wide_relative_error(s.l2_norm(), r.l2) <= 1e-6)) ++l2_bad;
    if (!(mldiag_test::wide_relative_error(s.stddev(), mldiag_test::wide_sqrt(r.variance)) <= 1e-6)) ++sd_bad;
  }
  CHECK(l2_inf == 0);
  CHECK(l2_bad == 0);
  CHECK(sd_bad == 0);

  // Values whose norm is just below DBL_MAX (true value representable): finite and close;
  // then the same tensor as float64 pieces merged in another order.
  for (double fraction : {1.0 - 1e-9, 1.0 - 1e-15, 0.999}) {
    for (std::size_t n : std::initializer_list<std::size_t>{2, 7, 4096, 4097, 70000}) {
      std::vector<double> x(n);
      std::mt19937_64 rng(n);
      std::uniform_real_distribution<double> u(0.5, 1.0);
      for (auto& v : x) v = u(rng) * (rng() % 2 ? 1.0 : -1.0);
      const auto r0 = mldiag_test::wide_moments_of(x);
      const double k = static_cast<double>(static_cast<mldiag_test::wide>(big) * fraction / r0.l2);
      for (auto& v : x) v *= k;  // now the L2 norm is fraction * DBL_MAX (to a few ulps)
      const auto r = mldiag_test::wide_moments_of(x);
      CAPTURE(fraction);
      CAPTURE(n);
      REQUIRE(r.l2 <= static_cast<mldiag_test::wide>(big));
      const auto s = mldiag::compute_stats(x);
      CHECK(std::isfinite(s.l2_norm()));
      CHECK(mldiag_test::wide_relative_error(s.l2_norm(), r.l2) <= 1e-12);
      CHECK(mldiag_test::wide_relative_error(s.stddev(), mldiag_test::wide_sqrt(r.variance)) <= 1e-12);
      CHECK(std::isfinite(s.rms()));
      CHECK(std::fabs(s.mean()) <= s.max_abs);
    }
  }
}

TEST_CASE("above the double range the L2 norm saturates within 1e-6 and is +Inf beyond it") {
  constexpr double big = std::numeric_limits<double>::max();
  // True norm DBL_MAX (1 + 1e-7): within the contract's 1e-6 of DBL_MAX, so DBL_MAX.
  // True norm sqrt(2) DBL_MAX: +Inf, as documented; stddev, rms and mean stay finite.
  const std::vector<double> just_over = {big, big * std::sqrt(2e-7 + 1e-14)};
  const auto a = mldiag::compute_stats(just_over);
  CHECK(a.l2_norm() == big);
  CHECK(mldiag_test::wide_relative_error(a.l2_norm(), mldiag_test::wide_moments_of(just_over).l2) <= 1e-6);
  const std::vector<double> two = {big, big}, opposite = {big, -big};
  const auto b = mldiag::compute_stats(two), c = mldiag::compute_stats(opposite);
  CHECK(b.l2_norm() == std::numeric_limits<double>::infinity());
  CHECK(b.rms() == big);
  CHECK(b.mean() == big);
  CHECK(b.stddev() == 0.0);
  CHECK(c.stddev() == big);  // exactly DBL_MAX: finite, and 0 relative error
  CHECK(c.mean() == 0.0);
  CHECK(c.rms() == big);
  CHECK(c.variance() == std::numeric_limits<double>::infinity());  // 3.2e616: documented
}

namespace {
// Outliers of 2^43 among ones, at the positions `at` of n + 1 elements of type T.
template <class T>
std::vector<T> ones_with_outliers(std::size_t n, std::initializer_list<std::size_t> at) {
  std::vector<T> x(n + 1, make<T>(1.0));
  for (std::size_t i : at) x[i] = make<T>(0x1p43);
  return x;
}
}  // namespace

TEST_CASE_TEMPLATE("the L2 norm does not depend on which element of a block is an outlier", T, double, float,
                   mldiag::bfloat16) {
  // The block's first element was its shift: an outlier there made M2 = q - s^2/n cancel,
  // losing log2(block) bits (L2 error 1.5e-10 on 4096 ones after one 2^43). Every position
  // of the outlier must now be within the rounding of the sums themselves, and the stddev
  // and mean with it. float64 sums its scaled squares in lanes of 2048 (measured 2.8e-14
  // here, bound 2048 * 2^-53 = 2.3e-13; it was 2.3e-10); the narrow formats' squares are
  // exact in double and came out correctly rounded (1e-16; they were 1.1e-13) until the host
  // kernel summed them in float lanes (issue 18): they are now held to the 1e-6 contract.
  const double tol = std::is_same_v<T, double> ? 1e-13 : mldiag_test::contract_tol<T>;
  // The shift is now the median of a block's first, middle and last elements, so the cases
  // that reach the second pass (needs_reshift) have two of those three as outliers.
  using at = std::initializer_list<std::size_t>;
  for (std::size_t n : std::initializer_list<std::size_t>{4096, 4095, 9000}) {
    for (const at& where : {at{0}, at{1}, at{17}, at{4095}, at{n / 2}, at{n}, at{0, 2048}, at{0, 4095},
                            at{2048, 4095}, at{0, 2048, 4095}, at{0, 1, 2}}) {
      const auto x = ones_with_outliers<T>(n, where);
      const auto s = mldiag::compute_stats(x);
      std::vector<double> d(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) d[i] = static_cast<double>(x[i]);
      const auto r = mldiag_test::wide_moments_of(d);
      CAPTURE(n);
      CAPTURE(*where.begin());
      CAPTURE(where.size());
      CHECK(mldiag_test::wide_relative_error(s.l2_norm(), r.l2) <= tol);
      CHECK(mldiag_test::wide_relative_error(s.stddev(), mldiag_test::wide_sqrt(r.variance)) <= tol);
      CHECK(mldiag_test::wide_relative_error(s.mean(), r.mean) <= tol);
    }
  }
  // Gaussian blocks whose first and last elements are 1e4-sigma outliers (a [rows, 4096]
  // matrix with two odd columns), with and without a NaN (the careful path).
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(3.0, 1.0);
  for (bool with_nan : {false, true}) {
    std::vector<T> x(3 * 4096 + 5);
    for (auto& v : x) v = make<T>(normal(rng));
    for (std::size_t b = 0; b < x.size(); b += 4096) x[b] = x[std::min(x.size(), b + 4096) - 1] = make<T>(1e4);
    if (with_nan) x[4096 + 9] = make<T>(std::numeric_limits<double>::quiet_NaN());
    std::vector<double> d;
    for (const T& v : x)
      if (std::isfinite(static_cast<double>(v))) d.push_back(static_cast<double>(v));
    const auto s = mldiag::compute_stats(x);
    const auto r = mldiag_test::wide_moments_of(d);
    CAPTURE(with_nan);
    CHECK(s.nan == (with_nan ? 1u : 0u));
    CHECK(mldiag_test::wide_relative_error(s.l2_norm(), r.l2) <= tol);
    CHECK(mldiag_test::wide_relative_error(s.stddev(), mldiag_test::wide_sqrt(r.variance)) <= tol);
  }
}

TEST_CASE("float64 variance survives a mean far above the spread") {
  // 1e10 + 1e-3 N(0, 1): |mean| / std = 1e13. Block means rounded to a double lost the
  // differences Chan's merge needs (1.4e-5 relative error in the variance at 8192 elements).
  for (std::size_t n : std::initializer_list<std::size_t>{8192, 4097, 65536 + 4096 + 3, 300000}) {
    std::mt19937_64 rng(n);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> x(n);
    for (auto& v : x) v = 1e10 + 1e-3 * normal(rng);
    const auto s = mldiag::compute_stats(x);
    const auto r = mldiag_test::wide_moments_of(x);
    CAPTURE(n);
    // Measured 1e-13 at most (the low part of the mean holds 24 more bits: 2^-77 of it).
    CHECK(mldiag_test::wide_relative_error(s.variance(), r.variance) <= 1e-11);
    CHECK(mldiag_test::wide_relative_error(s.stddev(), mldiag_test::wide_sqrt(r.variance)) <= 1e-11);
    CHECK(mldiag_test::wide_relative_error(s.mean(), r.mean) <= 1e-15);
    CHECK(mldiag_test::wide_relative_error(s.l2_norm(), r.l2) <= 1e-15);
  }
  // Constructed: block A alternates 1, 1 + u and block B 1 + u, 1 + 2u (u = 2^-52), so the
  // block means 1 + u/2 and 1 + 3u/2 are not doubles; rounded to even they were 1 and 1 + 2u,
  // and the variance came out 2.5x the true u^2 / 2 (150% error). Exactly u^2 / 2 now.
  const double u = 0x1p-52;
  std::vector<double> x(2 * 4096);
  for (std::size_t i = 0; i < 4096; ++i) x[i] = 1.0 + (i % 2 ? u : 0.0);
  for (std::size_t i = 4096; i < x.size(); ++i) x[i] = 1.0 + (i % 2 ? 2 * u : u);
  const auto s = mldiag::compute_stats(x);
  const auto r = mldiag_test::wide_moments_of(x);
  REQUIRE(r.variance == static_cast<mldiag_test::wide>(u) * u / 2);
  CHECK(mldiag_test::wide_relative_error(s.variance(), r.variance) <= 1e-12);
  CHECK(mldiag_test::wide_relative_error(s.mean(), r.mean) == 0.0);
  // The same through merges of the two halves in both orders.
  const auto a = mldiag::compute_stats(std::span<const double>(x.data(), 4096));
  const auto b = mldiag::compute_stats(std::span<const double>(x.data() + 4096, 4096));
  CHECK(mldiag_test::wide_relative_error(mldiag::merge(a, b).variance(), r.variance) <= 1e-12);
  CHECK(mldiag_test::wide_relative_error(mldiag::merge(b, a).variance(), r.variance) <= 1e-12);
}

TEST_CASE("float32 data with a large mean keeps its variance across blocks") {
  // fp32 1000 + 1e-4 N(0,1): the data are coarsely quantized (ulp 6e-5) but the reference is
  // of the same floats, so only the library's own rounding counts.
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<float> x(200003);
  for (auto& v : x) v = static_cast<float>(1000.0 + 1e-4 * normal(rng));
  const auto s = mldiag::compute_stats(x);
  const auto r = mldiag_test::wide_moments_of(x);
  CHECK(mldiag_test::wide_relative_error(s.variance(), r.variance) <= 1e-9);
  CHECK(mldiag_test::wide_relative_error(s.mean(), r.mean) <= 1e-15);
}

TEST_CASE("times_pow2 and scale_exponent equal std::ldexp and std::frexp, bit for bit") {
  // The block finish scales by powers of two with a multiply and reads exponents from the
  // bits (no library call); the library functions are the reference, on normal, denormal,
  // signed and extreme values, and k from beyond the multiply's range on both sides.
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> exponent(-1074, 1023), shift(-2100, 2100);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp((i % 2 == 0 ? 1.0 : -1.0) * mantissa(rng), exponent(rng));
    const int k = i % 7 == 0 ? -1022 + i % 3 : shift(rng);
    const double want = std::ldexp(x, k), got = mldiag::detail::times_pow2(x, k);
    if (std::bit_cast<std::uint64_t>(want) != std::bit_cast<std::uint64_t>(got)) {
      FAIL_CHECK("times_pow2(" << x << ", " << k << ") = " << got << ", ldexp gives " << want);
    }
    const double a = std::fabs(x);
    int e = 0;
    (void)std::frexp(a, &e);
    const int want_e = a == 0.0 ? 0 : std::min(std::max(e, -1000), 1000);
    if (mldiag::detail::scale_exponent(a) != want_e) {
      FAIL_CHECK("scale_exponent(" << a << ") = " << mldiag::detail::scale_exponent(a) << ", frexp gives " << want_e);
    }
    ++checked;
  }
  CHECK(checked == 200000);
  CHECK(mldiag::detail::scale_exponent(0.0) == 0);
  CHECK(mldiag::detail::scale_exponent(std::numeric_limits<double>::denorm_min()) == -1000);
  CHECK(mldiag::detail::scale_exponent(1.0) == 1);
  CHECK(mldiag::detail::times_pow2(3.0, -1) == 1.5);
}
