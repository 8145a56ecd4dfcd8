"""``warpforge estimate`` on a target: walked on meta tensors at its real sizes (nothing allocated), the bytes of
each op counted (optimize's trace counted none on meta tensors), and a user's mistakes said in one line."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.optimize.estimate_target import walk_forward
from warpforge.optimize.target import load_target

# a 65536 x 32768 FP32 weight is 8 GiB: walked on a CPU with 24 GiB shared, only if nothing is allocated
B, IN, OUT = 4096, 32768, 65536
BIG = f"""import torch
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear({IN}, {OUT})
    def forward(self, x):
        return torch.relu(self.fc(x))
def get_inputs():
    return [torch.rand({B}, {IN})]
def get_init_inputs():
    return []
"""


def _file(tmp_path: Path, text: str, name: str = "big.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_model_too_big_to_allocate_is_walked_with_its_bytes(tmp_path: Path) -> None:
    ops = walk_forward(load_target(str(_file(tmp_path, BIG)), dtype=torch.float32))
    assert [o.op for o in ops] == ["addmm", "relu"]
    addmm, relu = ops
    assert addmm.flops == 2.0 * B * IN * OUT and addmm.module == "fc"
    assert addmm.bytes == 4.0 * (OUT + B * IN + IN * OUT + B * OUT)  # bias, input, weight, output
    assert relu.bytes == 4.0 * 2 * B * OUT
    assert addmm.shapes == ((OUT,), (B, IN), (IN, OUT))


def test_the_command_prints_eager_fused_and_bands_as_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["estimate", str(_file(tmp_path, BIG)), "--gpu", "h100-pcie", "--json"])
    assert result.exit_code == 0, result.output
    e = json.loads(result.output)
    assert e["gpu"] == "h100-pcie" and "datasheet" in e["gpu_basis"]
    assert e["eager_band"]["low_us"] < e["eager_us"] < e["eager_band"]["high_us"]
    assert [r["op_class"] for r in e["regions"]] == ["gemm", "pointwise"]
    assert e["fused_us"] <= e["eager_us"] and e["unvalidated"] == [] and "held out" in e["basis"]


def test_mistakes_are_one_line_and_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_gpu = runner.invoke(app, ["estimate", str(_file(tmp_path, BIG)), "--gpu", "H900"])
    assert bad_gpu.exit_code == 2 and "h100-sxm" in bad_gpu.output and "Traceback" not in bad_gpu.output
    nothing = runner.invoke(app, ["estimate", str(tmp_path / "nothing-here")])
    assert nothing.exit_code == 2 and "module:function" in nothing.output
    reads = _file(
        tmp_path, BIG.replace("return torch.relu(self.fc(x))", "return x * float(x.sum().item())"), "reads.py"
    )
    values = runner.invoke(app, ["estimate", str(reads)])
    assert values.exit_code == 2 and "meta tensors" in values.output and "Traceback" not in values.output


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(64, 128)
        self.norm = torch.nn.LayerNorm(128)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.norm(self.proj(x)))


def test_optimize_prices_a_training_step_with_the_model_never_under_the_roofline() -> None:
    from warpforge.estimate.step import step_peaks
    from warpforge.evaluator.gpus import peaks_for
    from warpforge.optimize.estimate_target import priced_trace
    from warpforge.optimize.regions import cut_regions

    roofline = peaks_for("H100")
    peaks = step_peaks("H100")
    assert roofline is not None and peaks is not None

    def step(p: object) -> list[float]:
        torch.manual_seed(0)
        model = _Block()
        trace = priced_trace(model, (torch.randn(32, 64),), lambda y: y.pow(2).mean(), p)  # type: ignore[arg-type]
        assert any(o.backward for o in trace.ops) and cut_regions(model, trace)
        return [o.seconds for o in trace.ops]

    model_s, sol_s = step(peaks), step(roofline)
    assert len(model_s) == len(sol_s)
    launch = peaks.model.params["launch_us"] * 1e-6  # type: ignore[union-attr]
    assert all(m >= max(s, launch) for m, s in zip(model_s, sol_s))
