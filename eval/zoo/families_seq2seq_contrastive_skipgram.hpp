// SPDX-License-Identifier: Apache-2.0
/// The `seq2seq`, `contrastive` and `skipgram` families (split heldout5) in LibTorch: a GRU or LSTM
/// encoder-decoder that writes a window of license text backwards (teacher forcing), a SimCLR-style
/// contrastive encoder on Fashion-MNIST (NT-Xent over in-batch negatives, two augmented views per
/// image), and word2vec's skip-gram with negative sampling on the license texts' words; and the two
/// losses that read nothing but the model's output (NT-Xent, negative sampling). Like the other
/// families, each taps its activations in forward order through `taps` and names the layers
/// forward_inf can be planted in. Their own modules, so that a change to another family cannot
/// change these held-out runs.
#pragma once

#include "families.hpp"
#include "observe.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace zoo {

/// A character-level sequence-to-sequence model: a window of L characters [N, L] -> the same
/// window reversed, one character at a time, with teacher forcing. One embedding of vocab + 1
/// tokens (the last is BOS) serves both sides; a 1-layer GRU or LSTM encoder reads the source,
/// its last hidden state starts a decoder of the same kind, which reads BOS and the target
/// shifted right by one; a linear head gives logits [N, L, vocab]. The teacher-forced decoder
/// input is built in forward() from x (the target is x reversed, so the target shifted right
/// is BOS then x reversed without its last character): `net::forward` takes one tensor.
/// Taps: the embedded source and decoder input, the encoder's outputs, the decoder's outputs.
struct seq2seq_net : net {
  seq2seq_net(std::int64_t vocab, std::int64_t d, std::int64_t hidden, bool lstm_cell)
      : bos_(vocab), lstm_(lstm_cell) {
    using namespace torch::nn;
    embed = register_module("embed", Embedding(vocab + 1, d));
    if (lstm_) {
      enc_lstm = register_module("encoder", LSTM(LSTMOptions(d, hidden).batch_first(true)));
      dec_lstm = register_module("decoder", LSTM(LSTMOptions(d, hidden).batch_first(true)));
    } else {
      enc_gru = register_module("encoder", GRU(GRUOptions(d, hidden).batch_first(true)));
      dec_gru = register_module("decoder", GRU(GRUOptions(d, hidden).batch_first(true)));
    }
    head = register_module("head", Linear(hidden, vocab));
    overflow_sites = {
        {"embed", "embed.out"}, {"encoder", "encoder.out"}, {"decoder", "decoder.out"}};
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto n = x.size(0), len = x.size(1);
    auto shifted =
        torch::cat({torch::full({n, 1}, bos_, x.options()), x.flip(1).slice(1, 0, len - 1)}, 1);
    auto e = t.act("embed.out",
                   embed(torch::cat({x, shifted}, 1)));  // [N, 2L, d]: source, decoder input
    auto src = e.slice(1, 0, len), tgt = e.slice(1, len, 2 * len);
    torch::Tensor dec;
    if (lstm_) {
      auto [out, state] = enc_lstm(src);
      auto enc = t.act("encoder.out", out);  // [N, L, H]
      // The decoder starts from the tapped last output (= h_n), so that a fault planted in the
      // encoder's outputs reaches it.
      auto h0 = enc.select(1, len - 1).unsqueeze(0).contiguous();  // [1, N, H]
      dec = std::get<0>(dec_lstm(tgt, std::make_tuple(h0, std::get<1>(state))));
    } else {
      auto enc = t.act("encoder.out", std::get<0>(enc_gru(src)));
      dec = std::get<0>(dec_gru(tgt, enc.select(1, len - 1).unsqueeze(0).contiguous()));
    }
    return head(t.act("decoder.out", dec));  // [N, L, vocab]
  }
  std::int64_t bos_;
  bool lstm_;
  torch::nn::Embedding embed{nullptr};
  torch::nn::GRU enc_gru{nullptr}, dec_gru{nullptr};
  torch::nn::LSTM enc_lstm{nullptr}, dec_lstm{nullptr};
  torch::nn::Linear head{nullptr};
};

/// SimCLR on side x side images: each image of the batch [N, side * side] gives two views
/// (a shift of up to 4 pixels each way from zero padding, a horizontal flip half the time,
/// Gaussian noise of 0.1), made with the run's own generator in training and with a fixed one
/// (seed 777, every call) in evaluation, so that validation sees the same views each time.
/// Encoder: 2 or 3 ReLU convs (1 -> 16, 5x5 stride 2: 28 -> 14; 16 -> 32, 3x3 stride 2: 14 ->
/// 7; 32 -> 64, 3x3 stride 2: 7 -> 4), global average pooling; projection head: Linear ->
/// ReLU -> Linear to 32 (SimCLR's), or one Linear; L2-normalized. Output: the NT-Xent logits,
/// cosine similarity / temperature between every pair of the 2N views, each row without its
/// own view: [2N, 2N - 1] (see nt_xent_loss). No mask of -Inf: the logits stay finite.
struct contrastive_net : net {
  contrastive_net(std::int64_t side, int convs, bool mlp_head, double temperature,
                  std::uint64_t seed)
      : side_(side), tau_(temperature), gen_(at::detail::createCPUGenerator(seed)) {
    using namespace torch::nn;
    const std::vector<std::int64_t> channels = {16, 32, 64};
    std::int64_t c = 1;
    for (int i = 0; i < convs; ++i) {
      const auto k = i == 0 ? 5 : 3;
      std::string n = "conv";
      n += std::to_string(i + 1);
      const auto out = channels[static_cast<std::size_t>(i)];
      convs_.push_back(
          register_module(n, Conv2d(Conv2dOptions(c, out, k).stride(2).padding(k / 2))));
      names_.push_back(n + ".relu");
      overflow_sites.emplace_back(n, n + ".relu");
      c = out;
    }
    if (mlp_head) {
      proj1 = register_module("proj1", Linear(c, c));
      overflow_sites.emplace_back("proj1", "proj1.relu");
    }
    proj = register_module("proj", Linear(c, 32));
  }
  /// Two views' worth of one batch: [N, 1, side, side] -> [N, 1, side, side].
  torch::Tensor augment(const torch::Tensor& img, at::Generator& g) const {
    constexpr std::int64_t pad = 4;
    const auto n = img.size(0);
    auto p =
        torch::constant_pad_nd(img.squeeze(1), {pad, pad, pad, pad});  // [N, side + 8, side + 8]
    auto dy = torch::randint(0, 2 * pad + 1, {n, 1}, g, torch::kLong);
    auto dx = torch::randint(0, 2 * pad + 1, {n, 1}, g, torch::kLong);
    auto flip = torch::randint(0, 2, {n, 1}, g, torch::kLong).to(torch::kBool);
    auto ar = torch::arange(side_, torch::kLong).unsqueeze(0);       // [1, side]
    auto rows = dy + ar;                                             // [N, side]
    auto cols = torch::where(flip, dx + (side_ - 1) - ar, dx + ar);  // [N, side]
    auto out = p.index(
        {torch::arange(n, torch::kLong).view({n, 1, 1}), rows.unsqueeze(2), cols.unsqueeze(1)});
    out = out + 0.1 * torch::randn(out.sizes(), g, out.options());
    return out.unsqueeze(1);
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto n = x.size(0);
    at::Generator g = is_training() ? gen_ : at::detail::createCPUGenerator(777);
    auto img = x.view({n, 1, side_, side_});
    auto h =
        torch::cat({augment(img, g), augment(img, g)}, 0);  // [2N, 1, side, side]: view 1, view 2
    for (std::size_t i = 0; i < convs_.size(); ++i)
      h = t.act(names_[i], torch::relu(convs_[i](h)));
    auto f = t.act("pool", h.mean({2, 3}));  // [2N, C]
    if (proj1) f = t.act("proj1.relu", torch::relu(proj1(f)));
    auto z = torch::nn::functional::normalize(proj(f),
                                              torch::nn::functional::NormalizeFuncOptions().dim(1));
    const auto m = 2 * n;
    auto sim = z.mm(z.t()) / tau_;  // [2N, 2N]
    // Drop the diagonal: of the flattened matrix without its first element, rows of 2N + 1
    // end with the next diagonal element.
    return sim.flatten().slice(0, 1).view({m - 1, m + 1}).slice(1, 0, m).reshape({m, m - 1});
  }
  std::int64_t side_;
  double tau_;
  at::Generator gen_;
  std::vector<torch::nn::Conv2d> convs_;
  std::vector<std::string> names_;
  torch::nn::Linear proj1{nullptr}, proj{nullptr};
};

/// NT-Xent (SimCLR's normalized temperature-scaled cross-entropy) from contrastive_net's
/// logits [2N, 2N - 1]: view i's positive is view i + N (column i + N - 1, its own column
/// dropped) and view i + N's is view i (column i); every other view of the batch is a negative.
inline torch::Tensor nt_xent_loss(const torch::Tensor& logits) {
  const auto n = logits.size(0) / 2;
  auto ar = torch::arange(n, torch::kLong);
  return torch::nn::functional::cross_entropy(logits, torch::cat({ar + (n - 1), ar}));
}

/// word2vec's skip-gram with negative sampling: input (center) embeddings "embed" and output
/// (context) embeddings "context", initialized as word2vec does (input uniform in +-0.5 / d,
/// output 0); per (center, context) pair [N, 2] of word ids, `negatives` words drawn from the
/// unigram distribution to the 3/4 with the run's own generator (a fixed one, seed 777 every
/// call, in evaluation). Output: the scores [N, 1 + negatives], the true context's first (see
/// sgns_loss). Taps: the center vectors, then the context and negative vectors.
struct skipgram_net : net {
  skipgram_net(std::int64_t vocab, std::int64_t d, const torch::Tensor& counts,
               std::int64_t negatives, std::uint64_t seed)
      : k_(negatives),
        noise_(counts.pow(0.75) / counts.pow(0.75).sum()),
        gen_(at::detail::createCPUGenerator(seed)) {
    using namespace torch::nn;
    embed = register_module("embed", Embedding(vocab, d));
    context = register_module("context", Embedding(vocab, d));
    torch::NoGradGuard no_grad;
    const double r = 0.5 / static_cast<double>(d);
    embed->weight.uniform_(-r, r);
    context->weight.zero_();
    overflow_sites = {{"embed", "embed.out"}, {"context", "context.out"}};
  }
  torch::Tensor forward(const torch::Tensor& x, taps& t) override {
    const auto n = x.size(0);
    at::Generator g = is_training() ? gen_ : at::detail::createCPUGenerator(777);
    auto neg = torch::multinomial(noise_, n * k_, /*replacement=*/true, g).view({n, k_});
    auto c = t.act("embed.out", embed(x.select(1, 0)));  // [N, d]
    auto o = t.act("context.out",
                   context(torch::cat({x.select(1, 1).unsqueeze(1), neg}, 1)));  // [N, 1 + K, d]
    return torch::bmm(o, c.unsqueeze(2)).squeeze(2);                             // [N, 1 + K]
  }
  std::int64_t k_;
  torch::Tensor noise_;  ///< [vocab] the negatives' distribution
  at::Generator gen_;
  torch::nn::Embedding embed{nullptr}, context{nullptr};
};

/// Negative sampling's loss from skipgram_net's scores [N, 1 + K]: -log sigmoid of the true
/// context's score minus the sum of log sigmoid(-score) over the K negatives, averaged over
/// the pairs (at word2vec's initialization every score is 0: (1 + K) ln 2).
inline torch::Tensor sgns_loss(const torch::Tensor& scores) {
  auto target = torch::zeros_like(scores);
  target.select(1, 0).fill_(1.0);
  return torch::nn::functional::binary_cross_entropy_with_logits(
             scores, target,
             torch::nn::functional::BinaryCrossEntropyWithLogitsFuncOptions().reduction(
                 torch::kSum)) /
         static_cast<double>(scores.size(0));
}

}  // namespace zoo
