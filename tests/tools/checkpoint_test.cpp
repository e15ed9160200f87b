// SPDX-License-Identifier: Apache-2.0
// Tests of the checkpoint readers and commands (tools/cli/checkpoint.hpp, checkpoint_stats.hpp,
// checkpoint_diff.hpp and what they include). Three suites, one CTest entry
// each (tests/tools/checkpoint.cmake):
//   readers: bad inputs built here byte by byte, determinism, diff rules;
//   numpy:   files written by numpy and a hand-written Python safetensors writer
//            (make_checkpoints.py, a CTest fixture), every dtype against a long-double
//            reference computed from the values the writer recorded; exits 77 (skipped)
//            when the generated files are absent (no numpy);
//   big:     a sparse 13 GiB safetensors file, its statistics and the peak RSS.
#define DOCTEST_CONFIG_IMPLEMENT
#include "../support/doctest_run.hpp"

#include "cli/checkpoint.hpp"
#include "cli/checkpoint_diff.hpp"
#include "cli/checkpoint_stats.hpp"
#include "mldiag/report/json.hpp"
#include "mldiag/stats/compute.hpp"

#include <fcntl.h>
#include <sys/resource.h>  // getrusage
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace mldiag::cli;

namespace {

// ---- files ----------------------------------------------------------------------------------

fs::path scratch_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("mldiag-checkpoint-test-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

struct scratch_cleanup {
  ~scratch_cleanup() {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("mldiag-checkpoint-test-" + std::to_string(::getpid())), ec);
  }
} cleanup_at_exit;

std::string write_file(const std::string& name, const std::string& content) {
  const fs::path p = scratch_dir() / name;
  std::ofstream(p, std::ios::binary).write(content.data(), static_cast<std::streamsize>(content.size()));
  return p.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string le(std::uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

template <class T>
std::string raw(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

std::string safetensors(const std::string& header, const std::string& data) {
  return le(header.size(), 8) + header + data;
}

std::string npy(const std::string& dict, const std::string& data) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + le(h.size(), 2) + h + data;
}

// A zip archive of stored members (CRC fields left 0: the readers do not check stored CRCs).
std::string zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string body, central;
  for (const auto& [name, content] : members) {
    const std::uint64_t at = body.size();
    body += le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(0, 4) + le(content.size(), 4) +
            le(content.size(), 4) + le(name.size(), 2) + le(0, 2) + name + content;
    central += le(0x02014b50, 4) + le(20, 2) + le(20, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(0, 4) +
               le(content.size(), 4) + le(content.size(), 4) + le(name.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) +
               le(0, 2) + le(0, 4) + le(at, 4) + name;
  }
  return body + central + le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(members.size(), 2) + le(members.size(), 2) +
         le(central.size(), 4) + le(body.size(), 4) + le(0, 2);
}

// The same as a Zip64 archive: 0xFFFFFFFF sizes and offsets with the 64-bit values in extra
// fields, a Zip64 end-of-central-directory record and its locator (what >4 GB .npz files use).
std::string zip64(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string body, central;
  const std::string ff = le(0xFFFFFFFF, 4);
  for (const auto& [name, content] : members) {
    const std::uint64_t at = body.size();
    body += le(0x04034b50, 4) + le(45, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(0, 4) + ff + ff + le(name.size(), 2) +
            le(20, 2) + name + le(1, 2) + le(16, 2) + le(content.size(), 8) + le(content.size(), 8) + content;
    central += le(0x02014b50, 4) + le(45, 2) + le(45, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(0, 4) + ff + ff +
               le(name.size(), 2) + le(28, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) + ff + name + le(1, 2) +
               le(24, 2) + le(content.size(), 8) + le(content.size(), 8) + le(at, 8);
  }
  const std::uint64_t record = body.size() + central.size();
  return body + central + le(0x06064b50, 4) + le(44, 8) + le(45, 2) + le(45, 2) + le(0, 4) + le(0, 4) +
         le(members.size(), 8) + le(members.size(), 8) + le(central.size(), 8) + le(body.size(), 8) +  // record
         le(0x07064b50, 4) + le(0, 4) + le(record, 8) + le(1, 4) +                                      // locator
         le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(0xFFFF, 2) + le(0xFFFF, 2) + ff + ff + le(0, 2);
}

// Opening (and reading) `path` throws mldiag::error naming the file and every fragment.
void check_refused(const std::string& path, std::initializer_list<const char*> fragments) {
  CAPTURE(path);
  try {
    const auto c = checkpoint::open(path);
    (void)checkpoint_stats(c, 1);
    FAIL("no error");
  } catch (const mldiag::error& e) {
    const std::string m = e.what();
    CAPTURE(m);
    CHECK(m.rfind("mldiag: ", 0) == 0);
    CHECK(m.find(fs::path(path).filename().string()) != std::string::npos);
    for (const char* f : fragments) {
      CAPTURE(f);
      CHECK(m.find(f) != std::string::npos);
    }
  }
}

bool same_bits(const mldiag::tensor_stats& a, const mldiag::tensor_stats& b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || a == b;
}

// ---- reference statistics in long double -----------------------------------------------------

struct reference {
  std::uint64_t count = 0, nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0, finite = 0;
  double min = HUGE_VAL, max = -HUGE_VAL, max_abs = 0;
  long double mean = 0, variance = 0, l2 = 0;
};

reference reference_of(const std::vector<double>& v) {
  reference r;
  long double sum = 0, sq = 0;
  for (const double x : v) {
    ++r.count;
    if (std::isnan(x)) { ++r.nan; continue; }
    if (std::isinf(x)) { ++(x > 0 ? r.pos_inf : r.neg_inf); continue; }
    if (x == 0) ++r.zeros;
    ++r.finite;
    r.min = std::min(r.min, x);
    r.max = std::max(r.max, x);
    r.max_abs = std::max(r.max_abs, std::fabs(x));
    sum += x;
    sq += static_cast<long double>(x) * x;
  }
  if (r.finite == 0) return r;
  r.mean = sum / static_cast<long double>(r.finite);
  long double m2 = 0;
  for (const double x : v)
    if (std::isfinite(x)) m2 += (x - r.mean) * (x - r.mean);
  r.variance = m2 / static_cast<long double>(r.finite);
  r.l2 = std::sqrt(sq);
  return r;
}

// The contract of docs/stats.md: 1e-12 for float64 tensors, 1e-6 for the narrower formats
// (summed in float lanes since issue 18), the variance at twice the bound (a square).
void check_against(const mldiag::tensor_stats& s, const reference& r, bool float64) {
  CHECK(s.count == r.count);
  CHECK(s.nan == r.nan);
  CHECK(s.pos_inf == r.pos_inf);
  CHECK(s.neg_inf == r.neg_inf);
  CHECK(s.zeros == r.zeros);
  if (r.finite == 0) return;
  CHECK(s.min == r.min);
  CHECK(s.max == r.max);
  CHECK(s.max_abs == r.max_abs);
  const long double tol = float64 ? 1e-12L : 1e-6L;
  CHECK(std::fabs(static_cast<long double>(s.mean()) - r.mean) <= tol * r.max_abs);
  const auto var_ref = static_cast<double>(r.variance);
  if (std::isinf(var_ref)) CHECK(std::isinf(s.variance()));
  else CHECK(std::fabs(static_cast<long double>(s.variance()) - r.variance) <= (float64 ? 1e-9L : 2e-6L) * r.variance + 1e-300L);
  // sqrt(sum x^2) above DBL_MAX (two values near +-DBL_MAX) is +Inf in double, rightly.
  if (std::isinf(static_cast<double>(r.l2))) CHECK(std::isinf(s.l2_norm()));
  else CHECK(std::fabs(static_cast<long double>(s.l2_norm()) - r.l2) <= tol * r.l2);
}

std::vector<double> read_f64(const std::string& path) {
  const std::string s = read_file(path);
  std::vector<double> v(s.size() / 8);
  if (!v.empty()) std::memcpy(v.data(), s.data(), v.size() * 8);
  return v;
}

std::string data_dir() {
  const char* d = std::getenv("MLDIAG_CKPT_DATA");
  return d ? d : "";
}

}  // namespace

// =============================================================================================
TEST_SUITE("readers") {

TEST_CASE("mapped_file maps a file, an empty file, and names a missing one") {
  const std::string p = write_file("five.bin", "hello");
  const mapped_file f(p);
  CHECK(f.size() == 5);
  CHECK(static_cast<char>(f.bytes()[4]) == 'o');
  f.release(0, 5);  // a hint: content stays
  CHECK(static_cast<char>(f.bytes()[0]) == 'h');
  const mapped_file e(write_file("empty.bin", ""));
  CHECK(e.size() == 0);
  CHECK(e.bytes().empty());
  try {
    const mapped_file m((scratch_dir() / "missing.safetensors").string());
    FAIL("no error");
  } catch (const mldiag::error& err) {
    CHECK(std::string(err.what()).find("missing.safetensors: cannot open") != std::string::npos);
  }
}

TEST_CASE("safetensors: tensors, dtypes and shapes from a hand-made file") {
  const std::vector<float> a = {1, -2, 3};
  const std::string header =
      R"({"__metadata__":{"k":"v"},"b":{"dtype":"I8","shape":[2],"data_offsets":[12,14]},)"
      R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"s":{"dtype":"F8_E4M3FN","shape":[],"data_offsets":[14,15]}})";
  const auto c = checkpoint::open(write_file("small.safetensors", safetensors(header, raw(a) + "\x05\xfb\x38")));
  REQUIRE(c.tensors().size() == 3);
  CHECK(c.format() == checkpoint_format::safetensors);
  CHECK(c.tensors()[0].name == "a");  // file order
  CHECK(c.tensors()[1].dtype() == "I8");
  CHECK(c.tensors()[2].dtype() == "F8_E4M3");
  CHECK(c.tensors()[2].shape.empty());
  const auto r = checkpoint_stats(c, 2);
  CHECK(r[0].stats.l2_norm() == doctest::Approx(std::sqrt(14.0)));
  CHECK(r[1].stats.min == -5);
  CHECK(r[1].stats.max == 5);
  CHECK(r[2].stats.max == 1.0);  // 0x38 = 1.0 in E4M3
}

TEST_CASE("bad inputs throw mldiag::error naming the file and the problem") {
  const std::string good_data = raw(std::vector<float>{1, 2, 3, 4});
  auto st = [&](const std::string& name, const std::string& header, const std::string& data) {
    return write_file(name, safetensors(header, data));
  };
  check_refused(write_file("empty.safetensors", ""), {"empty"});
  check_refused(write_file("short.safetensors", "\x10\x00"), {"truncated"});
  check_refused(write_file("beyond.safetensors", le(1000, 8) + "{}"), {"header length 1000", "beyond the end"});
  check_refused(st("range.safetensors", R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", good_data.substr(0, 8)),
                {"'t'", "out of range"});
  check_refused(st("mismatch.safetensors", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", good_data),
                {"'t'", "size mismatch"});
  check_refused(st("overlap.safetensors",
                   R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                   good_data),
                {"'a'", "'b'", "overlap"});
  check_refused(st("dtype.safetensors", R"({"t":{"dtype":"F4","shape":[4],"data_offsets":[0,16]}})", good_data),
                {"'t'", "'F4'", "supported: F64, F32"});
  check_refused(st("json.safetensors", "{not json}", good_data), {"safetensors header", "invalid JSON"});
  check_refused(st("neg.safetensors", R"({"t":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", good_data),
                {"'t'", "non-negative whole numbers"});
  check_refused(st("frac.safetensors", R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0.5,16]}})", good_data),
                {"non-negative whole numbers"});
  check_refused(st("order.safetensors", R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[16,8]}})", good_data),
                {"end before they begin"});
  check_refused(st("twice.safetensors",
                   R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                   good_data),
                {"'t'", "twice"});
  check_refused(st("huge.safetensors",
                   R"({"t":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", good_data),
                {"overflows"});
  check_refused(write_file("zip.safetensors", zip({{"a.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", good_data)}})),
                {"expected a safetensors file", "looks like a zip archive"});
  check_refused(write_file("text.safetensors", "version https://git-lfs.github.com/spec/v1\n"), {"looks like text"});
  // .npy
  check_refused(write_file("broken.npy", npy("{'descr': '<f4', 'fortran_order': Fals, 'shape': (4,), }", good_data)),
                {"broken .npy header"});
  check_refused(write_file("nokey.npy", npy("{'descr': '<f4', 'shape': (4,), }", good_data)), {"broken .npy header", "'fortran_order'"});
  check_refused(write_file("cut.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", good_data)),
                {"size mismatch", "truncated"});
  check_refused(write_file("cuthead.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "").substr(0, 40)),
                {"truncated .npy header"});
  check_refused(write_file("object.npy", npy("{'descr': '|O', 'fortran_order': False, 'shape': (4,), }", good_data)),
                {"object array"});
  check_refused(write_file("struct.npy", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", good_data)),
                {"structured dtype"});
  check_refused(write_file("complex.npy", npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", good_data)),
                {"'<c8'", "complex"});
  check_refused(write_file("notnpy.npy", "PK\x03\x04 a zip"), {"expected a .npy array", "looks like a zip"});
  // .npz
  const std::string member = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", good_data);
  const std::string archive = zip({{"w.npy", member}, {"v.npy", member}});
  std::string bad_cd = archive;
  bad_cd[bad_cd.size() - 22 - 2 * (46 + 5)] = 'X';  // the first central directory signature
  check_refused(write_file("cd.npz", bad_cd), {"corrupt zip", "central directory"});
  std::string bad_offset = archive;
  bad_offset[bad_offset.size() - 22 + 16] = '\x7f';  // central directory offset beyond the file
  check_refused(write_file("cdoff.npz", bad_offset), {"corrupt zip", "outside the archive"});
  check_refused(write_file("noend.npz", archive.substr(0, archive.size() - 10)), {"end-of-central-directory"});
  check_refused(write_file("torch.npz", zip({{"archive/data.pkl", "\x80\x02."}})), {"without .npy members", "archive/data.pkl"});
  check_refused(write_file("badmember.npz", zip({{"w.npy", "garbage garbage"}})), {"member 'w.npy'", "not a .npy array"});
  check_refused(write_file("twice.npz", zip({{"w.npy", member}, {"w.npy", member}})), {"'w'", "twice"});
  check_refused(write_file("random.bin", std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x00\x00", 11)), {"not a checkpoint"});
}

TEST_CASE("stored npz and npy written here: names, shapes, big-endian and Fortran order") {
  const std::vector<float> v = {1.5f, -2.0f, 0.0f, 8.0f, 3.0f, -1.0f};
  std::string be = raw(v);
  for (std::size_t i = 0; i < be.size(); i += 4) std::reverse(be.begin() + static_cast<std::ptrdiff_t>(i), be.begin() + static_cast<std::ptrdiff_t>(i) + 4);
  const auto c = checkpoint::open(write_file("two.npz", zip({
      {"le.npy", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", raw(v))},
      {"be.npy", npy("{\"descr\": \">f4\", \"fortran_order\": False, \"shape\": (6L,)}", be)},
      {"notes.txt", "hello"}})));
  REQUIRE(c.tensors().size() == 2);
  CHECK(c.skipped_members() == std::vector<std::string>{"notes.txt"});
  CHECK(c.tensors()[0].name == "le");
  CHECK(c.tensors()[0].fortran_order);
  CHECK(c.tensors()[0].shape == std::vector<std::uint64_t>{2, 3});
  CHECK_FALSE(c.tensors()[1].little_endian);
  const auto r = checkpoint_stats(c, 1);
  CHECK(same_bits(r[0].stats, r[1].stats));
  CHECK(same_bits(r[0].stats, mldiag::compute_stats(v)));
  const auto z = checkpoint::open(write_file("zip64.npz", zip64({{"x.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", raw(v))},
                                                                {"y.npy", npy("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", "\x09")}})));
  REQUIRE(z.tensors().size() == 2);
  CHECK(same_bits(checkpoint_stats(z, 1)[0].stats, r[0].stats));
  CHECK(checkpoint_stats(z, 1)[1].stats.max == 9);
  std::string cut64 = zip64({{"x.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", raw(v))}});
  cut64[cut64.size() - 22 - 20 + 8] = '\x70';  // the locator points past the file
  check_refused(write_file("cut64.npz", cut64), {"corrupt zip"});
  const auto one = checkpoint::open(write_file("weights.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", raw(std::vector<float>{4}))));
  CHECK(one.tensors()[0].name == "weights");
  CHECK(one.tensors()[0].shape.empty());
  CHECK(checkpoint_stats(one, 1)[0].stats.max == 4);
}

TEST_CASE("statistics are bit-identical for 1 and 3 threads and any window, and equal compute_stats") {
  std::mt19937_64 gen(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> a(300001);
  for (auto& x : a) x = normal(gen);
  a[65536] = std::numeric_limits<float>::quiet_NaN();
  a[200000] = -std::numeric_limits<float>::infinity();
  std::vector<std::uint16_t> b(70001);
  for (auto& x : b) x = static_cast<std::uint16_t>(gen());
  // One odd byte first: the F32 tensor starts misaligned in the file.
  const std::string header = R"({"odd":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                             R"("a":{"dtype":"F32","shape":[300001],"data_offsets":[1,1200005]},)"
                             R"("b":{"dtype":"BF16","shape":[70001],"data_offsets":[1200005,1340007]}})";
  const auto c = checkpoint::open(write_file("det.safetensors", safetensors(header, "\x09" + raw(a) + raw(b))));
  const auto r1 = checkpoint_stats(c, 1);
  const auto r3 = checkpoint_stats(c, 3);
  const auto small = checkpoint_stats(c, 3, 1);  // one unit per window
  REQUIRE(r1.size() == 3);
  for (std::size_t i = 0; i < r1.size(); ++i) {
    CAPTURE(r1[i].name);
    CHECK(same_bits(r1[i].stats, r3[i].stats));
    CHECK(same_bits(r1[i].stats, small[i].stats));
  }
  CHECK(same_bits(r1[1].stats, mldiag::compute_stats(a)));
  CHECK(r1[1].stats.nan == 1);
  CHECK(r1[1].stats.neg_inf == 1);
  const auto d1 = diff_checkpoints(c, c, 1);
  const auto d3 = diff_checkpoints(c, c, 3, 1);
  REQUIRE(d1.common.size() == 3);
  CHECK(d1.common[1].norm_diff == 0.0);
  CHECK(d1.common[1].non_finite == 2);
  CHECK(std::memcmp(&d1.common[1].norm_a, &d3.common[1].norm_a, 5 * sizeof(double)) == 0);
}

TEST_CASE("diff: added, removed, reshaped, zero norms and dtype changes") {
  const std::string a = safetensors(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("z":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                                    R"("gone":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
                                    R"("r":{"dtype":"F32","shape":[1],"data_offsets":[20,24]}})",
                                    raw(std::vector<float>{3, 4, 0, 0, 1, 1}));
  const std::string b = safetensors(R"({"x":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
                                    R"("z":{"dtype":"F64","shape":[2],"data_offsets":[16,32]},)"
                                    R"("new":{"dtype":"F32","shape":[1],"data_offsets":[32,36]},)"
                                    R"("r":{"dtype":"F32","shape":[1,1],"data_offsets":[36,40]}})",
                                    raw(std::vector<double>{3, 5, 0, 2}) + raw(std::vector<float>{1, 1}));
  const auto ca = checkpoint::open(write_file("a.safetensors", a));
  const auto cb = checkpoint::open(write_file("b.safetensors", b));
  const auto d = diff_checkpoints(ca, cb, 2);
  REQUIRE(d.common.size() == 2);
  CHECK(d.common[0].name == "x");
  CHECK(d.common[0].dtype_a == "F32");
  CHECK(d.common[0].dtype_b == "F64");
  CHECK(d.common[0].norm_a == 5.0);
  CHECK(d.common[0].norm_diff == 1.0);
  CHECK(d.common[0].relative == 0.2);
  CHECK(d.common[0].max_abs_diff == 1.0);
  CHECK(d.common[1].norm_a == 0.0);
  CHECK(std::isinf(d.common[1].relative));  // ||A|| = 0 < ||B - A||
  CHECK(d.removed == std::vector<std::string>{"gone"});
  CHECK(d.added == std::vector<std::string>{"new"});
  REQUIRE(d.reshaped.size() == 1);
  CHECK(d.reshaped[0].shape_b == std::vector<std::uint64_t>{1, 1});
  const auto same = diff_checkpoints(ca, ca, 1);
  CHECK(same.common[1].relative == 0.0);  // 0 / 0 -> 0
}

TEST_CASE("diff: a unit of zeros does not flush the tiny values of the next unit to 0") {
  // Unit 0 is all zeros (scale exponent 0), unit 1 holds 1e-200: merged at the exponent of
  // the larger part, the sums of unit 1 would underflow to 0.
  const std::size_t n = 2 * mldiag::detail::unit_elems;
  std::vector<double> a(n, 0.0), b(n, 0.0);
  for (std::size_t i = mldiag::detail::unit_elems; i < n; ++i) a[i] = 1e-200;
  const auto file = [&](const std::string& name, const std::vector<double>& v) {
    const std::string header = R"({"t":{"dtype":"F64","shape":[)" + std::to_string(n) +
                               R"(],"data_offsets":[0,)" + std::to_string(8 * n) + "]}}";
    return checkpoint::open(write_file(name, safetensors(header, raw(v))));
  };
  const auto ca = file("tiny_a.safetensors", a);
  const auto cb = file("tiny_b.safetensors", b);
  const auto d = diff_checkpoints(ca, cb, 2);
  REQUIRE(d.common.size() == 1);
  const double expected = 1e-200 * std::sqrt(static_cast<double>(mldiag::detail::unit_elems));
  CHECK(std::fabs(d.common[0].norm_a / expected - 1.0) < 1e-12);
  CHECK(std::fabs(d.common[0].norm_diff / expected - 1.0) < 1e-12);
  CHECK(d.common[0].norm_b == 0.0);
  CHECK(d.common[0].relative == doctest::Approx(1.0).epsilon(1e-12));
}

TEST_CASE("from_memory parses like open (the fuzzer's entry)") {
  const std::string bytes = npy("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", le(0xfffe, 2) + le(7, 2));
  const auto c = checkpoint::from_memory(std::as_bytes(std::span(bytes.data(), bytes.size())), "mem.npy");
  const auto r = checkpoint_stats(c, 1);
  CHECK(r[0].dtype == "I16");
  CHECK(r[0].stats.min == -2);
  CHECK(r[0].stats.max == 7);
}

}  // TEST_SUITE readers

// =============================================================================================
TEST_SUITE("numpy") {

TEST_CASE("every dtype, written by numpy and by a Python safetensors writer, against a long-double reference") {
  const std::string dir = data_dir();
  const auto manifest = mldiag::report::json::parse(read_file(dir + "/manifest.json"), "manifest.json");
  std::map<std::string, checkpoint> files;
  std::map<std::string, std::vector<tensor_report>> stats1, stats3;
  std::map<std::string, int> dtypes_seen;
  int tensors = 0;
  for (const auto& m : manifest.items()) {
    const std::string file = m.find("file")->string();
    const std::string name = m.find("tensor")->string();
    CAPTURE(file);
    CAPTURE(name);
#if !MLDIAG_CLI_HAS_ZLIB
    if (file == "compressed.npz") {  // built without zlib: refused, and says why
      check_refused(dir + "/" + file, {"without zlib"});
      continue;
    }
#endif
    if (!files.count(file)) {
      files.emplace(file, checkpoint::open(dir + "/" + file));
      stats1[file] = checkpoint_stats(files.at(file), 1);
      stats3[file] = checkpoint_stats(files.at(file), 3, 1 << 20);
    }
    const auto& c = files.at(file);
    const tensor_entry* t = c.find(name);
    REQUIRE(t != nullptr);
    const auto index = static_cast<std::size_t>(t - c.tensors().data());
    const auto& r = stats1[file][index];
    CHECK(r.name == name);
    const std::string written = m.find("dtype")->string();
    CHECK(r.dtype == (written == "F8_E4M3FN" ? "F8_E4M3" : written));  // one name per format
    std::vector<std::uint64_t> shape;
    for (const auto& e : m.find("shape")->items()) shape.push_back(static_cast<std::uint64_t>(e.number()));
    CHECK(r.shape == shape);
    const auto values = read_f64(dir + "/" + m.find("values")->string());
    check_against(r.stats, reference_of(values), r.dtype == "F64");
    CHECK(same_bits(r.stats, stats3[file][index].stats));
    ++dtypes_seen[r.dtype];
    ++tensors;
  }
  MESSAGE(tensors << " tensors checked");
  for (const char* d : {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64", "BOOL"}) {
    CAPTURE(d);
    CHECK(dtypes_seen[d] > 0);
  }
#if MLDIAG_CLI_HAS_ZLIB
  CHECK(files.at("compressed.npz").tensors()[0].where == tensor_entry::storage::deflated);
#endif
  CHECK(files.at("stored.npz").tensors()[0].where == tensor_entry::storage::in_place);
}

TEST_CASE("diff of a safetensors file and an npz against a long-double reference") {
  const std::string dir = data_dir();
  const auto a = checkpoint::open(dir + "/diff_a.safetensors");
  const auto b = checkpoint::open(dir + "/diff_b.npz");
  const auto d = diff_checkpoints(a, b, 3);
  CHECK(d.added == std::vector<std::string>{"only_b"});
  CHECK(d.removed == std::vector<std::string>{"only_a"});
  REQUIRE(d.reshaped.size() == 1);
  CHECK(d.reshaped[0].name == "reshaped");
  REQUIRE(d.common.size() == 3);
  for (const auto& t : d.common) {
    CAPTURE(t.name);
    const auto va = read_f64(dir + "/values/diff_a.safetensors__" + t.name + ".f64");
    const auto vb = read_f64(dir + "/values/diff_b.npz__" + t.name + ".f64");
    REQUIRE(va.size() == vb.size());
    long double sa = 0, sd = 0, mx = 0;
    std::uint64_t bad = 0;
    for (std::size_t i = 0; i < va.size(); ++i) {
      if (!std::isfinite(va[i]) || !std::isfinite(vb[i])) { ++bad; continue; }
      const long double diff = static_cast<long double>(vb[i]) - va[i];
      sa += static_cast<long double>(va[i]) * va[i];
      sd += diff * diff;
      mx = std::max(mx, std::fabs(diff));
    }
    CHECK(t.count == va.size());
    CHECK(t.non_finite == bad);
    CHECK(t.norm_a == doctest::Approx(static_cast<double>(std::sqrt(sa))).epsilon(1e-12));
    CHECK(t.norm_diff == doctest::Approx(static_cast<double>(std::sqrt(sd))).epsilon(1e-12));
    CHECK(t.max_abs_diff == static_cast<double>(mx));
    if (sa > 0) CHECK(t.relative == doctest::Approx(static_cast<double>(std::sqrt(sd / sa))).epsilon(1e-12));
  }
  CHECK(d.common[0].non_finite == 3);  // NaN and Inf in B, -Inf in A
  CHECK(d.common[1].dtype_a == "BF16");
  CHECK(d.common[1].dtype_b == "F64");
  CHECK(std::isinf(d.common[2].relative));  // ||A|| = 0
}

TEST_CASE("a damaged compressed member is refused with the member's name") {
  const std::string dir = data_dir();
#if !MLDIAG_CLI_HAS_ZLIB
  MESSAGE("built without zlib: compressed members are refused (checked above)");
  return;
#endif
  std::string bytes = read_file(dir + "/compressed.npz");
  const auto c = checkpoint::open(dir + "/compressed.npz");
  const tensor_entry* t = c.find("large");
  REQUIRE(t != nullptr);
  bytes[static_cast<std::size_t>(t->offset + t->compressed_size / 2)] ^= 0x5a;
  check_refused(write_file("damaged.npz", bytes), {"member 'large.npy'"});
  std::string cut = read_file(dir + "/stored.npz");
  check_refused(write_file("cut.npz", cut.substr(0, cut.size() / 2)), {"end-of-central-directory"});
}

}  // TEST_SUITE numpy

// =============================================================================================
TEST_SUITE("big") {

TEST_CASE("a sparse 13 GiB safetensors file: exact statistics, bounded resident memory") {
  const char* where = std::getenv("MLDIAG_CKPT_BIG_DIR");
  const fs::path path = fs::path(where ? where : fs::temp_directory_path().string()) / ("mldiag-big-" + std::to_string(::getpid()) + ".safetensors");
  struct remove_at_end {
    fs::path p;
    ~remove_at_end() { std::error_code ec; fs::remove(p, ec); }
  } guard{path};
  const std::uint64_t numel = (std::uint64_t{13} << 30) / 4;  // 13 GiB of F32
  std::string header = R"({"big":{"dtype":"F32","shape":[)" + std::to_string(numel) + R"(],"data_offsets":[0,)" +
                       std::to_string(numel * 4) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::uint64_t data = 8 + header.size();
  {
    const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(data + numel * 4)) == 0);
    const std::string head = le(header.size(), 8) + header;
    REQUIRE(::pwrite(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()));
    auto put = [&](std::uint64_t i, float v) {
      REQUIRE(::pwrite(fd, &v, 4, static_cast<off_t>(data + 4 * i)) == 4);
    };
    put(0, 1.5f);
    put(1, std::numeric_limits<float>::quiet_NaN());
    put(numel / 2, -3.0f);
    put(numel / 2 + 1, std::numeric_limits<float>::infinity());
    put(numel - 1, 2.0f);
    REQUIRE(::close(fd) == 0);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto c = checkpoint::open(path.string());
  const auto r = checkpoint_stats(c, 2);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const double peak_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;
  MESSAGE("13 GiB sparse safetensors: " << seconds << " s, peak RSS " << peak_mb << " MB");
  std::printf("big: %.1f s, %.1f GB/s, peak RSS %.0f MB\n", seconds, 13.0 * 1.073741824 / seconds, peak_mb);
  REQUIRE(r.size() == 1);
  const auto& s = r[0].stats;
  CHECK(s.count == numel);
  CHECK(s.nan == 1);
  CHECK(s.pos_inf == 1);
  CHECK(s.neg_inf == 0);
  CHECK(s.zeros == numel - 5);
  CHECK(s.min == -3.0);
  CHECK(s.max == 2.0);
  CHECK(s.max_abs == 3.0);
  const double n = static_cast<double>(numel - 2);
  CHECK(s.mean() == doctest::Approx(0.5 / n).epsilon(1e-9));
  CHECK(s.l2_norm() == doctest::Approx(std::sqrt(1.5 * 1.5 + 9.0 + 4.0)).epsilon(1e-12));
  CHECK(s.variance() == doctest::Approx(15.25 / n - (0.5 / n) * (0.5 / n)).epsilon(1e-9));
  CHECK(peak_mb < 1024.0);
}

}  // TEST_SUITE big

int main(int argc, char** argv) {
  // The numpy suite needs the files make_checkpoints.py writes: without them (no numpy),
  // say so and report "skipped" (77) rather than pass having checked nothing.
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.find("-ts=numpy") != std::string::npos || a.find("--test-suite=numpy") != std::string::npos) {
      if (data_dir().empty() || !fs::exists(data_dir() + "/manifest.json")) {
        std::printf("SKIP: no generated checkpoints in '%s' (make_checkpoints.py needs numpy: apt-get install python3-numpy)\n",
                    data_dir().c_str());
        return 77;
      }
    }
  }
  return mldiag_test::run(argc, argv);
}
