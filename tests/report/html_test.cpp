// SPDX-License-Identifier: Apache-2.0
// The HTML report: envelopes against a reference computed here, markers and their attributes,
// escaping, absent vs NaN, the embedded PNG decoded by an independent reader, and the
// 100k-step x 500-tensor page's size and render time.
#include "mldiag/report/html.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <vector>

namespace {

using mldiag::report::run_log;
namespace h = mldiag::report::detail::html;

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

std::size_t count(const std::string& s, std::string_view what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
    ++n;
  return n;
}

// Fills a column directly (set() looks the name up on every call, too slow for 50M values).
void fill(run_log& run, std::string_view metric, const std::vector<double>& values) {
  run.metric_values[run.column(metric)] = values;
}

// 1000 steps: loss decays with noise, a spike to 50 at step 437, NaN at 600, not logged at
// 700-719, val_loss every 100 steps; 8 tensors, block2.attn.* explode at 437 and
// block1.mlp.fc1 has +Inf at 650.
struct planted {
  run_log run;
  std::vector<std::string> tensors{"embed.weight",           "block1.mlp.fc1",
                                   "block2.attn.qkv.weight", "block2.attn.out.weight",
                                   "block2.attnx.weight",    "block20.attn.weight",
                                   "weird<&\"name'>",        "head.weight"};
  planted() {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> noise(0.9, 1.1);
    for (std::int64_t s = 0; s < 1000; ++s)
      run.steps.push_back(s);
    std::vector<double> loss(1000), val(1000, run_log::absent());
    for (std::size_t i = 0; i < 1000; ++i)
      loss[i] = 3.0 * std::exp(-static_cast<double>(i) / 300) * noise(rng);
    for (std::size_t i = 0; i < 1000; i += 100)
      val[i] = loss[i] * 1.1;
    loss[437] = 50.0;
    loss[600] = nan_v;
    for (std::size_t i = 700; i < 720; ++i)
      loss[i] = run_log::absent();
    fill(run, "loss", loss);
    fill(run, "val_loss", val);
    fill(run, "grad/global_norm", std::vector<double>(1000, 1.0));
    for (const auto& t : tensors) {
      std::vector<double> g(1000);
      for (auto& v : g)
        v = 0.01 * noise(rng);
      if (t.starts_with("block2.attn.")) g[437] = 1000.0;
      if (t == "block1.mlp.fc1") g[650] = inf_v;
      if (t == "head.weight")
        for (std::size_t i = 100; i < 200; ++i)
          g[i] = run_log::absent();
      fill(run, "grad/" + t + "/norm", g);
    }
    run.title = "planted <run> & \"quotes\"";
    mldiag::finding f;
    f.question = mldiag::question::early_anomaly;
    f.symptom = "exploding gradients";
    f.severity = mldiag::severity::critical;
    f.first_step = 437;
    f.last_step = 437;
    f.where = {{"block2.attn", 5.0}, {"embed", 0.1}};
    f.evidence = {{"ratio_to_median", 1e5}};
    f.detector = "grad_explosion";
    for (std::int64_t at : {437, 438, 439}) {
      f.last_step = at;
      run.findings.push_back({at, f});
    }
    mldiag::finding evil;
    evil.question = mldiag::question::convergence;
    evil.symptom = "<script>alert(\"x\")</script> & co";
    evil.severity = mldiag::severity::warning;
    evil.first_step = 600;
    evil.last_step = 600;
    evil.where = {{"weird<&\"name'>", 1.0}};
    evil.detector = "d<&>";
    run.findings.push_back({600, evil});
    run.diagnosis = {{mldiag::protocol::phase_id{1}, "baseline: loss 2.9"},
                     {mldiag::protocol::phase_id{2}, "pattern: spike then NaN"},
                     {mldiag::protocol::phase_id{3}, "hypothesis: lr too high"},
                     {mldiag::protocol::phase_id{4}, "fix: halve lr"},
                     {mldiag::protocol::phase_id{3}, "hypothesis <b>rejected</b>"}};
  }
};

// An independent PNG reader for what png_indexed writes: chunk CRCs with the bitwise CRC-32
// (no table), stored deflate blocks, the Adler-32 by its definition, filter-0 scanlines.
struct decoded_png {
  std::size_t width = 0, height = 0;
  std::vector<unsigned char> pixels;
  std::size_t palette_entries = 0;
};

std::uint32_t bitwise_crc(const unsigned char* p, std::size_t n) {
  std::uint32_t c = 0xffffffffU;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k)
      c = (c >> 1) ^ (0xedb88320U & (0U - (c & 1U)));
  }
  return ~c;
}

decoded_png decode_png(const std::string& png) {
  const auto* b = reinterpret_cast<const unsigned char*>(png.data());
  const auto be32 = [&](std::size_t at) {
    return std::uint32_t{b[at]} << 24 | std::uint32_t{b[at + 1]} << 16 |
           std::uint32_t{b[at + 2]} << 8 | std::uint32_t{b[at + 3]};
  };
  REQUIRE(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  decoded_png out;
  std::string idat;
  bool ended = false;
  for (std::size_t at = 8; at < png.size();) {
    const std::size_t len = be32(at);
    const std::string type = png.substr(at + 4, 4);
    REQUIRE(at + 12 + len <= png.size());
    CHECK(bitwise_crc(b + at + 4, len + 4) == be32(at + 8 + len));
    if (type == "IHDR") {
      out.width = be32(at + 8);
      out.height = be32(at + 12);
      CHECK(b[at + 16] == 8);  // bit depth
      CHECK(b[at + 17] == 3);  // indexed colour
    } else if (type == "PLTE") {
      out.palette_entries = len / 3;
    } else if (type == "IDAT") {
      idat += png.substr(at + 8, len);
    } else if (type == "IEND") {
      ended = true;
    }
    at += 12 + len;
  }
  CHECK(ended);
  const auto* z = reinterpret_cast<const unsigned char*>(idat.data());
  REQUIRE(idat.size() >= 6);
  CHECK((z[0] * 256U + z[1]) % 31U == 0);  // zlib header check bits
  std::vector<unsigned char> raw;
  std::size_t at = 2;
  for (bool last = false; !last;) {
    REQUIRE(at + 5 <= idat.size());
    last = (z[at] & 1U) != 0;
    REQUIRE((z[at] >> 1 & 3U) == 0);  // stored
    const std::size_t len = z[at + 1] | std::size_t{z[at + 2]} << 8;
    const std::size_t nlen = z[at + 3] | std::size_t{z[at + 4]} << 8;
    REQUIRE((len ^ nlen) == 0xffffU);
    raw.insert(raw.end(), z + at + 5, z + at + 5 + len);
    at += 5 + len;
  }
  std::uint64_t s1 = 1, s2 = 0;
  for (const unsigned char c : raw) {
    s1 = (s1 + c) % 65521;
    s2 = (s2 + s1) % 65521;
  }
  const std::uint32_t adler = std::uint32_t{z[at]} << 24 | std::uint32_t{z[at + 1]} << 16 |
                              std::uint32_t{z[at + 2]} << 8 | z[at + 3];
  CHECK(adler == (s2 << 16 | s1));
  REQUIRE(raw.size() == out.height * (out.width + 1));
  for (std::size_t r = 0; r < out.height; ++r) {
    CHECK(raw[r * (out.width + 1)] == 0);
    const auto row = raw.begin() + static_cast<std::ptrdiff_t>(r * (out.width + 1) + 1);
    out.pixels.insert(out.pixels.end(), row, row + static_cast<std::ptrdiff_t>(out.width));
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else
      break;  // '=' padding
    acc = acc << 6 | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xffU);
    }
  }
  return out;
}

std::string embedded_png(const std::string& page) {
  const std::string marker = "data:image/png;base64,";
  const auto p = page.find(marker);
  REQUIRE(p != std::string::npos);
  const auto e = page.find('"', p);
  return base64_decode(std::string_view(page).substr(p + marker.size(), e - p - marker.size()));
}

}  // namespace

TEST_CASE("buckets cover the step range in at most max_columns equal widths") {
  const std::vector<std::int64_t> steps{0, 999};
  const auto b = h::make_buckets(steps, 100);
  CHECK(b.width == 10);
  CHECK(b.count == 100);
  CHECK(b.of(437) == 43);
  CHECK(b.begin(43) == 430);
  CHECK(b.end(43) == 439);
  CHECK(b.end(99) == 999);
  // Fewer steps than columns: one step per column.
  CHECK(h::make_buckets(std::vector<std::int64_t>{5, 7}, 800).count == 3);
  // The extremes of int64 do not overflow.
  const std::vector<std::int64_t> wide{std::numeric_limits<std::int64_t>::min(),
                                       std::numeric_limits<std::int64_t>::max()};
  const auto w = h::make_buckets(wide, 800);
  CHECK(w.count <= 800);
  CHECK(w.of(wide[1]) == w.count - 1);
  CHECK(w.of(0) < w.count);
  CHECK_THROWS_WITH_AS((void)h::make_buckets(steps, 0), doctest::Contains("max_columns"),
                       mldiag::error);
}

TEST_CASE("the spike survives downsampling - envelope max equals the true max of its bucket") {
  const planted p;
  const auto b = h::make_buckets(p.run.steps, 100);
  std::vector<h::envelope_cell> env;
  const auto& loss = *p.run.metric("loss");
  h::envelope(b, p.run.steps, loss, env);
  // Reference: every bucket's finite min/max straight from the definition (steps 10k..10k+9).
  for (std::size_t k = 0; k < 100; ++k) {
    double lo = inf_v, hi = -inf_v;
    std::size_t nonfinite = 0;
    for (std::size_t i = 10 * k; i < 10 * k + 10; ++i) {
      if (run_log::is_absent(loss[i])) continue;
      if (!std::isfinite(loss[i])) {
        ++nonfinite;
        continue;
      }
      lo = std::min(lo, loss[i]);
      hi = std::max(hi, loss[i]);
    }
    CHECK(env[k].nonfinite() == nonfinite);
    if (hi >= lo) {
      CHECK(env[k].max == hi);
      CHECK(env[k].min == lo);
    } else {
      CHECK(env[k].finite == 0);
    }
  }
  CHECK(env[43].max == 50.0);
  CHECK(env[60].nan == 1);
  CHECK(env[60].first_nonfinite_step == 600);
  CHECK(env[70].finite == 0);  // not logged: no value, and not counted as NaN
  CHECK(env[70].nonfinite() == 0);

  // The rendered band reaches its highest point (smallest y) in the spike's column.
  const mldiag::report::html_options opt{.max_columns = 100};
  const std::string page = mldiag::report::render_html(p.run, opt);
  const auto band_at = page.find("class=\"envelope\" data-metric=\"loss\"");
  REQUIRE(band_at != std::string::npos);
  const std::string band = page.substr(band_at, page.find("/>", band_at) - band_at);
  const std::regex seg(R"(M([0-9.]+),([0-9.]+)V([0-9.]+))");
  double best_y = inf_v;
  std::string best_x;
  for (auto it = std::sregex_iterator(band.begin(), band.end(), seg); it != std::sregex_iterator();
       ++it) {
    if (const double y = std::stod((*it)[2]); y < best_y) {
      best_y = y;
      best_x = (*it)[1];
    }
  }
  const double plot_w = opt.width - opt.label_width - 30;
  CHECK(best_x == fmt::format("{:.1f}", opt.label_width + 43.5 * plot_w / 100));
}

TEST_CASE("heatmap cells are the bucket max norm or Inf for any non-finite or absent when none") {
  const planted p;
  const auto b = h::make_buckets(p.run.steps, 100);
  const auto g = h::make_heatmap(p.run, b);
  REQUIRE(g.metric.size() == p.tensors.size());  // grad/global_norm is not a row
  for (std::size_t r = 0; r < g.metric.size(); ++r) {
    CHECK(g.tensor[r] == p.tensors[r]);
    const auto& col = *p.run.metric("grad/" + p.tensors[r] + "/norm");
    for (std::size_t k = 0; k < 100; ++k) {
      double hi = -inf_v;
      bool bad = false, any = false;
      for (std::size_t i = 10 * k; i < 10 * k + 10; ++i) {
        if (run_log::is_absent(col[i])) continue;
        any = true;
        if (!std::isfinite(col[i]))
          bad = true;
        else
          hi = std::max(hi, col[i]);
      }
      const double cell = g.at(r, k);
      if (!any)
        CHECK(run_log::is_absent(cell));
      else if (bad)
        CHECK(cell == inf_v);
      else
        CHECK(cell == hi);
    }
  }
  CHECK(g.at(2, 43) == 1000.0);
  CHECK(g.index(g.at(2, 43)) == h::cell_first_level + h::heatmap_levels - 1);
  CHECK(g.index(g.at(1, 65)) == h::cell_nonfinite);
  CHECK(g.index(g.at(7, 15)) == h::cell_absent);
  CHECK(g.index(0.0) == h::cell_nonpositive);

  // The embedded PNG, read back independently, holds exactly these palette indices.
  const std::string page = mldiag::report::render_html(p.run, {.max_columns = 100});
  const auto png = decode_png(embedded_png(page));
  CHECK(png.width == 100);
  CHECK(png.height == p.tensors.size());
  CHECK(png.palette_entries == h::cell_first_level + h::heatmap_levels);
  for (std::size_t i = 0; i < png.pixels.size(); ++i)
    CHECK(png.pixels[i] == g.index(g.cell[i]));
}

TEST_CASE(
    "markers carry step and symptom and question and severity and heatmap markers sit on matching "
    "rows only") {
  const planted p;
  const std::string page = mldiag::report::render_html(p.run, {.max_columns = 100});
  // Three deliveries are one episode: one marker and one table row with a count.
  CHECK(
      count(
          page,
          "class=\"finding-marker\" data-step=\"437\" data-last-step=\"439\" data-count=\"3\" "
          "data-symptom=\"exploding gradients\" data-question=\"2\" data-severity=\"critical\"") ==
      1);
  CHECK(count(page, "class=\"finding-marker\"") == 2);
  CHECK(count(page, "<tr class=\"finding\"") == 2);
  CHECK(count(page, "data-step=\"437\" data-last-step=\"439\" data-count=\"3\"><td>") == 1);
  CHECK(count(page, "data-step=\"600\" data-last-step=\"600\" data-count=\"1\"><td>") == 1);
  CHECK(count(page, "<td class=\"steps\">steps 437-439</td><td class=\"num\">3</td>") == 1);
  // block2.attn names block2.attn.qkv.weight and block2.attn.out.weight, not block2.attnx.*
  // nor block20.*; "embed" names embed.weight.
  for (const std::string t : {"block2.attn.qkv.weight", "block2.attn.out.weight", "embed.weight"})
    CHECK(count(page, "class=\"heatmap-marker\" data-tensor=\"" + t + "\" data-step=\"437\"") == 1);
  CHECK(count(page, "class=\"heatmap-marker\" data-tensor=\"block2.attnx") == 0);
  CHECK(count(page, "class=\"heatmap-marker\" data-tensor=\"block20") == 0);
  CHECK(count(page,
              "class=\"heatmap-marker\" data-tensor=\"weird&lt;&amp;&quot;name&#39;&gt;\" "
              "data-step=\"600\"") == 1);
  CHECK(count(page, "class=\"heatmap-marker\"") == 4);
  // Findings grouped by question, and the diagnosis in phase blocks in order (3 comes back).
  CHECK(page.find("<h3 data-question=\"1\">") < page.find("<h3 data-question=\"2\">"));
  CHECK(count(page, "class=\"phase phase-3\"") == 2);
  CHECK(count(page, "class=\"phase phase-4\"") == 1);
  // Header counts.
  CHECK(count(page, "data-severity=\"critical\">1</td>") == 1);
  CHECK(count(page, "data-question=\"2\">1</td>") == 1);
  CHECK(count(page, "data-question=\"3\">0</td>") == 1);
}

TEST_CASE("absent and NaN - NaN gets a mark and absent leaves a gap") {
  const planted p;
  const std::string page = mldiag::report::render_html(p.run, {.max_columns = 100});
  CHECK(
      count(page,
            "class=\"nonfinite-mark\" data-metric=\"loss\" data-step=\"600\" data-value=\"NaN\"") ==
      1);
  CHECK(count(page, "class=\"nonfinite-mark\"") == 1);
  CHECK(page.find("NaN/Inf at step 600") != std::string::npos);
  // The mean line starts twice: at step 0 and after the unlogged 700-719 (columns 70, 71).
  const auto at = page.find("class=\"mean\" data-metric=\"loss\"");
  const std::string d = page.substr(at, page.find("/>", at) - at);
  CHECK(count(d, "M") == 2);
  // val_loss every 100 steps: each evaluation is a point, joined by a line across the gaps.
  CHECK(count(page, "class=\"val-points\" data-metric=\"val_loss\" data-points=\"10\"") == 1);
  CHECK(count(page, "<circle class=\"val-point\"") == 10);
  const auto vl = page.find("class=\"val-line\"");
  REQUIRE(vl != std::string::npos);
  const std::string val_d = page.substr(vl, page.find("/>", vl) - vl);
  CHECK(count(val_d, "M") == 1);
  CHECK(count(val_d, "L") == 9);
}

TEST_CASE("everything is escaped and nothing is loaded from elsewhere") {
  const planted p;
  const std::string page = mldiag::report::render_html(p.run, {.max_columns = 100});
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co") !=
        std::string::npos);
  CHECK(page.find("planted &lt;run&gt; &amp; &quot;quotes&quot;") != std::string::npos);
  CHECK(page.find("d&lt;&amp;&gt;") != std::string::npos);
  CHECK(page.find("hypothesis &lt;b&gt;rejected&lt;/b&gt;") != std::string::npos);
  CHECK(page.find("weird<") == std::string::npos);
  CHECK(page.find("http:") == std::string::npos);  // http-equiv is the CSP meta
  CHECK(page.find("https:") == std::string::npos);
  CHECK(page.find(" src=") == std::string::npos);
  // Every href is a data: URI.
  for (auto q = page.find("href=\""); q != std::string::npos; q = page.find("href=\"", q + 1))
    CHECK(page.compare(q + 6, 5, "data:") == 0);
  CHECK(h::escape("a\x01"
                  "b") == "a b");
}

TEST_CASE("location matching is by name at dot or slash boundaries") {
  CHECK(h::location_matches("block2.attn", "block2.attn.qkv.weight"));
  CHECK(h::location_matches("block2.attn.qkv.weight", "block2.attn"));
  CHECK(h::location_matches("enc/layer1", "enc/layer1/w"));
  CHECK(h::location_matches("fc1", "fc1"));
  CHECK_FALSE(h::location_matches("block2", "block20.attn"));
  CHECK_FALSE(h::location_matches("block2.attn", "block2.attnx"));
  CHECK_FALSE(h::location_matches("", "fc1"));
  CHECK(h::grad_norm_tensor("grad/fc1.weight/norm") == "fc1.weight");
  CHECK(h::grad_norm_tensor("grad/global_norm").empty());
  CHECK(h::grad_norm_tensor("grad/global/norm").empty());
  CHECK(h::grad_norm_tensor("param/fc1/norm").empty());
}

TEST_CASE("empty and loss-only runs render and write_html names the file it cannot write") {
  run_log empty;
  const std::string e = mldiag::report::render_html(empty);
  CHECK(e.find("No steps were logged") != std::string::npos);
  CHECK(e.find("</html>") != std::string::npos);
  run_log one;
  one.add_step(3);
  one.set("loss", 1.0);
  const std::string o = mldiag::report::render_html(one);
  CHECK(o.find("per-tensor gradient norms") != std::string::npos);
  CHECK_THROWS_WITH_AS(mldiag::report::write_html(one, "/nonexistent-dir/x/report.html"),
                       doctest::Contains("/nonexistent-dir/x/report.html"), mldiag::error);
  const auto file = std::filesystem::temp_directory_path() / "mldiag_html_test.html";
  mldiag::report::write_html(one, file);
  CHECK(std::filesystem::file_size(file) == o.size());
  std::filesystem::remove(file);
  // Wide-ranging positive loss turns the axis logarithmic.
  run_log wide;
  for (int s = 0; s < 100; ++s) {
    wide.add_step(s);
    wide.set("loss", std::pow(10.0, -s / 20.0));
  }
  CHECK(mldiag::report::render_html(wide).find("data-log-y=\"true\"") != std::string::npos);
  CHECK(o.find("data-log-y=\"false\"") != std::string::npos);
}

TEST_CASE("100k steps x 500 tensors - size and time") {
  constexpr std::size_t steps = 100'000, tensors = 500;
  run_log run;
  run.title = "scale";
  for (std::size_t s = 0; s < steps; ++s)
    run.steps.push_back(static_cast<std::int64_t>(s));
  std::mt19937 rng(1);
  std::lognormal_distribution<double> dist(-3.0, 1.0);
  std::vector<double> loss(steps);
  for (std::size_t i = 0; i < steps; ++i)
    loss[i] = 2.0 / (1.0 + static_cast<double>(i) / 1e4) + 0.01 * dist(rng);
  loss[54'321] = 40.0;
  loss[77'777] = nan_v;
  fill(run, "loss", loss);
  std::vector<double> g(steps);
  for (std::size_t t = 0; t < tensors; ++t) {
    for (auto& v : g)
      v = dist(rng);
    fill(run, fmt::format("grad/model.layers.{}.mlp.down_proj.weight/norm", t), g);
  }
  mldiag::finding f;
  f.question = mldiag::question::early_anomaly;
  f.symptom = "exploding gradients";
  f.first_step = 54'321;
  f.where = {{"model.layers.42", 3.0}};
  run.findings.push_back({54'321, f});

  const auto t0 = std::chrono::steady_clock::now();
  const std::string page = mldiag::report::render_html(run);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE(fmt::format("100k steps x 500 tensors: {:.0f} kB in {:.3f} s",
                      static_cast<double>(page.size()) / 1024.0, seconds));
  CHECK(page.size() < 2u * 1024 * 1024);
  CHECK(count(page, "class=\"heatmap-marker\"") == 1);
  CHECK(count(page, "class=\"heatmap-row\"") == tensors);
  CHECK(page.find("data-step=\"77777\" data-value=\"NaN\"") != std::string::npos);
  // The spike's column keeps 40 as its max: the band's highest point is at that column.
  const auto b = h::make_buckets(run.steps, 800);
  std::vector<h::envelope_cell> env;
  h::envelope(b, run.steps, *run.metric("loss"), env);
  CHECK(env[b.of(54'321)].max == 40.0);
  const auto png = decode_png(embedded_png(page));
  CHECK(png.width == 800);
  CHECK(png.height == tensors);
}

TEST_CASE("extreme steps and values render without hanging") {
  run_log run;
  constexpr std::int64_t big = 1'000'000'000'000'000'000;
  for (std::int64_t s = 0; s < 50; ++s) {
    run.add_step(big + s);
    run.set("loss", 1e17);  // constant and huge: a small tick cannot advance a double here
    run.set("grad/w/norm", s == 10 ? -inf_v : 1e-300);
  }
  run.add_step(std::numeric_limits<std::int64_t>::max());
  run.set("loss", 1e-300);
  run.add_step(std::numeric_limits<std::int64_t>::min());
  run.set("loss", 1e300);
  const std::string page = mldiag::report::render_html(run);
  CHECK(page.find("</html>") != std::string::npos);
  CHECK(page.find("data-log-y=\"true\"") != std::string::npos);
  CHECK(count(page, "<text x=") < 200);
  run_log flat;
  for (std::int64_t s = 0; s < 20; ++s) {
    flat.add_step(big + s);
    flat.set("loss", 1e17);
  }
  CHECK(count(mldiag::report::render_html(flat), "class=\"x-axis\"") == 1);
}

namespace {

// A run with the tensors named as the monitor names them, for the heatmap and marker tests.
run_log named_run(std::size_t steps = 400) {
  run_log run;
  for (std::size_t s = 0; s < steps; ++s)
    run.steps.push_back(static_cast<std::int64_t>(s));
  std::vector<double> loss(steps), val(steps, run_log::absent());
  for (std::size_t i = 0; i < steps; ++i) {
    loss[i] = 2.0 - static_cast<double>(i) / static_cast<double>(steps);
    if (i % 50 == 0) val[i] = loss[i] + 0.1;
  }
  fill(run, "loss", loss);
  fill(run, "val_loss", val);
  for (const std::string t : {"fc1.weight", "fc2.weight", "conv2.weight", "conv2.bias",
                              "blocks.0.x.weight", "blocks.1.x.weight"})
    fill(run, "grad/" + t + "/norm", std::vector<double>(steps, 0.5));
  return run;
}

mldiag::finding make_finding(std::string symptom, mldiag::severity sev, std::int64_t step,
                             std::vector<std::string> where) {
  mldiag::finding f;
  f.question = mldiag::question::convergence;
  f.symptom = std::move(symptom);
  f.severity = sev;
  f.first_step = f.last_step = step;
  for (auto& w : where)
    f.where.emplace_back(std::move(w), 1.0);
  f.detector = "test";
  return f;
}

// The tensors the page marks for findings with `symptom`.
std::vector<std::string> marked(const std::string& page, const std::string& symptom) {
  std::vector<std::string> out;
  const std::regex re("class=\"heatmap-marker\" data-tensor=\"([^\"]*)\"[^>]*data-symptom=\"" +
                      symptom + "\"");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), re); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1]);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("the heatmap marks places named with the monitor's role prefixes") {
  run_log run = named_run();
  using mldiag::severity;
  run.findings.push_back({10, make_finding("g", severity::warning, 10, {"grad/fc1.weight"})});
  run.findings.push_back({20, make_finding("a", severity::warning, 20, {"act/conv2.relu"})});
  run.findings.push_back({30, make_finding("b", severity::warning, 30, {"act/blocks.1.attn"})});
  run.findings.push_back({40, make_finding("p", severity::warning, 40, {"param/fc2.weight"})});
  run.findings.push_back({50, make_finding("n", severity::warning, 50, {"act/head.out"})});
  run.findings.push_back({60, make_finding("l", severity::warning, 60, {"act/blocks.7.attn"})});
  const std::string page = mldiag::report::render_html(run);
  using v = std::vector<std::string>;
  CHECK(marked(page, "g") == v{"fc1.weight"});
  CHECK(marked(page, "a") == v{"conv2.bias", "conv2.weight"});  // conv2.relu's module
  CHECK(marked(page, "b") == v{"blocks.1.x.weight"});           // not blocks.0
  CHECK(marked(page, "p") == v{"fc2.weight"});
  CHECK(marked(page, "n").empty());  // no head.* row
  CHECK(marked(page, "l").empty());  // blocks.7 has no row; never all of `blocks`
  CHECK(h::strip_role_prefix("residual_in/blocks.1") == "blocks.1");
  CHECK(h::strip_role_prefix("gradient/x") == "gradient/x");
  CHECK(h::strip_role_prefix("grad/") == "grad/");
}

TEST_CASE("one marker per episode, info drawn apart from alarms, and a legend") {
  run_log run = named_run(3000);
  using mldiag::severity;
  // A warning every step from 100 to 299, rising to critical at 200: one episode.
  for (std::int64_t s = 100; s < 300; ++s)
    run.findings.push_back(
        {s, make_finding("exploding gradients", s < 200 ? severity::warning : severity::critical, s,
                         {"grad/fc1.weight"})});
  // An info plateau flickering every 10 steps from 500 to 1490, then again at 2600: two.
  for (std::int64_t s = 500; s < 1500; s += 10)
    run.findings.push_back({s, make_finding("plateau", severity::info, s, {})});
  run.findings.push_back({2600, make_finding("plateau", severity::info, 2600, {})});
  const std::string page = mldiag::report::render_html(run);
  // Reference: the episodes by the rule, counted here: 1 + 2.
  CHECK(count(page, "class=\"finding-marker\"") == 3);
  CHECK(count(page, "<tr class=\"finding\"") == 3);
  CHECK(count(page, "data-severity=\"critical\" data-detector") == 1);
  CHECK(count(page, "data-step=\"100\" data-last-step=\"299\" data-count=\"200\"") ==
        2);  // marker + row
  CHECK(count(page, "data-step=\"500\" data-last-step=\"1490\" data-count=\"100\"") == 2);
  // Info markers: a short grey tick, no triangle and no line across the curve.
  const auto info_at = page.find("class=\"finding-marker\" data-step=\"500\"");
  REQUIRE(info_at != std::string::npos);
  const std::string info = page.substr(info_at, page.find("</g>", info_at) - info_at);
  CHECK(info.find("<path") == std::string::npos);
  CHECK(info.find("stroke=\"#8a8a8a\"") != std::string::npos);
  const auto alarm_at = page.find("class=\"finding-marker\" data-step=\"100\"");
  const std::string alarm = page.substr(alarm_at, page.find("</g>", alarm_at) - alarm_at);
  CHECK(alarm.find("<path") != std::string::npos);
  CHECK(alarm.find("class=\"episode-span\"") != std::string::npos);
  // No heatmap step line for info; one for the alarm.
  CHECK(count(page, "class=\"heatmap-step-line\"") == 1);
  // The legend names every kind of mark.
  for (const char* kind : {"loss", "val_loss", "nonfinite", "critical", "warning", "info"})
    CHECK(count(page, fmt::format("class=\"legend-item\" data-kind=\"{}\"", kind)) == 1);
  CHECK(count(page, "3 finding episodes (301 deliveries)") == 1);
}

TEST_CASE("configuration findings: before training in the table, not on the curve") {
  run_log run = named_run();
  auto f = make_finding("attention without a fused kernel", mldiag::severity::warning, -1,
                        {"fused_attention"});
  f.question = mldiag::question::efficiency;
  run.findings.push_back({-1, f});
  const std::string page = mldiag::report::render_html(run);
  CHECK(count(page, "class=\"finding-marker\"") == 0);
  CHECK(count(page, "<td class=\"steps\">before training</td>") == 1);
  // No step is printed for it (data-step keeps -1, the finding's own value, for programs).
  CHECK(count(page, "step -1") == 0);
  CHECK(count(page, "steps -1") == 0);
  CHECK(count(page, ">-1<") == 0);
  CHECK(count(page, "data-step=\"-1\" data-last-step=\"-1\" data-count=\"1\"><td>") == 1);
  CHECK(count(page, "1 before training (no step)") == 1);
}

TEST_CASE("a finding's why is shown, escaped, with its severity, and nothing when the policy gave none") {
  run_log run = named_run();
  auto f = make_finding("exploding gradients", mldiag::severity::warning, 40, {"grad/fc1.weight"});
  f.why = "consequence observed; the loss rose <2x>";
  run.findings.push_back({40, f});
  auto g = make_finding("loss spike", mldiag::severity::info, 50, {"loss"});
  run.findings.push_back({50, g});  // no why: nothing printed for it
  const std::string page = mldiag::report::render_html(run);
  CHECK(count(page, "<p class=\"note why\">") == 1);
  CHECK(count(page, "<p class=\"note why\">why warning: consequence observed; the loss rose &lt;2x&gt;</p>") == 1);
}

TEST_CASE("open diagnoses are shown, and no diagnosis only when there is none") {
  run_log run = named_run();
  const std::string none = mldiag::report::render_html(run);
  CHECK(count(none, "No diagnosis was recorded") == 1);
  run.open_diagnoses.push_back(
      {mldiag::question::convergence,
       "exploding <gradients>",
       120,
       mldiag::protocol::phase_id::evidence,
       {{mldiag::protocol::phase_id::evidence, "opened at step 120 by exploding_gradients"}}});
  run.open_diagnoses.push_back({mldiag::question::early_anomaly,
                                "loss spike",
                                -1,
                                mldiag::protocol::phase_id::evidence,
                                {}});
  const std::string open = mldiag::report::render_html(run);
  CHECK(count(open, "No diagnosis was recorded") == 0);
  CHECK(count(open, "<div class=\"open-diagnosis phase phase-1\"") == 2);
  CHECK(count(open,
              "<h4>open, phase 1: evidence &mdash; Q1 convergence: exploding "
              "&lt;gradients&gt;, opened at step 120</h4><ul><li>opened at step 120 by "
              "exploding_gradients</li></ul>") == 1);
  CHECK(count(open, "Q2 early anomaly: loss spike, opened before training</h4></div>") == 1);
  CHECK(count(open, "2 open diagnoses") == 2);  // header and the section's heading
  // With a recorded log as well, both appear.
  run.diagnosis = {{mldiag::protocol::phase_id{1}, "baseline recorded"}};
  const std::string both = mldiag::report::render_html(run);
  CHECK(count(both, "class=\"phase phase-1\" data-phase=\"1\"") == 1);
  CHECK(count(both, "<div class=\"open-diagnosis") == 2);
}
