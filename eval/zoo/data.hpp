// SPDX-License-Identifier: Apache-2.0
/// The zoo's data, all of it real and shipped by Debian: the UCI digits (the eigen_mlp loader),
/// Fashion-MNIST (package dataset-fashion-mnist, IDX files read through zlib), two license
/// texts for the language models (the transformer example's corpus loader) and, for the text
/// classifier, windows of several license texts labelled by file (package base-files); for
/// the tabular family, three UCI tables from python3-sklearn, for the regression family the
/// UCI diabetes table from the same package (scripts/fetch-digits.sh), for the skip-gram
/// family the words of the license texts (base-files), for the lora family Fashion-MNIST
/// split by class, for the hetero_nll family a regression on the breast cancer table (one of
/// its columns from the others), and for the focal family class-imbalanced copies of the
/// digits and Fashion-MNIST.
#pragma once

#include "../../examples/eigen_mlp/mlp.hpp"
#include "../../examples/torch_transformer/transformer.hpp"

#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>  // snprintf
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>  // std::pair
#include <vector>

namespace zoo {

/// A classification (or reconstruction) table: inputs [n, features] in [0, 1], labels [n];
/// or, where `vocab` > 0, inputs [n, window] of int64 token ids.
struct table {
  torch::Tensor x_train, y_train, x_val, y_val;
  std::int64_t classes = 10, side = 8;  ///< images are side x side
  std::int64_t vocab = 0;               ///< token inputs: the vocabulary's size
  std::string source;
};

/// A character stream split into training and validation text.
struct text {
  examples::lm::corpus c;
  torch::Tensor train, val;  // [n] int64 token ids
};

/// A UCI table from scikit-learn's csv: `z` standardized with the training rows' mean and
/// standard deviation (the healthy recipe), `raw` the same rows with the features as the file
/// has them (the tabular family's inputs_not_normalized).
struct uci_table {
  table z, raw;
};

/// Skip-gram pairs of the license texts' words (load_license_words).
struct word_pairs {
  std::vector<table> by_window;
  torch::Tensor counts;  ///< [vocab] float: each word's count in the training blocks
  std::int64_t vocab = 0;
  std::string source;
};

struct data {
  std::optional<table> digits, fashion;
  /// lora: Fashion-MNIST's classes 0-4 (the base's pre-training) and 5-9 (the
  /// fine-tuning), each relabelled from 0 (class_range).
  std::optional<table> fashion_first5, fashion_last5;
  std::optional<uci_table> breast_cancer, wine, iris;  ///< tabular
  std::optional<uci_table> diabetes;  ///< regression: float targets [n, 1], `classes` 0
  /// hetero_nll: the breast cancer table's mean smoothness (column 4) from its other
  /// 29 columns (column_target).
  std::optional<uci_table> breast_cancer_smoothness;
  /// focal: the digits with classes 5-9 at a tenth of their rows, Fashion-MNIST
  /// long-tailed at 20:1 and 10:1 (step_imbalanced, long_tailed); validation balanced.
  std::optional<table> digits_step10, fashion_lt20, fashion_lt10;
  std::optional<table> licenses;  ///< text_cnn: which license a window of text comes from
  std::optional<word_pairs> words;  ///< skipgram: (center, context) pairs of license words
  std::optional<text> gpl, apache;
  std::vector<std::string> missing;  ///< what could not be loaded, as messages
  /// Where the UCI tables were looked for (third_party/data/, beside the digits): round 13's
  /// forecaster reads its series there itself.
  std::string dir;
};

/// The UCI digits, shuffled once (seed 7) into 1497 training and 300 validation images.
inline table load_digits(const std::string& path) {
  const auto d = examples::mlp::load_digits(path);
  const auto n = static_cast<std::int64_t>(d.y.size());
  auto x = torch::from_blob(const_cast<float*>(d.x.data()), {n, 64}, torch::kFloat).clone();
  std::vector<std::int64_t> labels(d.y.begin(), d.y.end());
  auto y = torch::tensor(labels, torch::kLong);
  torch::Generator gen = at::detail::createCPUGenerator(7);
  auto perm = torch::randperm(n, gen, torch::kLong);
  x = x.index_select(0, perm);
  y = y.index_select(0, perm);
  table t;
  t.x_train = x.slice(0, 0, n - 300);
  t.y_train = y.slice(0, 0, n - 300);
  t.x_val = x.slice(0, n - 300, n);
  t.y_val = y.slice(0, n - 300, n);
  t.source = d.source;
  return t;
}

/// A table in scikit-learn's csv format (breast_cancer.csv, wine_data.csv, iris.csv): a first
/// line "n_samples,n_features,class names...", then per row the features and the class index.
/// Shuffled once (seed 7), the first 80% for training and the rest for validation.
inline uci_table load_uci(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("mldiag: cannot read " + path + " (scripts/fetch-digits.sh fetches it)");
  auto fields = [](const std::string& line) {
    std::vector<std::string> out(1);
    for (const char ch : line) {
      if (ch == ',') out.emplace_back();
      else if (ch != '\r') out.back() += ch;
    }
    return out;
  };
  auto number = [&](const std::string& f) {
    double v = 0.0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (ec != std::errc() || end != f.data() + f.size())
      throw std::runtime_error("mldiag: " + path + ": '" + f +
                               "' is not a number; fetch it again (scripts/fetch-digits.sh)");
    return v;
  };
  std::string line;
  std::getline(in, line);
  const auto head = fields(line);
  if (head.size() < 4)
    throw std::runtime_error("mldiag: " + path + " has no 'n_samples,n_features,classes...' first line");
  const auto n = static_cast<std::int64_t>(number(head[0])), f = static_cast<std::int64_t>(number(head[1]));
  const auto classes = static_cast<std::int64_t>(head.size()) - 2;
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    const auto row = fields(line);
    if (static_cast<std::int64_t>(row.size()) != f + 1)
      throw std::runtime_error("mldiag: " + path + ": a row of " + std::to_string(row.size()) + " fields, not " +
                               std::to_string(f + 1));
    for (std::int64_t k = 0; k < f; ++k) xs.push_back(static_cast<float>(number(row[static_cast<std::size_t>(k)])));
    const auto label = static_cast<std::int64_t>(number(row.back()));
    if (label < 0 || label >= classes)
      throw std::runtime_error("mldiag: " + path + ": class " + row.back() + " of " + std::to_string(classes));
    ys.push_back(label);
  }
  if (static_cast<std::int64_t>(ys.size()) != n)
    throw std::runtime_error("mldiag: " + path + " has " + std::to_string(ys.size()) + " rows, its first line says " +
                             std::to_string(n));
  auto x = torch::tensor(xs, torch::kFloat).view({n, f});
  auto y = torch::tensor(ys, torch::kLong);
  torch::Generator gen = at::detail::createCPUGenerator(7);
  auto perm = torch::randperm(n, gen, torch::kLong);
  x = x.index_select(0, perm);
  y = y.index_select(0, perm);
  const auto cut = n * 4 / 5;
  uci_table u;
  u.raw.x_train = x.slice(0, 0, cut);
  u.raw.x_val = x.slice(0, cut, n);
  u.raw.y_train = u.z.y_train = y.slice(0, 0, cut);
  u.raw.y_val = u.z.y_val = y.slice(0, cut, n);
  // The population standard deviation, as scikit-learn's StandardScaler; a constant feature
  // (none in these tables) would be left centred, not divided by 0.
  const auto mean = u.raw.x_train.mean(0, /*keepdim=*/true);
  auto sd = (u.raw.x_train - mean).pow(2).mean(0, /*keepdim=*/true).sqrt();
  sd = torch::where(sd > 0, sd, torch::ones_like(sd));
  u.z.x_train = (u.raw.x_train - mean) / sd;
  u.z.x_val = (u.raw.x_val - mean) / sd;
  u.z.classes = u.raw.classes = classes;
  u.z.side = u.raw.side = 0;  // not images
  u.z.source = u.raw.source = path + " (" + std::to_string(cut) + " training and " + std::to_string(n - cut) +
                              " validation rows, " + std::to_string(f) + " features, " + std::to_string(classes) +
                              " classes)";
  return u;
}

/// The UCI diabetes table as scikit-learn ships it (diabetes_data_raw.csv: 442 rows of 10
/// whitespace-separated features as measured, age, sex, BMI, blood pressure and six serum
/// values; diabetes_target.csv: a disease progression score per row), for regression.
/// Shuffled once (seed 7), the first 80% for training and the rest for validation; `z` has the
/// features and the target standardized with the training rows' mean and (population)
/// standard deviation, `raw` the features as the file has them (the regression family's
/// inputs_not_normalized) with the same standardized target.
inline uci_table load_diabetes(const std::string& data_path, const std::string& target_path) {
  auto numbers = [](const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("mldiag: cannot read " + path + " (scripts/fetch-digits.sh fetches it)");
    std::vector<std::vector<double>> rows;
    std::string line;
    while (std::getline(in, line)) {
      std::vector<double> row;
      std::size_t at = 0;
      while (at < line.size()) {
        const char ch = line[at];
        if (ch == ' ' || ch == '\t' || ch == ',' || ch == '\r') {
          ++at;
          continue;
        }
        double v = 0.0;
        const auto [end, ec] = std::from_chars(line.data() + at, line.data() + line.size(), v);
        if (ec != std::errc())
          throw std::runtime_error("mldiag: " + path + ": '" + line + "' is not a row of numbers; fetch it again " +
                                   "(scripts/fetch-digits.sh)");
        row.push_back(v);
        at = static_cast<std::size_t>(end - line.data());
      }
      if (!row.empty()) rows.push_back(std::move(row));
    }
    return rows;
  };
  const auto xr = numbers(data_path), yr = numbers(target_path);
  const auto n = static_cast<std::int64_t>(xr.size());
  if (n < 10 || yr.size() != xr.size())
    throw std::runtime_error("mldiag: " + data_path + " has " + std::to_string(xr.size()) + " rows and " + target_path +
                             " " + std::to_string(yr.size()) + "; fetch them again (scripts/fetch-digits.sh)");
  const auto f = static_cast<std::int64_t>(xr.front().size());
  std::vector<float> xs, ys;
  for (std::size_t i = 0; i < xr.size(); ++i) {
    if (static_cast<std::int64_t>(xr[i].size()) != f || yr[i].size() != 1)
      throw std::runtime_error("mldiag: " + data_path + " or " + target_path + ": row " + std::to_string(i + 1) +
                               " has the wrong number of fields");
    for (const double v : xr[i]) xs.push_back(static_cast<float>(v));
    ys.push_back(static_cast<float>(yr[i].front()));
  }
  auto x = torch::tensor(xs, torch::kFloat).view({n, f});
  auto y = torch::tensor(ys, torch::kFloat).view({n, 1});
  torch::Generator gen = at::detail::createCPUGenerator(7);
  auto perm = torch::randperm(n, gen, torch::kLong);
  x = x.index_select(0, perm);
  y = y.index_select(0, perm);
  const auto cut = n * 4 / 5;
  auto standardize = [&](const torch::Tensor& v) {
    const auto train = v.slice(0, 0, cut);
    const auto mean = train.mean(0, /*keepdim=*/true);
    auto sd = (train - mean).pow(2).mean(0, /*keepdim=*/true).sqrt();
    sd = torch::where(sd > 0, sd, torch::ones_like(sd));
    return (v - mean) / sd;
  };
  const auto xz = standardize(x), yz = standardize(y);
  uci_table u;
  u.raw.x_train = x.slice(0, 0, cut);
  u.raw.x_val = x.slice(0, cut, n);
  u.z.x_train = xz.slice(0, 0, cut);
  u.z.x_val = xz.slice(0, cut, n);
  u.raw.y_train = u.z.y_train = yz.slice(0, 0, cut);
  u.raw.y_val = u.z.y_val = yz.slice(0, cut, n);
  u.z.classes = u.raw.classes = 0;  // regression
  u.z.side = u.raw.side = 0;        // not images
  std::string src = data_path;
  src += " (";
  src += std::to_string(cut);
  src += " training and ";
  src += std::to_string(n - cut);
  src += " validation rows, ";
  src += std::to_string(f);
  src += " features, a standardized regression target)";
  u.z.source = u.raw.source = src;
  return u;
}

/// A regression from a classification table's columns: column `column` of `t` (standardized
/// with the training rows' mean and standard deviation, as `t.z` has it) as the target [n, 1],
/// the other columns as the features (`z` standardized, `raw` as the file has them), the same
/// rows in training and validation as `t`; the class labels are not used. The
/// hetero_nll family predicts the breast cancer table's mean smoothness from its 29 other
/// measurements (a linear fit leaves ~12% of its variance, so a good fit's Gaussian NLL is
/// below 0).
inline uci_table column_target(const uci_table& t, std::int64_t column, const std::string& name) {
  const auto f = t.z.x_train.size(1);
  std::vector<std::int64_t> keep;
  for (std::int64_t j = 0; j < f; ++j)
    if (j != column) keep.push_back(j);
  const auto others = torch::tensor(keep, torch::kLong);
  uci_table u;
  for (auto [from, to] : {std::pair{&t.z, &u.z}, std::pair{&t.raw, &u.raw}}) {
    to->x_train = from->x_train.index_select(1, others);
    to->x_val = from->x_val.index_select(1, others);
    to->y_train = t.z.x_train.slice(1, column, column + 1).clone();
    to->y_val = t.z.x_val.slice(1, column, column + 1).clone();
    to->classes = 0;  // regression
    to->side = 0;     // not images
    to->source = t.z.source + ": " + name + " (column " + std::to_string(column) + ", standardized) from the other " +
                 std::to_string(f - 1) + " features";
  }
  return u;
}

/// A whole .gz file.
inline std::vector<unsigned char> read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("mldiag: cannot read " + path);
  std::vector<unsigned char> out;
  std::vector<unsigned char> buf(1 << 16);
  int n = 0;
  while ((n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0)
    out.insert(out.end(), buf.begin(), buf.begin() + n);
  gzclose(f);
  if (n < 0) throw std::runtime_error("mldiag: " + path + " is not a readable gzip file; reinstall dataset-fashion-mnist");
  return out;
}

inline std::uint32_t big_endian(const std::vector<unsigned char>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

/// An IDX image file [n, 28 * 28] scaled to [0, 1] and its label file [n].
inline std::pair<torch::Tensor, torch::Tensor> load_idx(const std::string& images, const std::string& labels,
                                                        std::int64_t limit) {
  const auto im = read_gz(images), lb = read_gz(labels);
  if (im.size() < 16 || big_endian(im, 0) != 2051 || lb.size() < 8 || big_endian(lb, 0) != 2049)
    throw std::runtime_error("mldiag: " + images + " or " + labels + " is not an IDX file; reinstall dataset-fashion-mnist");
  const auto n = std::min<std::int64_t>(limit, big_endian(im, 4));
  const auto pixels = static_cast<std::int64_t>(big_endian(im, 8)) * big_endian(im, 12);
  if (im.size() < 16 + static_cast<std::size_t>(n * pixels) || lb.size() < 8 + static_cast<std::size_t>(n))
    throw std::runtime_error("mldiag: " + images + " is shorter than its header says; reinstall dataset-fashion-mnist");
  auto x = torch::from_blob(const_cast<unsigned char*>(im.data() + 16), {n, pixels}, torch::kUInt8).to(torch::kFloat).div(255.0);
  auto y = torch::from_blob(const_cast<unsigned char*>(lb.data() + 8), {n}, torch::kUInt8).to(torch::kLong);
  return {x, y};
}

inline constexpr const char* fashion_dir = "/usr/share/datasets/fashion-mnist/";

/// Fashion-MNIST: the 60000 training images and the first 2000 test images as validation.
inline table load_fashion() {
  const std::string d = fashion_dir;
  table t;
  std::tie(t.x_train, t.y_train) = load_idx(d + "train-images-idx3-ubyte.gz", d + "train-labels-idx1-ubyte.gz", 60000);
  std::tie(t.x_val, t.y_val) = load_idx(d + "t10k-images-idx3-ubyte.gz", d + "t10k-labels-idx1-ubyte.gz", 2000);
  t.side = 28;
  t.source = d + " (" + std::to_string(t.x_train.size(0)) + " training images)";
  return t;
}

/// A table's rows of classes [lo, hi), relabelled 0 .. hi - lo - 1, training and validation
/// alike: the lora family pre-trains on Fashion-MNIST's classes 0-4 and fine-tunes on 5-9.
inline table class_range(const table& t, std::int64_t lo, std::int64_t hi) {
  auto pick = [&](const torch::Tensor& x, const torch::Tensor& y, torch::Tensor& xo, torch::Tensor& yo) {
    auto idx = ((y >= lo) & (y < hi)).nonzero().squeeze(1);
    xo = x.index_select(0, idx);
    yo = y.index_select(0, idx) - lo;
  };
  table out;
  pick(t.x_train, t.y_train, out.x_train, out.y_train);
  pick(t.x_val, t.y_val, out.x_val, out.y_val);
  out.classes = hi - lo;
  out.side = t.side;
  out.source = t.source + ", classes " + std::to_string(lo) + "-" + std::to_string(hi - 1);
  return out;
}

/// The focal family's data: a class-imbalanced copy of a table's training rows, class c keeping
/// the first keep[c] of its rows in the table's order (the table's other rows dropped, the
/// order of the kept ones unchanged); the validation rows untouched, balanced as a long-tailed
/// benchmark's test set (CIFAR-10-LT's, ImageNet-LT's).
inline table keep_per_class(const table& t, const std::vector<std::int64_t>& keep, const std::string& profile) {
  std::vector<std::int64_t> picked, seen(static_cast<std::size_t>(t.classes), 0);
  const auto y = t.y_train.contiguous();
  const auto* yp = y.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < y.size(0); ++i) {
    const auto c = static_cast<std::size_t>(yp[i]);
    if (seen[c] < keep[c]) {
      picked.push_back(i);
      ++seen[c];
    }
  }
  const auto idx = torch::tensor(picked, torch::kLong);
  table out = t;
  out.x_train = t.x_train.index_select(0, idx);
  out.y_train = t.y_train.index_select(0, idx);
  std::string counts;
  for (const auto n : seen) counts += (counts.empty() ? "" : " ") + std::to_string(n);
  out.source = t.source + ", " + profile + ": " + std::to_string(picked.size()) + " training rows (per class " + counts +
               "), validation balanced";
  return out;
}

/// Each class's count of a table's training rows.
inline std::vector<std::int64_t> class_counts(const table& t) {
  std::vector<std::int64_t> n(static_cast<std::size_t>(t.classes), 0);
  const auto y = t.y_train.contiguous();
  for (std::int64_t i = 0; i < y.size(0); ++i) ++n[static_cast<std::size_t>(y.data_ptr<std::int64_t>()[i])];
  return n;
}

/// A long-tailed copy (Cui et al. 2019's CIFAR-10-LT profile): class c keeps n_c x ratio^(-c /
/// (C - 1)) of its n_c rows, class 0 all of them, class C - 1 a `ratio`-th.
inline table long_tailed(const table& t, double ratio) {
  auto keep = class_counts(t);
  const auto C = static_cast<double>(t.classes);
  for (std::size_t c = 0; c < keep.size(); ++c)
    keep[c] = static_cast<std::int64_t>(std::floor(static_cast<double>(keep[c]) *
                                                   std::pow(ratio, -static_cast<double>(c) / (C - 1.0))));
  char profile[64];
  std::snprintf(profile, sizeof profile, "long-tailed %g:1", ratio);
  return keep_per_class(t, keep, profile);
}

/// A step-imbalanced copy (Buda et al. 2018): the classes from `first_minority` on keep a
/// `ratio`-th of their rows, the others all of them.
inline table step_imbalanced(const table& t, std::int64_t first_minority, double ratio) {
  auto keep = class_counts(t);
  for (std::size_t c = static_cast<std::size_t>(first_minority); c < keep.size(); ++c)
    keep[c] = static_cast<std::int64_t>(std::floor(static_cast<double>(keep[c]) / ratio));
  char profile[64];
  std::snprintf(profile, sizeof profile, "step-imbalanced %g:1 from class %lld", ratio,
                static_cast<long long>(first_minority));
  return keep_per_class(t, keep, profile);
}

/// A license text: the first 90% for training, the rest for validation.
inline text load_text(const std::string& path) {
  text t;
  t.c = examples::lm::load_corpus(path);
  const auto n = t.c.tokens.size(0), cut = n * 9 / 10;
  t.train = t.c.tokens.slice(0, 0, cut);
  t.val = t.c.tokens.slice(0, cut, n);
  return t;
}

/// The license texts text_cnn tells apart (those of them that exist; it needs 3).
inline const std::vector<std::string> license_files = {"GPL-3",      "GPL-2",    "LGPL-2.1",
                                                       "Apache-2.0", "Artistic", "MPL-2.0"};
inline constexpr const char* licenses_dir = "/usr/share/common-licenses/";

/// Windows of `window` characters labelled by the file they come from. Each file is cut into
/// blocks of 10 windows and every 7th block is validation, so that validation covers every
/// part of every file (a license's last sections read unlike its first); training windows
/// start every 8 characters inside the training blocks, validation windows do not overlap.
inline table load_licenses(std::int64_t window = 64) {
  std::vector<std::string> texts, names;
  for (const auto& f : license_files) {
    std::ifstream in(licenses_dir + f, std::ios::binary);
    if (!in) continue;
    std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (static_cast<std::int64_t>(t.size()) < 20 * window) continue;
    texts.push_back(std::move(t));
    names.push_back(f);
  }
  if (texts.size() < 3)
    throw std::runtime_error("mldiag: text_cnn needs 3 of the license texts " +
                             std::string(licenses_dir) +
                             "{GPL-3, GPL-2, LGPL-2.1, Apache-2.0, Artistic, MPL-2.0}, found " +
                             std::to_string(texts.size()) + " (package base-files ships them)");
  std::array<int, 256> id{};
  id.fill(-1);
  std::int64_t vocab = 0;
  for (const auto& t : texts)
    for (unsigned char ch : t)
      if (id[ch] < 0) id[ch] = static_cast<int>(vocab++);
  const std::int64_t block = 10 * window, stride = 8;
  std::vector<std::int64_t> xt, yt, xv, yv;
  auto put = [&](std::vector<std::int64_t>& x, std::vector<std::int64_t>& y, const std::string& t,
                 std::size_t at, std::size_t label) {
    for (std::int64_t k = 0; k < window; ++k)
      x.push_back(id[static_cast<unsigned char>(t[at + static_cast<std::size_t>(k)])]);
    y.push_back(static_cast<std::int64_t>(label));
  };
  std::string found;
  for (std::size_t f = 0; f < texts.size(); ++f) {
    const auto& t = texts[f];
    const auto n = static_cast<std::int64_t>(t.size());
    for (std::int64_t b = 0; b * block + window <= n; ++b) {
      const std::int64_t end = std::min(n, (b + 1) * block);
      if (b % 7 == 6) {
        for (std::int64_t at = b * block; at + window <= end; at += window)
          put(xv, yv, t, static_cast<std::size_t>(at), f);
      } else {
        for (std::int64_t at = b * block; at + window <= end; at += stride)
          put(xt, yt, t, static_cast<std::size_t>(at), f);
      }
    }
    found += (f ? ", " : "") + names[f];
  }
  table tab;
  const auto nt = static_cast<std::int64_t>(yt.size()), nv = static_cast<std::int64_t>(yv.size());
  tab.x_train = torch::tensor(xt, torch::kLong).view({nt, window});
  tab.y_train = torch::tensor(yt, torch::kLong);
  // Validation shuffled once (seed 7): the first 512 rows are what a run validates on.
  torch::Generator gen = at::detail::createCPUGenerator(7);
  auto perm = torch::randperm(nv, gen, torch::kLong);
  tab.x_val = torch::tensor(xv, torch::kLong).view({nv, window}).index_select(0, perm);
  tab.y_val = torch::tensor(yv, torch::kLong).index_select(0, perm);
  tab.classes = static_cast<std::int64_t>(texts.size());
  tab.side = window;
  tab.vocab = vocab;
  tab.source = std::string(licenses_dir) + "{" + found + "} (" + std::to_string(nt) +
               " training and " + std::to_string(nv) + " validation windows of " +
               std::to_string(window) + " characters, " + std::to_string(vocab) + " characters)";
  return tab;
}

/// Loads the words of the license texts (`license_files`, lowercased runs of ASCII letters) as
/// skip-gram training pairs, for the `skipgram` family. Each file is cut into blocks of
/// 200 words and every 10th block is validation (as load_licenses does, so that validation
/// covers every part of every file); the vocabulary is the words seen at least `min_count`
/// times in the training blocks (word2vec's default 5), and words outside it are dropped
/// before the windows are taken, as word2vec does. No subsampling of frequent words: the
/// corpus is ~20 thousand words. `by_window[w - 1]`: every (center, context) pair at most `w`
/// words apart inside a block, as a `table` whose inputs are [pairs, 2] int64 word ids
/// (labels unused, 0); validation pairs shuffled once (seed 7).
inline word_pairs load_license_words(std::int64_t max_window = 5, std::int64_t min_count = 5) {
  std::vector<std::vector<std::string>> train_blocks, val_blocks;
  std::string found;
  std::size_t words = 0;
  for (const auto& f : license_files) {
    std::ifstream in(licenses_dir + f, std::ios::binary);
    if (!in) continue;
    const std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> w(1);
    for (const char ch : t) {
      if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) w.back() += static_cast<char>(ch | 0x20);
      else if (!w.back().empty()) w.emplace_back();
    }
    if (w.back().empty()) w.pop_back();
    words += w.size();
    constexpr std::size_t block = 200;
    for (std::size_t b = 0; b * block < w.size(); ++b) {
      std::vector<std::string> part(w.begin() + static_cast<std::ptrdiff_t>(b * block),
                                    w.begin() + static_cast<std::ptrdiff_t>(std::min(w.size(), (b + 1) * block)));
      (b % 10 == 9 ? val_blocks : train_blocks).push_back(std::move(part));
    }
    found += (found.empty() ? "" : ", ") + f;
  }
  if (train_blocks.size() < 20)
    throw std::runtime_error("mldiag: skipgram needs the license texts " + std::string(licenses_dir) +
                             "{GPL-3, GPL-2, LGPL-2.1, Apache-2.0, Artistic, MPL-2.0}; found " +
                             (found.empty() ? std::string("none") : found) + " (package base-files ships them)");
  std::map<std::string, std::int64_t> count;
  for (const auto& b : train_blocks)
    for (const auto& w : b) ++count[w];
  std::map<std::string, std::int64_t> id;
  std::vector<float> counts;
  for (const auto& [w, c] : count)
    if (c >= min_count) {
      id.emplace(w, static_cast<std::int64_t>(counts.size()));
      counts.push_back(static_cast<float>(c));
    }
  auto ids = [&](const std::vector<std::vector<std::string>>& blocks) {
    std::vector<std::vector<std::int64_t>> out;
    for (const auto& b : blocks) {
      out.emplace_back();
      for (const auto& w : b)
        if (const auto it = id.find(w); it != id.end()) out.back().push_back(it->second);
    }
    return out;
  };
  const auto train = ids(train_blocks), val = ids(val_blocks);
  auto pairs = [](const std::vector<std::vector<std::int64_t>>& blocks, std::int64_t window) {
    std::vector<std::int64_t> xs;
    for (const auto& b : blocks) {
      const auto n = static_cast<std::int64_t>(b.size());
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t o = -window; o <= window; ++o)
          if (o != 0 && i + o >= 0 && i + o < n) {
            xs.push_back(b[static_cast<std::size_t>(i)]);
            xs.push_back(b[static_cast<std::size_t>(i + o)]);
          }
    }
    const auto rows = static_cast<std::int64_t>(xs.size() / 2);
    return torch::tensor(xs, torch::kLong).view({rows, 2});
  };
  word_pairs wp;
  wp.vocab = static_cast<std::int64_t>(counts.size());
  wp.counts = torch::tensor(counts, torch::kFloat);
  for (std::int64_t w = 1; w <= max_window; ++w) {
    table t;
    t.x_train = pairs(train, w);
    t.y_train = torch::zeros({t.x_train.size(0)}, torch::kLong);
    auto xv = pairs(val, w);
    torch::Generator gen = at::detail::createCPUGenerator(7);
    t.x_val = xv.index_select(0, torch::randperm(xv.size(0), gen, torch::kLong));
    t.y_val = torch::zeros({t.x_val.size(0)}, torch::kLong);
    t.classes = 0;
    t.side = 0;
    t.vocab = wp.vocab;
    t.source = std::to_string(t.x_train.size(0)) + " training and " + std::to_string(t.x_val.size(0)) +
               " validation pairs within " + std::to_string(w);
    wp.by_window.push_back(std::move(t));
  }
  wp.source = std::string(licenses_dir) + "{" + found + "} (" + std::to_string(words) + " words, " +
              std::to_string(wp.vocab) + " seen at least " + std::to_string(min_count) + " times; " +
              wp.by_window.back().source + " words)";
  return wp;
}

/// Everything that can be loaded; what cannot is named in `missing` (its runs are skipped).
/// The UCI tables are looked for beside the digits.
inline data load_all(const std::string& digits_csv) {
  data d;
  auto attempt = [&](auto&& load, const std::string& what) {
    try {
      load();
    } catch (const std::exception& e) {
      d.missing.push_back(std::string(e.what()) + " (the " + what + " runs are skipped)");
    }
  };
  attempt([&] { d.digits = load_digits(digits_csv); }, "digits");
  if (d.digits) d.digits_step10 = step_imbalanced(*d.digits, 5, 10.0);
  attempt([&] { d.fashion = load_fashion(); }, "Fashion-MNIST (apt-get install dataset-fashion-mnist)");
  if (d.fashion) {
    d.fashion_first5 = class_range(*d.fashion, 0, 5);
    d.fashion_last5 = class_range(*d.fashion, 5, 10);
    d.fashion_lt20 = long_tailed(*d.fashion, 20.0);
    d.fashion_lt10 = long_tailed(*d.fashion, 10.0);
  }
  attempt([&] { d.gpl = load_text("/usr/share/common-licenses/GPL-3"); }, "GPL-3 text");
  attempt([&] { d.apache = load_text("/usr/share/common-licenses/Apache-2.0"); }, "Apache-2.0 text");
  attempt([&] { d.licenses = load_licenses(); }, "text_cnn");
  attempt([&] { d.words = load_license_words(); }, "skipgram");
  const auto dir = digits_csv.substr(0, digits_csv.find_last_of('/') + 1);
  d.dir = dir;
  attempt([&] { d.breast_cancer = load_uci(dir + "breast_cancer.csv"); }, "tabular breast-cancer");
  if (d.breast_cancer) d.breast_cancer_smoothness = column_target(*d.breast_cancer, 4, "mean smoothness");
  attempt([&] { d.wine = load_uci(dir + "wine_data.csv"); }, "tabular wine");
  attempt([&] { d.iris = load_uci(dir + "iris.csv"); }, "tabular iris");
  attempt([&] { d.diabetes = load_diabetes(dir + "diabetes_data.csv", dir + "diabetes_target.csv"); }, "regression");
  return d;
}

/// A smaller copy of an image table (rounds 11 and 12): the first `n_train` training rows and
/// the first 512 validation rows, each batch of images mapped by `shrink` to `side` x `side`;
/// labels kept. `how` ends the source's description.
template <class Shrink>
table shrunk(const table& f, std::int64_t n_train, std::int64_t side, Shrink shrink, const std::string& how) {
  table t;
  const auto n = std::min<std::int64_t>(n_train, f.x_train.size(0));
  const auto v = std::min<std::int64_t>(512, f.x_val.size(0));
  t.x_train = shrink(f.x_train.slice(0, 0, n));
  t.y_train = f.y_train.slice(0, 0, n);
  t.x_val = shrink(f.x_val.slice(0, 0, v));
  t.y_val = f.y_val.slice(0, 0, v);
  t.classes = 10;
  t.side = side;
  t.source = f.source + ", the first " + std::to_string(n) + " " + how;
  return t;
}

}  // namespace zoo
