// SPDX-License-Identifier: Apache-2.0
/// Model FLOPs utilization against a table of dense peaks, and the evidence that sits beside it
/// (tensor-core activity, throughput against a target).
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/core/error.hpp"

#include <array>
#include <cmath>    // std::isfinite
#include <cstdint>  // std::uint64_t
#include <cstdio>   // std::snprintf, for numbers in error messages
#include <string>
#include <string_view>
#include <utility>  // std::move

namespace mldiag::inline MLDIAG_ABI::efficiency {

/// Accelerators in the peak table. Pass your own peak (`custom_peak`) for anything else, or
/// for a card clocked differently from its datasheet.
enum class gpu : std::uint8_t {
  a100_sxm_80gb,
  h100_sxm,
  h100_pcie,
  h200_sxm,
  b200,
  l40s,
  rtx_4090
};

/// The math a step's matmuls run in. `fp32` is the non-tensor (CUDA core) FP32 peak; `tf32`
/// is FP32 data on tensor cores; `bf16`, `fp16` and `fp8` are tensor-core peaks with FP32
/// accumulation (what training uses).
enum class precision : std::uint8_t { fp32, tf32, bf16, fp16, fp8 };

/// One row of the peak table: dense (not 2:4 sparse) FLOP/s of one device, and where it
/// comes from.
struct peak_entry {
  gpu device;
  precision math;
  double flops_per_s;
  std::string_view source;
};

namespace detail {
// Sources, as NVIDIA publishes them. Datasheets print tensor-core peaks "with sparsity" (2:4
// structured sparsity doubles them); MFU compares with dense math, so those are halved here,
// and each comment says which figure was halved.
inline constexpr std::string_view a100_src =
    "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4), A100 80GB "
    "SXM, "
    "dense column";
inline constexpr std::string_view h100_src =
    "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM / H100 PCIe columns; tensor figures are "
    "printed "
    "with sparsity and halved here";
inline constexpr std::string_view h200_src =
    "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column; tensor figures are printed with "
    "sparsity "
    "and halved here";
inline constexpr std::string_view b200_src =
    "NVIDIA GB200 NVL72 / HGX B200 datasheet, per-GPU HGX B200 column; tensor figures are printed "
    "with "
    "sparsity and halved here";
inline constexpr std::string_view l40s_src =
    "NVIDIA L40S datasheet, dense figures (before the '|')";
inline constexpr std::string_view rtx4090_src =
    "NVIDIA Ada GPU architecture whitepaper, appendix table for GeForce RTX 4090, dense figures "
    "with FP32 "
    "accumulate (FP16 accumulate runs 2x on GeForce; training accumulates in FP32)";
}  // namespace detail

/// Dense peak FLOP/s per device and precision. A100 has no FP8 tensor cores, so it has no fp8
/// row. docs/efficiency.md prints the table with its sources.
inline constexpr std::array<peak_entry, 34> peak_table{{
    // A100 SXM4 80GB: FP32 19.5; TF32 156 | 312*; BF16 312 | 624*; FP16 312 | 624* (TFLOPS).
    {gpu::a100_sxm_80gb, precision::fp32, 19.5e12, detail::a100_src},
    {gpu::a100_sxm_80gb, precision::tf32, 156e12, detail::a100_src},
    {gpu::a100_sxm_80gb, precision::bf16, 312e12, detail::a100_src},
    {gpu::a100_sxm_80gb, precision::fp16, 312e12, detail::a100_src},
    // H100 SXM: FP32 67; TF32 989*; BF16 1,979*; FP16 1,979*; FP8 3,958* (* sparse, halved).
    {gpu::h100_sxm, precision::fp32, 67e12, detail::h100_src},
    {gpu::h100_sxm, precision::tf32, 494.5e12, detail::h100_src},
    {gpu::h100_sxm, precision::bf16, 989.5e12, detail::h100_src},
    {gpu::h100_sxm, precision::fp16, 989.5e12, detail::h100_src},
    {gpu::h100_sxm, precision::fp8, 1979e12, detail::h100_src},
    // H100 PCIe: FP32 51; TF32 756*; BF16 1,513*; FP16 1,513*; FP8 3,026* (* sparse, halved).
    {gpu::h100_pcie, precision::fp32, 51e12, detail::h100_src},
    {gpu::h100_pcie, precision::tf32, 378e12, detail::h100_src},
    {gpu::h100_pcie, precision::bf16, 756.5e12, detail::h100_src},
    {gpu::h100_pcie, precision::fp16, 756.5e12, detail::h100_src},
    {gpu::h100_pcie, precision::fp8, 1513e12, detail::h100_src},
    // H200 SXM: the same GH100 compute as H100 SXM, more memory: FP32 67; TF32 989*; BF16 1,979*;
    // FP16 1,979*; FP8 3,958* (* sparse, halved).
    {gpu::h200_sxm, precision::fp32, 67e12, detail::h200_src},
    {gpu::h200_sxm, precision::tf32, 494.5e12, detail::h200_src},
    {gpu::h200_sxm, precision::bf16, 989.5e12, detail::h200_src},
    {gpu::h200_sxm, precision::fp16, 989.5e12, detail::h200_src},
    {gpu::h200_sxm, precision::fp8, 1979e12, detail::h200_src},
    // HGX B200 (1,000 W), per GPU: FP32 75 TF; TF32 2.2 PF*; FP16/BF16 4.5 PF*; FP8 9 PF* (*
    // sparse,
    // halved). The GB200 NVL72 part is clocked higher (BF16 5 PF*): pass a custom peak for it.
    {gpu::b200, precision::fp32, 75e12, detail::b200_src},
    {gpu::b200, precision::tf32, 1.1e15, detail::b200_src},
    {gpu::b200, precision::bf16, 2.25e15, detail::b200_src},
    {gpu::b200, precision::fp16, 2.25e15, detail::b200_src},
    {gpu::b200, precision::fp8, 4.5e15, detail::b200_src},
    // L40S: FP32 91.6; TF32 183 | 366*; BF16 362.05 | 733*; FP16 362.05 | 733*; FP8 733 | 1,466*.
    {gpu::l40s, precision::fp32, 91.6e12, detail::l40s_src},
    {gpu::l40s, precision::tf32, 183e12, detail::l40s_src},
    {gpu::l40s, precision::bf16, 362.05e12, detail::l40s_src},
    {gpu::l40s, precision::fp16, 362.05e12, detail::l40s_src},
    {gpu::l40s, precision::fp8, 733e12, detail::l40s_src},
    // RTX 4090: FP32 82.6; TF32 82.6/165.2; BF16 and FP16 (FP32 accumulate) 165.2/330.4; FP8 (FP32
    // accumulate) 330.3/660.6 — dense/sparse.
    {gpu::rtx_4090, precision::fp32, 82.6e12, detail::rtx4090_src},
    {gpu::rtx_4090, precision::tf32, 82.6e12, detail::rtx4090_src},
    {gpu::rtx_4090, precision::bf16, 165.2e12, detail::rtx4090_src},
    {gpu::rtx_4090, precision::fp16, 165.2e12, detail::rtx4090_src},
    {gpu::rtx_4090, precision::fp8, 330.3e12, detail::rtx4090_src},
}};

/// The device's name as the table prints it ("H100 SXM").
[[nodiscard]] constexpr std::string_view name(gpu g) {
  switch (g) {
    case gpu::a100_sxm_80gb:
      return "A100 SXM 80GB";
    case gpu::h100_sxm:
      return "H100 SXM";
    case gpu::h100_pcie:
      return "H100 PCIe";
    case gpu::h200_sxm:
      return "H200 SXM";
    case gpu::b200:
      return "B200 (HGX)";
    case gpu::l40s:
      return "L40S";
    case gpu::rtx_4090:
      return "RTX 4090";
  }
  return "unknown device";
}

/// The precision's name ("bf16").
[[nodiscard]] constexpr std::string_view name(precision p) {
  switch (p) {
    case precision::fp32:
      return "fp32";
    case precision::tf32:
      return "tf32";
    case precision::bf16:
      return "bf16";
    case precision::fp16:
      return "fp16";
    case precision::fp8:
      return "fp8";
  }
  return "unknown precision";
}

/// A peak to measure against: FLOP/s of one device, what it is, and whether it came from the
/// table (then `math` says which precision; a custom peak says nothing about it).
struct peak {
  double flops_per_s = 0.0;
  std::string label;
  bool from_table = false;
  precision math = precision::bf16;
};

namespace detail {
[[nodiscard]] inline std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
}  // namespace detail

/// The dense peak of `device` in `math`, from `peak_table`. Throws `mldiag::error` when the
/// device has no such peak (fp8 on A100).
///
/// **Example**
/// ```cpp
/// auto p = mldiag::efficiency::table_peak(mldiag::efficiency::gpu::a100_sxm_80gb,
///                                         mldiag::efficiency::precision::bf16);  // 312e12
/// ```
[[nodiscard]] inline peak table_peak(gpu device, precision math) {
  for (const peak_entry& e : peak_table)
    if (e.device == device && e.math == math)
      return {e.flops_per_s, std::string(name(device)) + " " + std::string(name(math)) + " dense",
              true, math};
  throw error(
      std::string(name(device)) + " has no " + std::string(name(math)) +
      " peak (no such tensor-core mode): measure against the precision the matmuls really ran in, "
      "or pass custom_peak()");
}

/// Your own peak, in FLOP/s of one device (another card, a different clock, a TPU). Must be
/// finite and positive.
///
/// **Example**
/// ```cpp
/// auto p = mldiag::efficiency::custom_peak(197e12, "TPU v4 bf16");
/// ```
[[nodiscard]] inline peak custom_peak(double flops_per_s, std::string label = "custom peak") {
  if (!std::isfinite(flops_per_s) || !(flops_per_s > 0.0))
    throw error("custom_peak: the peak must be a finite, positive FLOP/s per device, got " +
                detail::number(flops_per_s));
  return {flops_per_s, std::move(label), false, precision::bf16};
}

/// MFU and the numbers behind it.
struct mfu_result {
  double mfu = 0.0;                   ///< achieved / (peak × devices), in [0, 1]
  double achieved_flops_per_s = 0.0;  ///< model FLOPs per second, all devices together
  double peak_flops_per_s = 0.0;      ///< peak × devices
};

namespace detail {

// Which input is probably wrong when MFU > 1, most likely first. The rules are rough, and the
// message says "probably": a 10x excess is almost always a step timed around asynchronous
// launches (the host returns long before the GPU finishes); an FP32 (non-tensor) peak is
// beaten whenever PyTorch let the matmuls run as TF32; otherwise the FLOP count (a global
// batch with devices = 1, MoE total instead of active parameters) comes before the peak.
[[nodiscard]] inline std::string mfu_over_one(double mfu, double achieved, const peak& p,
                                              std::uint64_t devices,
                                              const std::string& flops_reason,
                                              const std::string& time_reason) {
  const std::string peak_reason =
      "the peak is too low for what ran: wrong precision (a bf16 peak for fp8 matmuls, the fp32 "
      "non-tensor "
      "peak where TF32 tensor cores ran) or another device's peak";
  const bool fp32_peak = p.from_table && p.math == precision::fp32;
  std::string first;
  std::string rest;
  if (fp32_peak) {
    first = peak_reason;
    rest = time_reason + "; or " + flops_reason;
  } else if (mfu > 10.0) {
    first = time_reason;
    rest = flops_reason + "; or " + peak_reason;
  } else {
    first = flops_reason;
    rest = time_reason + "; or " + peak_reason;
  }
  return "MFU would be " + number(100.0 * mfu) + "% (achieved " + number(achieved) +
         " FLOP/s against " + std::to_string(devices) + " x " + number(p.flops_per_s) +
         " FLOP/s, " + p.label + "), which no device can do: an input is wrong. Probably " + first +
         ". Otherwise " + rest + ".";
}

inline void require_finite_positive(double v, const char* what) {
  if (!std::isfinite(v) || !(v > 0.0))
    throw error(std::string("model_flops_utilization: ") + what +
                " must be finite and positive, got " + number(v));
}

// The two reasons are built by the caller, which knows how its inputs were measured; they are
// only built on the error path, so the normal path does not allocate.
template <class FlopsReason, class TimeReason>
[[nodiscard]] mfu_result mfu_checked(double achieved, const peak& p, std::uint64_t devices,
                                     FlopsReason flops_reason, TimeReason time_reason) {
  if (devices == 0)
    throw error(
        "model_flops_utilization: devices is 0: give the number of accelerators of the step");
  require_finite_positive(p.flops_per_s, "the peak");
  if (!std::isfinite(achieved))
    throw error(
        "model_flops_utilization: the achieved FLOP/s overflowed: check the FLOPs and the time");
  const double total_peak = p.flops_per_s * static_cast<double>(devices);
  const double mfu = achieved / total_peak;
  if (mfu > 1.0)
    throw error(mfu_over_one(mfu, achieved, p, devices, flops_reason(), time_reason()));
  return {mfu, achieved, total_peak};
}

}  // namespace detail

/// MFU = (model FLOPs per step / step time) / (peak × devices). `flops_per_step` is the
/// training FLOPs of the whole step on all `devices` (from `training_flops_per_step`, or your
/// own count, e.g. a profiler's); `step_seconds` its wall time, synchronized. Throws
/// `mldiag::error` for zero, negative or non-finite inputs, and when MFU would exceed 100% —
/// the message says which input is probably wrong.
///
/// **Example**
/// ```cpp
/// using namespace mldiag::efficiency;
/// auto r = model_flops_utilization(14'088'356'757'504.0, 0.150,
///                                  table_peak(gpu::a100_sxm_80gb, precision::bf16));
/// // r.mfu == 0.3010...
/// ```
[[nodiscard]] inline mfu_result model_flops_utilization(double flops_per_step, double step_seconds,
                                                        const peak& p, std::uint64_t devices = 1) {
  detail::require_finite_positive(flops_per_step, "the FLOPs per step");
  detail::require_finite_positive(step_seconds, "the step time");
  return detail::mfu_checked(
      flops_per_step / step_seconds, p, devices,
      [&] {
        return "the FLOPs per step (" + detail::number(flops_per_step) +
               ") are too high: they should be batch x sequence x FLOPs per token of the step on "
               "the devices "
               "given (a global batch with devices = " +
               std::to_string(devices) +
               " counts other GPUs' work), with an MoE model's active parameters, not all its "
               "experts";
      },
      [&] {
        return "the step time (" + detail::number(step_seconds) +
               " s) is too short: read around asynchronous GPU work without synchronizing "
               "(torch.cuda.synchronize() before reading the clock, or CUDA events read after the "
               "step) it "
               "measures the kernel launches, not the work";
      });
}

/// MFU from throughput, PaLM's definition: tokens per second × FLOPs per token over peak ×
/// devices. Same checks as `model_flops_utilization`.
///
/// **Example**
/// ```cpp
/// auto r = model_flops_utilization_from_throughput(109'226.67, 859'885'056.0, peak_a100_bf16);
/// ```
[[nodiscard]] inline mfu_result model_flops_utilization_from_throughput(double tokens_per_s,
                                                                        double flops_per_token,
                                                                        const peak& p,
                                                                        std::uint64_t devices = 1) {
  detail::require_finite_positive(tokens_per_s, "the tokens per second");
  detail::require_finite_positive(flops_per_token, "the FLOPs per token");
  return detail::mfu_checked(
      tokens_per_s * flops_per_token, p, devices,
      [&] {
        return "the FLOPs per token (" + detail::number(flops_per_token) +
               ") are too high: an MoE model counts its active parameters, not all its experts; "
               "the attention "
               "term uses this run's sequence length";
      },
      [&] {
        return "the throughput (" + detail::number(tokens_per_s) +
               " tokens/s) is too high: tokens of all devices counted against devices = " +
               std::to_string(devices) +
               ", or a time read around asynchronous GPU work without synchronizing "
               "(torch.cuda.synchronize() "
               "before reading the clock)";
      });
}

/// Tensor-core activity: the fraction of time (0..1) the tensor pipes were active, as DCGM's
/// `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE` or Nsight Compute/Systems report it. Evidence beside MFU:
/// MFU in the same precision is roughly bounded by it (model FLOPs ≤ hardware FLOPs ≈ at most
/// peak × active fraction; DCGM defines 1.0 as the pipe issuing at its full rate), and a high
/// activity with a low MFU says the tensor cores are busy with work
/// the model count does not see (recomputation, padding) or run below their peak rate.
///
/// **Example**
/// ```cpp
/// mldiag::efficiency::tensor_core_activity tca(0.42);  // DCGM reported 42 %
/// ```
class tensor_core_activity {
 public:
  explicit tensor_core_activity(double active_fraction) : fraction_(active_fraction) {
    if (!std::isfinite(active_fraction) || active_fraction < 0.0 || active_fraction > 1.0)
      throw error(
          "tensor_core_activity: the active fraction must be in [0, 1] (DCGM and Nsight report a "
          "fraction; divide a percentage by 100), got " +
          detail::number(active_fraction));
  }
  [[nodiscard]] double fraction() const { return fraction_; }

 private:
  double fraction_;
};

/// What a throughput counts.
enum class throughput_unit : std::uint8_t { tokens_per_s, samples_per_s };

/// Throughput against the user's target (tokens/s or samples/s), both finite and positive.
/// `ratio()` is achieved / target: 0.8 means 20% short.
///
/// **Example**
/// ```cpp
/// mldiag::efficiency::throughput_vs_target t(95'000.0, 120'000.0,
///                                            mldiag::efficiency::throughput_unit::tokens_per_s);
/// bool ok = t.meets_target();  // false: t.ratio() == 0.79...
/// ```
class throughput_vs_target {
 public:
  throughput_vs_target(double achieved, double target, throughput_unit unit)
      : achieved_(achieved), target_(target), unit_(unit) {
    if (!std::isfinite(achieved) || !(achieved > 0.0))
      throw error(
          "throughput_vs_target: the achieved throughput must be finite and positive, got " +
          detail::number(achieved));
    if (!std::isfinite(target) || !(target > 0.0))
      throw error("throughput_vs_target: the target must be finite and positive, got " +
                  detail::number(target));
  }
  [[nodiscard]] double achieved() const { return achieved_; }
  [[nodiscard]] double target() const { return target_; }
  [[nodiscard]] throughput_unit unit() const { return unit_; }
  [[nodiscard]] double ratio() const { return achieved_ / target_; }
  [[nodiscard]] bool meets_target() const { return achieved_ >= target_; }

 private:
  double achieved_;
  double target_;
  throughput_unit unit_;
};

}  // namespace mldiag::efficiency
