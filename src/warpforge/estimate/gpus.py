"""GPU presets for ``warpforge estimate``: datasheet peaks, never measurements.

Each preset carries the numbers the cost model reads (dense FP32, TF32 and BF16 tensor-core peaks, HBM bandwidth,
L2 size) and where they come from. Efficiencies are the cost model's business (estimate/model.py): a preset is
what the vendor prints, labelled ``datasheet``.

Example::

    >>> gpu_preset("H100").name, gpu_preset("h100-sxm").fp32_tflops
    ('h100-sxm', 67.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from warpforge.errors import UsageError


@dataclass(frozen=True)
class GpuPreset:
    name: str
    aliases: tuple[str, ...]
    fp32_tflops: float  # non-tensor FP32 (torch's matmul default: TF32 off)
    tf32_tflops: float  # dense TF32 tensor core (cuDNN convolutions: on by default)
    bf16_tflops: float  # dense FP16/BF16 tensor core, FP32 accumulate
    hbm_tbps: float
    l2_mb: float
    source: str  # the datasheet the numbers are read from

    @property
    def basis(self) -> str:
        return f"{self.name}: datasheet values ({self.source})"

    def peak_tflops(self, precision: str) -> float:
        """The peak for ``fp32`` | ``tf32`` | ``bf16`` (fp16 is bf16's rate)."""
        return {"fp32": self.fp32_tflops, "tf32": self.tf32_tflops, "bf16": self.bf16_tflops}[precision]


# Dense (not 2:4-sparse) figures; NVIDIA prints tensor-core peaks "with sparsity", halved here.
PRESETS: tuple[GpuPreset, ...] = (
    GpuPreset(
        "h100-sxm",
        ("h100", "h100-sxm5", "nvidia h100 80gb hbm3"),
        67.0,
        494.7,
        989.4,
        3.35,
        50.0,
        "NVIDIA H100 Tensor Core GPU datasheet, SXM column: FP32 67 TF, TF32 989 TF and BF16 1,979 TF with "
        "sparsity, 3.35 TB/s HBM3; 50 MB L2 from the Hopper architecture whitepaper",
    ),
    GpuPreset(
        "h100-pcie",
        ("h100 pcie", "nvidia h100 pcie"),
        51.2,
        378.0,
        756.0,
        2.0,
        50.0,
        "NVIDIA H100 Tensor Core GPU datasheet, PCIe column: FP32 51 TF, TF32 756 TF and BF16 1,513 TF with "
        "sparsity, 2.0 TB/s HBM2e; 50 MB L2",
    ),
    GpuPreset(
        "a100-80gb",
        ("a100", "a100-sxm4-80gb", "nvidia a100-sxm4-80gb"),
        19.5,
        156.0,
        312.0,
        2.039,
        40.0,
        "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column: FP32 19.5 TF, TF32 156 TF, BF16 312 TF "
        "dense, 2,039 GB/s HBM2e; 40 MB L2 from the Ampere architecture whitepaper",
    ),
    GpuPreset(
        "l40s",
        ("nvidia l40s",),
        91.6,
        183.0,
        362.05,
        0.864,
        96.0,
        "NVIDIA L40S datasheet: FP32 91.6 TF, TF32 366 TF and BF16 733 TF with sparsity, 864 GB/s GDDR6; "
        "96 MB L2 from the Ada Lovelace architecture whitepaper",
    ),
    GpuPreset(
        "b200",
        ("hgx-b200", "nvidia b200"),
        75.0,
        1100.0,
        2250.0,
        8.0,
        126.0,
        "NVIDIA Blackwell datasheet, HGX B200 column: FP32 75 TF, TF32 2.2 PF and BF16 4.5 PF with sparsity, "
        "8 TB/s HBM3e; 126 MB L2 (Blackwell architecture technical brief)",
    ),
)


def gpu_names() -> list[str]:
    return [p.name for p in PRESETS]


def gpu_preset(name: str) -> GpuPreset:
    """The preset named ``name`` (or one of its aliases, any case), else a usage error listing them."""
    key = name.strip().lower()
    for p in PRESETS:
        if key == p.name or key in p.aliases:
            return p
    raise UsageError(f"--gpu {name!r}: no preset; known: {', '.join(gpu_names())} (H100 = h100-sxm)")
