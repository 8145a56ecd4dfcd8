"""The cost model's mechanics against independent figures: datasheet peaks (no prediction beats the speed of
light), the published 2.66 ms of a 4096^3 FP32 matmul on an H100 SXM (KernelBench level 1, problem 1: torch runs
FP32 matmuls without TF32), launch cost, fusion, and bands that name what was never validated."""

from __future__ import annotations

import math

import pytest
import torch

from warpforge.errors import UsageError
from warpforge.estimate.gpus import gpu_preset
from warpforge.estimate.kernels import COMPUTE, Kernel, kernels_of, regions_of
from warpforge.estimate.model import CostModel, precision
from warpforge.estimate.ops import WalkedOp
from warpforge.estimate.predict import estimate_kernels
from warpforge.estimate.step import EstimatedPeaks, step_peaks

N = 4096
MATMUL = WalkedOp("mm", 2.0 * N**3, 3.0 * N * N * 4, torch.float32, "", "", ((N, N), (N, N)))


def _sol(k: Kernel, peak_tflops: float, tbps: float) -> float:
    return max(k.flops / (peak_tflops * 1e12), k.bytes / (tbps * 1e12))


def test_presets_are_the_datasheets() -> None:
    h100 = gpu_preset("H100")
    assert (h100.name, h100.fp32_tflops, h100.hbm_tbps, h100.bf16_tflops) == ("h100-sxm", 67.0, 3.35, 989.4)
    assert gpu_preset("h100-pcie").hbm_tbps == 2.0 and gpu_preset("A100-80GB").tf32_tflops == 156.0
    assert gpu_preset("l40s").fp32_tflops == 91.6 and gpu_preset("b200").hbm_tbps == 8.0
    assert "datasheet" in h100.basis
    with pytest.raises(UsageError, match="h100-sxm, h100-pcie, a100-80gb, l40s, b200"):
        gpu_preset("H900")


def test_fp32_matmul_runs_without_tf32_as_published() -> None:
    # KernelBench's H100 SXM timing: 2.66 ms, 77% of the 67 TF FP32 peak; a TF32 roofline says 0.28 ms
    kernel = kernels_of([MATMUL])[0]
    model, h100 = CostModel.load(), gpu_preset("H100")
    assert precision(kernel) == "fp32" and precision(kernel, tf32_matmul=True) == "tf32"
    assert model.seconds(kernel, h100) == pytest.approx(2.66e-3, rel=0.1)
    assert model.seconds(kernel, h100, tf32_matmul=True) < 0.7e-3
    bf16 = Kernel("gemm", kernel.flops, kernel.bytes / 2, torch.bfloat16, "", ("mm",), kernel.gemm_mnk)
    assert precision(bf16) == "bf16" and model.seconds(bf16, h100) < model.seconds(kernel, h100, True)


@pytest.mark.parametrize("gpu", ["h100-sxm", "h100-pcie", "a100-80gb", "l40s", "b200"])
@pytest.mark.parametrize("scale", [1e3, 1e6, 1e9])
def test_no_prediction_beats_the_speed_of_light(gpu: str, scale: float) -> None:
    preset, model = gpu_preset(gpu), CostModel.load()
    peak = {"fp32": preset.fp32_tflops, "tf32": preset.tf32_tflops, "bf16": preset.bf16_tflops}
    n = int(scale ** (1 / 3)) + 1
    cases = [
        Kernel("pointwise", scale, 8 * scale, torch.float32, "", ("relu",)),
        Kernel("norm", 5 * scale, 8 * scale, torch.float32, "", ("_softmax",), rows=64),
        Kernel("gemm", 2.0 * n**3, 12.0 * n * n, torch.float32, "", ("mm",), (n, n, n)),
        Kernel(
            "conv", 2.0 * 9 * 64 * scale, 8 * scale, torch.float32, "", ("convolution",), (int(scale), 64, 64), window=9
        ),
        Kernel("fused", 3 * scale, 8 * scale, torch.bfloat16, "", ("gelu", "mul"), fused=True),
    ]
    for k in cases:
        # a memory-bound kernel whose bytes fit in L2 reads them there: its light speed is L2's, at most 5x DRAM
        # (an H100 SXM's L2 streams about 12 TB/s, 3.6x its 3.35 TB/s HBM; Ada's L2 about 5x its GDDR6)
        in_l2 = k.kind not in COMPUTE and k.bytes <= preset.l2_mb * 1e6
        bound = _sol(k, peak[precision(k)], preset.hbm_tbps * (5.0 if in_l2 else 1.0))
        assert model.seconds(k, preset) >= bound, k.kind


def test_a_tiny_kernel_costs_its_launch_and_time_grows_with_size() -> None:
    model, h100 = CostModel.load(), gpu_preset("H100")
    sizes = (1, 1e3, 1e6, 1e9)
    times = [model.seconds(Kernel("pointwise", n, 8.0 * n, torch.float32, "", ("relu",)), h100) for n in sizes]
    launch = model.params["launch_us"] * 1e-6
    assert launch <= times[0] <= launch + 10e-6  # 8 bytes: the launch and HBM's latency, nothing else
    assert times == sorted(times)
    assert times[-1] >= 8e9 / 3.35e12 and times[-1] > 50 * times[0]  # 8 GB streams at (under) 3.35 TB/s


def _conv_relu_add() -> list[WalkedOp]:
    x, out = (128, 64, 128, 128), (128, 128, 126, 126)
    numel = math.prod(out)
    conv = WalkedOp(
        "convolution",
        2.0 * numel * 64 * 9,
        4.0 * (math.prod(x) + numel),
        torch.float32,
        "conv",
        "conv::conv2d#0",
        (x, (128, 64, 3, 3), (128,)),
        (1, 1, 0, 0, 1, 1, False, 0, 0, 1),
        numel,
    )
    relu = WalkedOp("relu", numel, 8.0 * numel, torch.float32, "", "::~relu#0", (out,))
    add = WalkedOp("add", numel, 8.0 * numel + 512, torch.float32, "", "::~add#0", (out, (128, 1, 1)))
    return [conv, relu, add]


def test_fusible_regions_are_runs_between_convolutions_and_gemms() -> None:
    kernels = kernels_of(_conv_relu_add())
    assert [k.kind for k in kernels] == ["conv", "pointwise", "pointwise"]
    # cuDNN's implicit GEMM: M = N x H_out x W_out (a valid 3x3 over 128 leaves 126), N = C_out, K = C_in x 3 x 3
    assert kernels[0].gemm_mnk == (128 * 126 * 126, 128, 576) and kernels[0].window == 9
    regions = regions_of(kernels)
    assert [len(r.kernels) for r in regions] == [1, 2]
    one = regions[1].as_one()
    # the fused chain reads the convolution's output once and writes once: the largest op's bytes, not the sum
    assert one.fused and one.bytes == kernels[2].bytes and one.ops == ("relu", "add")
    e = estimate_kernels("t", kernels, gpu_preset("H100"))
    assert e.fused_us < e.eager_us and [r.kernels for r in e.regions] == [1, 2]
    assert e.regions[0].eager_us == e.regions[0].fused_us  # a convolution is its own kernel either way


def _depthwise(kernel: int) -> WalkedOp:
    # level 1's 82: [16, 64, 512, 512] through a 3x3 depthwise convolution (groups = channels), no padding
    x, h = (16, 64, 512, 512), 512 - kernel + 1
    out = 16 * 64 * h * h
    return WalkedOp(
        "convolution",
        2.0 * out * kernel * kernel,
        4.0 * (math.prod(x) + out),
        torch.float32,
        "conv",
        "conv::conv2d#0",
        (x, (64, 1, kernel, kernel)),
        (1, 1, 0, 0, 1, 1, False, 0, 0, 64),
        out,
    )


def test_a_depthwise_convolution_is_a_direct_one_on_fp32_cores() -> None:
    dw = kernels_of([_depthwise(3)])[0]
    # per group one output and one input channel: a GEMM N of 1 and K of 9, no tensor-core tile to fill
    assert dw.kind == "conv_grouped" and dw.gemm_mnk == (16 * 510 * 510, 1, 9) and precision(dw) == "fp32"
    model, h100 = CostModel.load(), gpu_preset("H100")
    # never faster than its FP32 FLOPs at the 67 TF datasheet peak or its bytes at 3.35 TB/s
    assert model.seconds(dw, h100) >= max(dw.flops / 67e12, dw.bytes / 3.35e12)
    # a 7x7 window re-reads each input more than a 3x3 one (from cache): slower per byte moved
    big = kernels_of([_depthwise(7)])[0]
    assert model.seconds(big, h100) / big.bytes > model.seconds(dw, h100) / dw.bytes
    # FP32 is what KernelBench's depthwise problems ran at: validated, not a precision never checked
    assert estimate_kernels("dw", [dw], h100).unvalidated == []


def test_bands_name_what_was_never_validated() -> None:
    h100 = gpu_preset("H100")
    fp32 = estimate_kernels("mm", kernels_of([MATMUL]), h100)
    assert fp32.unvalidated == [] and 0 < fp32.eager_band.error < 1
    assert fp32.eager_band.low_us < fp32.eager_us < fp32.eager_band.high_us
    assert "fitted on h100-sxm" in fp32.basis and "held out" in fp32.basis
    bf16 = WalkedOp("mm", MATMUL.flops, MATMUL.bytes / 2, torch.bfloat16, "", "", MATMUL.shapes)
    e = estimate_kernels("mm", kernels_of([bf16]), h100)
    # KernelBench's problems are all FP32: a BF16 GEMM's class was never checked against a measurement
    assert e.unvalidated == ["gemm[bf16]"] and e.eager_band.error == 1.0
    assert estimate_kernels("mm", kernels_of([MATMUL]), h100, tf32_matmul=True).unvalidated == ["gemm[tf32]"]
    # held out on the H100 PCIe; a B200 is its datasheet only
    assert estimate_kernels("mm", kernels_of([MATMUL]), gpu_preset("h100-pcie")).unvalidated == []
    assert estimate_kernels("mm", kernels_of([MATMUL]), gpu_preset("b200")).unvalidated == [
        "b200 (no measured timing of this GPU checked)"
    ]


def test_optimize_prices_with_the_model_where_a_preset_exists() -> None:
    peaks = step_peaks("H100")
    assert isinstance(peaks, EstimatedPeaks) and peaks.name == "h100-sxm"
    assert step_peaks("H200") is None  # no preset: optimize keeps its roofline
    gemm = peaks.sol_ms(MATMUL.flops, MATMUL.bytes, torch.float32)
    assert gemm == pytest.approx(2.66, rel=0.15)  # ms, priced as a GEMM by its intensity
    relu = peaks.sol_ms(1e9, 8e9, torch.float32)
    assert relu >= 8e9 / 3.35e12 * 1e3
