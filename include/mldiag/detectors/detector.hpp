// SPDX-License-Identifier: Apache-2.0
/// The detector base: what a detector sees, the concept it models, how it describes itself.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/detectors/escalation.hpp"
#include "mldiag/detectors/state.hpp"
#include "mldiag/evidence/recorder.hpp"
#include "mldiag/evidence/snapshot.hpp"
#include "mldiag/vocab/finding.hpp"
#include "mldiag/vocab/symptom.hpp"
#include "mldiag/vocab/thresholds.hpp"

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

namespace mldiag::inline MLDIAG_ABI {

/// What a detector sees at each step: the newest snapshot, the history and the names.
struct observation {
  const snapshot& now;
  const history& past;
  const name_table& names;
};

}  // namespace mldiag

namespace mldiag::inline MLDIAG_ABI::detectors {

/// A detector is a small stateful value: `observe` reads one step's evidence and appends the
/// findings it has (usually none) to `out`; `name` says which detector it is. Observing a
/// step where nothing fires must not allocate once the detector is warm.
template <class D>
concept detector = requires(D& d, const observation& o, std::vector<finding>& out) {
  d.observe(o, out);
  { d.name() } -> std::convertible_to<std::string_view>;
};

/// A named, settable parameter of a detector's config: a number, a count or a flag. Each
/// config lists its own in `static constexpr auto fields()`, beside the defaults, so the names
/// are written once.
template <class C>
struct field {
  std::string_view name;
  std::variant<double C::*, std::size_t C::*, bool C::*> at;
};

/// A parameter's value as a caller gives it (`{"factor", 4}`, `{"window", 200}`,
/// `{"full_batch", true}`): a number, a whole number or a flag. The catalogue applies it to a
/// field of the same kind: a whole number to a number, a count or (0 or 1) a flag; a number
/// to a number, or to a count when it is whole; a flag to a flag. Anything else is an error
/// that names the field's kind.
class parameter_value {
 public:
  enum class kind : std::uint8_t { number, whole, flag };
  constexpr parameter_value(double v) noexcept : number_(v), kind_(kind::number) {}  // NOLINT: implicit by design
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  constexpr parameter_value(I v) noexcept  // NOLINT: implicit by design
      : number_(static_cast<double>(v)), whole_(static_cast<std::int64_t>(v)), kind_(kind::whole) {}
  constexpr parameter_value(bool v) noexcept : number_(v ? 1.0 : 0.0), whole_(v ? 1 : 0), kind_(kind::flag) {}  // NOLINT
  [[nodiscard]] constexpr kind what() const noexcept { return kind_; }
  /// The value as a number (a flag is 0 or 1).
  [[nodiscard]] constexpr double number() const noexcept { return number_; }
  /// The value as a whole number, where it is one (a number that is whole counts).
  [[nodiscard]] constexpr std::optional<std::int64_t> whole() const noexcept {
    if (kind_ != kind::number) return whole_;
    if (number_ >= -9.2e18 && number_ <= 9.2e18 && number_ == static_cast<double>(static_cast<std::int64_t>(number_)))
      return static_cast<std::int64_t>(number_);
    return std::nullopt;
  }
  friend constexpr bool operator==(const parameter_value&, const parameter_value&) = default;

 private:
  double number_ = 0.0;
  std::int64_t whole_ = 0;
  kind kind_ = kind::number;
};

/// What a detector says about itself, once: its name (the key of `make_detector`), the question
/// it answers, the symptoms its findings name and what it finds, in a line. The catalogue, the
/// default set, `mldiag detectors` and the table in docs/detectors.md read it.
struct detector_info {
  /// How a detector stands to the user's declarations (vocab/declarations.hpp).
  struct traits_t {
    /// It holds a baseline of a stationary run (a loss median, a first window, a norm's
    /// level): a declared change (`regime_change`) starts it again from that step.
    bool restarts_on_change = false;
    /// It reads the training loss as the run's progress: with `objective::not_progress` it
    /// stands aside (progress is then read from the user's metrics by metric_not_improving).
    bool judges_loss_progress = false;
    /// What earns its findings a warning, in a line (docs/detectors.md's table prints it): the
    /// harm itself, a persistence, or a consequence that must follow.
    std::string_view consequence = {};
  };
  std::string_view name;
  mldiag::question question = mldiag::question::convergence;
  std::array<symptom, 8> symptoms{};
  std::string_view summary = {};
  traits_t traits = {};
  [[nodiscard]] constexpr bool raises(symptom s) const noexcept {
    for (const symptom x : symptoms)
      if (!x.empty() && x == s) return true;
    return false;
  }
};

/// How many loss observations a detector needs before it can judge at all (its warm-up or
/// window); detectors that read the loss over a window say so with `needs_losses()`, so that a
/// short log is answered "too few points to judge" instead of silence.
template <class D>
[[nodiscard]] std::size_t needs_losses(const D& d) {
  if constexpr (requires { { d.needs_losses() } -> std::convertible_to<std::size_t>; }) return d.needs_losses();
  else return 0;
}

}  // namespace mldiag::detectors
