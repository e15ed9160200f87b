// SPDX-License-Identifier: Apache-2.0
/// The `masked_lm`, `ctc` and `domain_adversarial` families (split heldout12) in LibTorch: a
/// BERT-style masked language model (Devlin et al. 2019), a small bidirectional transformer
/// encoder with learned positions over character windows of the license texts, 15% of the
/// positions chosen by the collator, 80% of those replaced by [MASK], 10% by a random character
/// and 10% kept, the cross-entropy read at the chosen positions only; sequence recognition with
/// CTC (Graves et al. 2006), 3 to 6 UCI digits or Fashion-MNIST glyphs laid side by side, read
/// column by column by a conv + (Bi)GRU network (a CRNN) or by 1-D convolutions alone, whose loss
/// starts far up, drops to the plateau of a network that emits blanks, and leaves it when the
/// labels' frames are found; and domain-adversarial training (DANN, Ganin & Lempitsky 2015): a
/// feature extractor and a label classifier trained on a labelled source domain, a domain
/// classifier behind a gradient-reversal layer telling the source from an unlabelled target
/// domain (the same kind of images at a lower contrast with noise, or blurred and brightened), its
/// coefficient ramped by Ganin's 2 / (1 + exp(-10 p)) - 1. They probe kinds of training the zoo
/// had not had: a cross-entropy read at a random 15% of the positions, with inputs the collator
/// corrupts; an alignment-free sequence loss whose healthy curve has a plateau in it; and an
/// adversarial term inside one optimizer's loss, whose total is no progress measure. Like the
/// other families, each taps its activations in forward order through `taps` and names the
/// layers forward_inf can be planted in. Their own modules, so that a change to another family
/// cannot change these held-out runs.
#pragma once

#include "data.hpp"
#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>  // std::tie, std::get of the GRU's (output, state)
#include <utility>
#include <vector>

namespace zoo {

// ---------------------------------------------------------------------------------------------
// masked_lm: a BERT-style encoder over characters

/// One bidirectional encoder block, pre- or post-norm (BERT's is post-norm), its attention
/// written out so that its logits can be observed: every position attends to every other (no
/// causal mask, no padding: every window is full). GELU in the feed-forward of 4 x the width.
struct mlm_block : torch::nn::Module {
  mlm_block(std::int64_t d, std::int64_t heads, bool pre_norm) : width(d), h(heads), pre(pre_norm) {
    using namespace torch::nn;
    ln1 = register_module("ln1", LayerNorm(LayerNormOptions({d})));
    qkv = register_module("qkv", Linear(d, 3 * d));
    proj = register_module("proj", Linear(d, d));
    ln2 = register_module("ln2", LayerNorm(LayerNormOptions({d})));
    fc1 = register_module("fc1", Linear(d, 4 * d));
    fc2 = register_module("fc2", Linear(4 * d, d));
  }
  /// x [B, T, d] -> [B, T, d]; `name` names its taps.
  torch::Tensor forward(const torch::Tensor& x, const std::string& name, taps& t) {
    const auto B = x.size(0), T = x.size(1), dh = width / h;
    auto a_in = pre ? ln1(x) : x;
    auto q_k_v = qkv(a_in).view({B, T, 3, h, dh}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, dh]
    auto scores = torch::matmul(q_k_v[0], q_k_v[1].transpose(-2, -1))
                      .mul(1.0 / std::sqrt(static_cast<double>(dh)));
    t.attention.emplace_back(name + ".attn", scores.detach());  // [B, H, T, T]
    auto attn =
        torch::matmul(torch::softmax(scores, -1), q_k_v[2]).transpose(1, 2).reshape({B, T, width});
    auto y = x + proj(attn);
    if (!pre) y = ln1(y);
    auto f_in = pre ? ln2(y) : y;
    auto z = t.act(name + ".fc1.gelu", torch::gelu(fc1(f_in)));
    y = y + fc2(z);
    if (!pre) y = ln2(y);
    return y;
  }
  std::int64_t width, h;
  bool pre;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
};

/// A masked language model over `vocab` ids (the characters and [MASK], the last id): a token
/// embedding `embed` plus a learned position embedding `pos_embed` of `context` rows, BERT's
/// embedding LayerNorm, `blocks_n` encoder blocks (`blocks.0`, ...), a final LayerNorm in the
/// pre-norm form, and a linear `head` over the whole vocabulary, [MASK] included (BERT's decoder
/// covers every id). Token ids [B, T] -> logits [B, T, vocab]. LibTorch's default
/// initialization of each module, as the zoo's causal transformer has it.
struct masked_lm_net : net {
  masked_lm_net(std::int64_t vocab, std::int64_t d, std::int64_t heads, std::int64_t blocks_n,
                std::int64_t context, bool pre_norm)
      : pre(pre_norm) {
    using namespace torch::nn;
    embed = register_module("embed", Embedding(vocab, d));
    pos_embed = register_module("pos_embed", Embedding(context, d));
    embed_ln = register_module("embed_ln", LayerNorm(LayerNormOptions({d})));
    blocks = register_module("blocks", ModuleList());
    for (std::int64_t i = 0; i < blocks_n; ++i) {
      blocks->push_back(std::make_shared<mlm_block>(d, heads, pre_norm));
      const std::string n = "blocks." + std::to_string(i);
      overflow_sites.emplace_back(n, n + ".fc1.gelu");
    }
    if (pre) ln_f = register_module("ln_f", LayerNorm(LayerNormOptions({d})));
    head = register_module("head", Linear(d, vocab));
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto T = x.size(1);
    auto h = embed_ln(embed(x) + pos_embed(torch::arange(T, torch::kLong)));
    for (std::size_t i = 0; i < blocks->size(); ++i)
      h = blocks[i]->as<mlm_block>()->forward(h, "blocks." + std::to_string(i), t);
    if (pre) h = ln_f(h);
    return head(h);
  }
  bool pre;
  torch::nn::Embedding embed{nullptr}, pos_embed{nullptr};
  torch::nn::LayerNorm embed_ln{nullptr}, ln_f{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::Linear head{nullptr};
};

/// The label of a position the loss does not read (PyTorch's ignore_index default).
inline constexpr std::int64_t not_chosen = -100;

/// BERT's masking, as Hugging Face's DataCollatorForLanguageModeling does it: each position
/// chosen with probability 0.15; a chosen one becomes [MASK] (`mask_id`) 80% of the time, a
/// random character (uniform over the `chars` characters) 10% and stays itself 10%; the labels
/// are the original ids at the chosen positions and `not_chosen` elsewhere. ids [B, T] ->
/// (inputs [B, T], labels [B, T]).
inline std::pair<torch::Tensor, torch::Tensor> mlm_mask(const torch::Tensor& ids,
                                                        std::int64_t chars, std::int64_t mask_id,
                                                        torch::Generator& gen) {
  const auto chosen = torch::rand(ids.sizes(), gen) < 0.15;
  const auto r = torch::rand(ids.sizes(), gen);
  const auto to_mask = chosen & (r < 0.8), to_random = chosen & (r >= 0.8) & (r < 0.9);
  auto inputs = torch::where(to_mask, torch::full_like(ids, mask_id), ids);
  inputs =
      torch::where(to_random, torch::randint(0, chars, ids.sizes(), gen, torch::kLong), inputs);
  return {inputs, torch::where(chosen, ids, torch::full_like(ids, not_chosen))};
}

/// A text's characters as a table of `window`-character windows, as load_licenses cuts the six
/// license texts: blocks of 10 windows, every 7th block validation (so that validation covers
/// every part of the text, not only its end), training windows starting every 8 characters
/// inside the training blocks, validation windows not overlapping and shuffled once (seed 7).
/// Labels unused (0).
inline table text_windows(const text& tx, std::int64_t window) {
  const auto& ids = tx.c.tokens;
  const auto n = ids.size(0), block = 10 * window;
  std::vector<std::int64_t> train_starts, val_starts;
  for (std::int64_t b = 0; b * block + window <= n; ++b) {
    const auto end = std::min(n, (b + 1) * block);
    const bool val = b % 7 == 6;
    for (std::int64_t at = b * block; at + window <= end; at += val ? window : 8)
      (val ? val_starts : train_starts).push_back(at);
  }
  const auto rows = [&](const std::vector<std::int64_t>& starts) {
    const auto s = torch::tensor(starts, torch::kLong);
    return ids
        .index({(s.unsqueeze(1) + torch::arange(window, torch::kLong).unsqueeze(0)).reshape({-1})})
        .view({s.size(0), window});
  };
  table t;
  t.x_train = rows(train_starts);
  t.y_train = torch::zeros({t.x_train.size(0)}, torch::kLong);
  torch::Generator gen = at::detail::createCPUGenerator(7);
  auto xv = rows(val_starts);
  t.x_val = xv.index_select(0, torch::randperm(xv.size(0), gen, torch::kLong));
  t.y_val = torch::zeros({t.x_val.size(0)}, torch::kLong);
  t.classes = 0;
  t.side = window;
  t.vocab = tx.c.vocab;
  t.source = tx.c.source + " (" + std::to_string(t.x_train.size(0)) + " training and " +
             std::to_string(t.x_val.size(0)) + " validation windows of " + std::to_string(window) +
             " characters)";
  return t;
}

/// The masked LM's batches, masked in the loader (the collator), from the run's own generator:
/// shuffled epochs of a table's windows of text (the first `context` characters of each
/// 64-character window; the windows start every 8 characters). Validation: the table's first
/// 128 validation windows, masked once with a fixed seed: the same positions and corruptions at
/// every evaluation.
struct mlm_stream {
  const table* tab;
  std::int64_t context, chars, mask_id;
  torch::Generator gen;
  torch::Tensor order;
  std::int64_t next = 0;
  torch::Tensor val_inputs, val_labels;
  mlm_stream(const table* t, std::int64_t ctx, std::int64_t n_chars, std::uint64_t seed)
      : tab(t),
        context(ctx),
        chars(n_chars),
        mask_id(n_chars),
        gen(at::detail::createCPUGenerator(seed)) {
    torch::Generator vg = at::detail::createCPUGenerator(424242);
    const auto val = tab->x_val.slice(0, 0, std::min<std::int64_t>(128, tab->x_val.size(0)))
                         .slice(1, 0, context);
    std::tie(val_inputs, val_labels) = mlm_mask(val, chars, mask_id, vg);
  }
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t b) {
    const auto n = tab->x_train.size(0);
    if (!order.defined() || next + b > n) {
      order = torch::randperm(n, gen, torch::kLong);
      next = 0;
    }
    const auto ids =
        tab->x_train.index_select(0, order.slice(0, next, next + b)).slice(1, 0, context);
    next += b;
    return mlm_mask(ids, chars, mask_id, gen);
  }
};

/// The masked LM's loss: the cross-entropy of the logits [B, T, V] at the chosen positions
/// (labels [B, T], `not_chosen` elsewhere: torch.nn.CrossEntropyLoss's ignore_index), the mean
/// over them.
inline torch::Tensor mlm_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}),
                          F::CrossEntropyFuncOptions().ignore_index(not_chosen));
}

// ---------------------------------------------------------------------------------------------
// ctc: glyph sequences read column by column

/// A table's glyphs (UCI digits 8 x 8, or Fashion-MNIST downsampled to 12 x 12) as sequences of
/// 3 to 6 glyphs laid side by side, from the run's own generator: x [B, side, 6 side at most]
/// (the batch padded with background, 0, to its longest sequence), labels [B, 7]: the length n,
/// then the n classes + 1 (0 is CTC's blank), 0 after them. Validation: 256 sequences of the
/// validation glyphs drawn once with a fixed seed.
struct glyph_sequences {
  static constexpr std::int64_t shortest = 3, longest = 6;
  const table* tab;
  std::int64_t side;
  torch::Generator gen;
  std::pair<torch::Tensor, torch::Tensor> val;
  glyph_sequences(const table* t, std::uint64_t seed)
      : tab(t), side(t->side), gen(at::detail::createCPUGenerator(seed)) {
    torch::Generator vg = at::detail::createCPUGenerator(424242);
    val = make(tab->x_val, tab->y_val, 256, vg);
  }
  std::pair<torch::Tensor, torch::Tensor> make(const torch::Tensor& x, const torch::Tensor& y,
                                               std::int64_t b, torch::Generator& g) const {
    const auto lengths = torch::randint(shortest, longest + 1, {b}, g, torch::kLong);
    const auto idx = torch::randint(0, x.size(0), {b * longest}, g, torch::kLong);
    const auto used =
        torch::arange(longest, torch::kLong).unsqueeze(0) < lengths.unsqueeze(1);  // [B, 6]
    // [B, 6, side, side] -> [B, side, 6, side] -> [B, side, 6 side]: glyph k in columns k side...
    auto glyphs = x.index_select(0, idx).view({b, longest, side, side}) *
                  used.unsqueeze(2).unsqueeze(3).to(torch::kFloat);
    const auto widest = lengths.max().item<std::int64_t>();
    auto img = glyphs.permute({0, 2, 1, 3})
                   .reshape({b, side, longest * side})
                   .slice(2, 0, widest * side)
                   .contiguous();
    auto labels = (y.index_select(0, idx).view({b, longest}) + 1) * used.to(torch::kLong);
    return {img, torch::cat({lengths.unsqueeze(1), labels}, 1)};
  }
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t b) {
    return make(tab->x_train, tab->y_train, b, gen);
  }
};

/// Fashion-MNIST's glyphs at 12 x 12 (the central 24 x 24, 2 x 2 average pooling), in [0, 1]:
/// the first `n_train` training images and the first 512 validation images; labels kept.
inline table fashion_glyphs12(const table& f, std::int64_t n_train) {
  const auto pool = [](const torch::Tensor& x) {
    return torch::avg_pool2d(x.view({x.size(0), 1, 28, 28}).slice(2, 2, 26).slice(3, 2, 26), 2)
        .flatten(1);
  };
  return shrunk(f, n_train, 12, pool, "at 12 x 12");
}

/// A sequence recognizer emitting per-column logits over the 10 labels and the blank (index 0):
/// x [B, side, W] -> logits [B, W / stride, 11], `frames` columns of output per glyph.
///  - crnn: conv1 (c1, 3x3) -> ReLU -> 2x2 max pool -> conv2 (c2, 3x3) -> ReLU -> 2x2 max pool
///    -> each column's features -> a GRU of `hidden` (bidirectional or not) -> head: a quarter
///    of a glyph's columns (2 frames a digit, 3 a Fashion-MNIST glyph);
///  - tcn (conv only): each column's pixels as channels, conv1, conv2 (c, kernel 3) and conv3
///    (c, kernel 3, dilation 2), ReLU each, -> head (a 1x1 conv).
struct ctc_net : net {
  ctc_net(std::int64_t glyph_side, bool recurrent, std::int64_t c1, std::int64_t c2,
          std::int64_t hidden, bool bidirectional)
      : side(glyph_side), rnn(recurrent) {
    using namespace torch::nn;
    if (rnn) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, c1, 3).padding(1)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(c1, c2, 3).padding(1)));
      const auto rows = side / 4;
      gru = register_module(
          "gru", GRU(GRUOptions(c2 * rows, hidden).batch_first(true).bidirectional(bidirectional)));
      head = register_module("head", Linear(bidirectional ? 2 * hidden : hidden, 11));
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}, {"gru", "gru.out"}};
    } else {
      tconv1 = register_module("conv1", Conv1d(Conv1dOptions(side, c1, 3).padding(1)));
      tconv2 = register_module("conv2", Conv1d(Conv1dOptions(c1, c1, 3).padding(1)));
      tconv3 = register_module("conv3", Conv1d(Conv1dOptions(c1, c1, 3).padding(2).dilation(2)));
      thead = register_module("head", Conv1d(Conv1dOptions(c1, 11, 1)));
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}, {"conv3", "conv3.relu"}};
    }
    // He initialization of the ReLU convolutions (biases 0), as conv stacks without
    // normalization are initialized: see recipes() for what LibTorch's default did here.
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      const bool conv_layer = p.key().rfind("conv", 0) == 0;
      if (!conv_layer) continue;
      if (p.value().dim() > 1)
        torch::nn::init::kaiming_normal_(p.value(), 0.0, torch::kFanIn, torch::kReLU);
      else
        p.value().zero_();
    }
  }
  /// Output columns per glyph.
  [[nodiscard]] std::int64_t frames() const { return rnn ? side / 4 : side; }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto B = x.size(0), W = x.size(2);
    if (!rnn) {
      auto h = t.act("conv1.relu", torch::relu(tconv1(x)));  // [B, c, W]
      h = t.act("conv2.relu", torch::relu(tconv2(h)));
      h = t.act("conv3.relu", torch::relu(tconv3(h)));
      return thead(h).transpose(1, 2);  // [B, W, 11]
    }
    auto h = torch::max_pool2d(t.act("conv1.relu", torch::relu(conv1(x.view({B, 1, side, W})))), 2);
    h = torch::max_pool2d(t.act("conv2.relu", torch::relu(conv2(h))),
                          2);                             // [B, c2, side / 4, W / 4]
    auto cols = h.permute({0, 3, 1, 2}).flatten(2);       // [B, W', c2 rows]
    auto out = t.act("gru.out", std::get<0>(gru(cols)));  // [B, W', (2) hidden]
    return head(out);
  }
  std::int64_t side;
  bool rnn;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::GRU gru{nullptr};
  torch::nn::Linear head{nullptr};
  torch::nn::Conv1d tconv1{nullptr}, tconv2{nullptr}, tconv3{nullptr}, thead{nullptr};
};

/// CTC over a batch's per-column logits [B, T, 11] and labels [B, 7] (see glyph_sequences):
/// torch.nn.CTCLoss(blank=0, reduction='mean', zero_infinity=True) on the log-softmax [T, B, 11],
/// each sequence's input length its glyphs x `frames`: each example's loss divided by its
/// target length, then the mean over the batch.
inline torch::Tensor ctc_sequence_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                       std::int64_t frames) {
  namespace F = torch::nn::functional;
  const auto lengths = labels.select(1, 0);
  const auto log_probs = torch::log_softmax(logits, 2).transpose(0, 1);
  return F::ctc_loss(log_probs, labels.slice(1, 1), lengths * frames, lengths,
                     F::CTCLossFuncOptions().blank(0).reduction(torch::kMean).zero_infinity(true));
}

// ---------------------------------------------------------------------------------------------
// domain_adversarial: DANN

/// The gradient-reversal layer (Ganin & Lempitsky): the identity forward, the gradient times
/// -lambda backward (the pytorch-DANN ReverseLayerF as a LibTorch autograd function).
struct gradient_reversal : torch::autograd::Function<gradient_reversal> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               double lambda) {
    ctx->saved_data["lambda"] = lambda;
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const double lambda = ctx->saved_data["lambda"].toDouble();
    return {grad_out[0] * -lambda, torch::Tensor()};
  }
};

/// Ganin's ramp of the reversal's coefficient over the training progress p in [0, 1]:
/// 2 / (1 + exp(-10 p)) - 1, 0 at the start and near 1 from p = 0.5.
inline double dann_lambda(std::int64_t step, std::int64_t steps) {
  const double p =
      static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, steps));
  return 2.0 / (1.0 + std::exp(-10.0 * p)) - 1.0;
}

/// The domain classifier: features -> `fc1` (ReLU) -> `fc2`, one logit (target vs source).
struct domain_classifier : torch::nn::Module {
  domain_classifier(std::int64_t in, std::int64_t hidden) {
    fc1 = register_module("fc1", torch::nn::Linear(in, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, 1));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

/// DANN: a feature extractor (an MLP of `widths`, ReLU; or on 28 x 28 images conv1 (c1, 5x5,
/// stride 2) -> conv2 (c2, 3x3, stride 2) -> fc1 (widths[0]), ReLU each), a label classifier
/// `label_head` (10 classes) on the source rows, and a domain classifier `domain` on every row
/// behind the gradient reversal at `lambda` (set each step by the loop). x [2N, D]: the N source
/// rows, then the N target rows -> the source rows' class logits [N, 10]; the domain logits [2N]
/// are left in `domain_logits` for the loss (dann_loss).
struct dann_net : net {
  dann_net(std::int64_t glyph_side, bool cnn, const std::vector<std::int64_t>& widths,
           std::int64_t c1, std::int64_t c2, std::int64_t domain_hidden)
      : side(glyph_side), conv(cnn) {
    using namespace torch::nn;
    std::int64_t w = side * side;
    if (conv) {
      conv1 = register_module("conv1", Conv2d(Conv2dOptions(1, c1, 5).stride(2).padding(2)));
      conv2 = register_module("conv2", Conv2d(Conv2dOptions(c1, c2, 3).stride(2).padding(1)));
      const auto s2 = (side + 3) / 4;
      w = c2 * s2 * s2;
      overflow_sites = {{"conv1", "conv1.relu"}, {"conv2", "conv2.relu"}};
    }
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string n = "fc" + std::to_string(i + 1);
      fc.push_back(register_module(n, Linear(w, widths[i])));
      overflow_sites.emplace_back(n, n + ".relu");
      w = widths[i];
    }
    label_head = register_module("label_head", Linear(w, 10));
    domain = register_module("domain", std::make_shared<domain_classifier>(w, domain_hidden));
  }
  torch::Tensor features(const torch::Tensor& x, taps& t) {
    auto h = x;
    if (conv) {
      h = t.act("conv1.relu", torch::relu(conv1(x.view({x.size(0), 1, side, side}))));
      h = t.act("conv2.relu", torch::relu(conv2(h))).flatten(1);
    }
    for (std::size_t i = 0; i < fc.size(); ++i)
      h = t.act(overflow_sites[(conv ? 2 : 0) + i].second, torch::relu(fc[i](h)));
    return h;
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto f = features(x, t);
    const auto n = x.size(0) / 2;
    auto d =
        t.act("domain.fc1.relu", torch::relu(domain->fc1(gradient_reversal::apply(f, lambda))));
    domain_logits = domain->fc2(d).squeeze(1);
    return label_head(f.slice(0, 0, n));
  }
  /// The label classifier's logits of x (either domain), no taps: evaluation.
  torch::Tensor classify(const torch::Tensor& x) {
    taps unused;
    return label_head(features(x, unused));
  }
  std::int64_t side;
  bool conv;
  double lambda = 0.0;
  torch::Tensor domain_logits;  ///< [2N]: the last forward's
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  std::vector<torch::nn::Linear> fc;
  torch::nn::Linear label_head{nullptr};
  std::shared_ptr<domain_classifier> domain;
};

/// DANN's total, as pytorch-DANN's loop adds it: the source rows' cross-entropy plus the domain
/// classifier's BCE with logits over every row (source 0, target 1), the mean over the 2N rows.
inline torch::Tensor dann_loss(const torch::Tensor& logits, const torch::Tensor& y,
                               const torch::Tensor& domain_logits) {
  namespace F = torch::nn::functional;
  const auto n = domain_logits.size(0) / 2;
  const auto domain_y = torch::cat({torch::zeros({n}), torch::ones({domain_logits.size(0) - n})});
  return F::cross_entropy(logits, y) + F::binary_cross_entropy_with_logits(domain_logits, domain_y);
}

/// How the target domain is drawn from the source's images (x [n, side^2] in [0, 1]), fixed per
/// image (the target set is a data set, drawn once, its noise from a fixed generator): `noise`,
/// the contrast halved around 0.5 with Gaussian noise of 0.2, clamped to [0, 1]; `blur`, a 3 x 3
/// box blur, brightened (0.3 + 0.7 x) with Gaussian noise of 0.1, clamped.
enum class target_shift { noise, blur };

inline torch::Tensor shift_domain(const torch::Tensor& x, std::int64_t side, target_shift kind,
                                  std::uint64_t seed) {
  torch::Generator g = at::detail::createCPUGenerator(seed);
  switch (kind) {
    case target_shift::noise:
      return (0.2 + 0.6 * x + 0.1 * torch::randn(x.sizes(), g)).clamp(0.0, 1.0);
    case target_shift::blur: {
      const auto b =
          torch::avg_pool2d(x.view({x.size(0), 1, side, side}), 3, 1, 1, /*ceil_mode=*/false,
                            /*count_include_pad=*/false)
              .reshape({x.size(0), side * side});
      return (0.2 + 0.8 * b + 0.05 * torch::randn(x.sizes(), g)).clamp(0.0, 1.0);
    }
  }
  return x;
}

/// DANN's batches: N labelled source rows (shuffled epochs of the table) and N target rows
/// (random rows of the first 10000 training images shifted, labels unread, drawn independently
/// of the source rows, as MNIST-M is drawn from MNIST's own digits), from the run's own
/// generator: x [2N, D] (source, then target), y the source labels [N]. `target_val`: the first
/// 256 validation images shifted, whose labels only the progress metric reads.
struct dann_stream {
  const table* tab;
  torch::Tensor target_train, target_val;
  torch::Generator gen;
  torch::Tensor order;
  std::int64_t next = 0;
  dann_stream(const table* t, target_shift kind, std::uint64_t seed)
      : tab(t), gen(at::detail::createCPUGenerator(seed)) {
    target_train =
        shift_domain(tab->x_train.slice(0, 0, std::min<std::int64_t>(10000, tab->x_train.size(0))),
                     tab->side, kind, 20261208);
    target_val =
        shift_domain(tab->x_val.slice(0, 0, std::min<std::int64_t>(256, tab->x_val.size(0))),
                     tab->side, kind, 20261209);
  }
  std::pair<torch::Tensor, torch::Tensor> draw(std::int64_t b) {
    const auto n = tab->x_train.size(0);
    if (!order.defined() || next + b > n) {
      order = torch::randperm(n, gen, torch::kLong);
      next = 0;
    }
    const auto idx = order.slice(0, next, next + b);
    next += b;
    const auto t_idx = torch::randint(0, target_train.size(0), {b}, gen, torch::kLong);
    return {torch::cat({tab->x_train.index_select(0, idx), target_train.index_select(0, t_idx)}),
            tab->y_train.index_select(0, idx)};
  }
};

}  // namespace zoo
