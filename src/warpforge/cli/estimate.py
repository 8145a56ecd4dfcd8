"""``warpforge estimate TARGET``: a model's GPU forward time predicted on a CPU, with the error it rests on.

TARGET is what ``warpforge optimize`` takes (a KernelBench-format ``.py`` file, a transformers config folder,
``module:function``); its forward is walked on meta tensors of its real sizes (nothing allocated) and priced
per kernel by the fitted cost model (estimate/model.py) on a GPU preset's datasheet figures. Exit codes: 0 an
estimate was printed; 2 usage (a TARGET that is none of the three, an unknown --gpu or --dtype, a forward
that cannot run on meta tensors).

Example::

    warpforge estimate ../shared/kernelbench/level2/1_Conv2D_ReLU_BiasAdd.py --gpu h100-pcie
"""

from __future__ import annotations

import sys

import typer
from rich.markup import escape
from rich.table import Table

from warpforge.inert import InertConsole

out = InertConsole()
err = InertConsole(stderr=True)


def _us(v: float) -> str:
    return f"{v / 1e3:,.2f} ms" if v >= 1e3 else f"{v:,.1f} us"


def estimate_command(
    target: str = typer.Argument(
        ...,
        metavar="TARGET",
        help="a KernelBench-format .py file, a transformers "
        "config folder, or module:function returning (model, inputs)",
    ),
    gpu: str = typer.Option(
        "H100", "--gpu", help="a GPU preset: h100-sxm (H100), h100-pcie, a100-80gb, l40s, b200 (datasheet figures)"
    ),
    dtype: str = typer.Option(
        "auto",
        "--dtype",
        help="the forward's dtype: float32 | bfloat16 | float16; auto: "
        "float32 for a .py file or function, bfloat16 for a transformers config",
    ),
    tf32: bool = typer.Option(
        False,
        "--tf32/--no-tf32",
        help="FP32 matmuls on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32; off by default in torch)",
    ),
    batch: int = typer.Option(2, "--batch", min=1, help="sequences (transformers targets)"),
    seq: int = typer.Option(64, "--seq", min=1, help="tokens per sequence (transformers targets)"),
    json_out: bool = typer.Option(False, "--json", help="print the estimate as one JSON document"),
) -> None:
    """Predict a model's GPU forward time (eager and fused) on a CPU, with bands from held-out validation."""
    from warpforge.estimate.gpus import gpu_preset
    from warpforge.kernels.taskdef import parse_dtype
    from warpforge.optimize.estimate_target import estimate_target

    gpu_preset(gpu)  # a usage error before the walk
    torch_dtype = None if dtype == "auto" else parse_dtype(dtype)
    if not json_out:
        err.print(f"[bold]estimate[/bold]: walking {escape(target)} on meta tensors", highlight=False)
    e = estimate_target(target, gpu=gpu, tf32_matmul=tf32, dtype=torch_dtype, batch=batch, seq=seq)
    if json_out:
        sys.stdout.write(e.model_dump_json(indent=2) + "\n")
        return
    table = Table(title=escape(f"{e.target.rsplit('/', 1)[-1]} on {e.gpu} (predicted)"))
    for col, just in (("region", "left"), ("class", "left"), ("ops", "left"), ("eager", "right"), ("fused", "right")):
        table.add_column(col, overflow="fold", justify=just)  # type: ignore[arg-type]
    for r in sorted(e.regions, key=lambda r: -r.eager_us)[:20]:
        ops = ", ".join(r.ops[:4]) + (f" +{len(r.ops) - 4}" if len(r.ops) > 4 else "")
        table.add_row(escape(r.module), r.op_class, escape(ops), _us(r.eager_us), _us(r.fused_us))
    if len(e.regions) > 20:
        table.caption = f"{len(e.regions) - 20} smaller regions not shown (--json has all)"
    out.print(table)
    for name, value, band in (("eager", e.eager_us, e.eager_band), ("fused", e.fused_us, e.fused_band)):
        out.print(
            f"{name}_us {value:,.1f}  (band {band.low_us:,.0f}-{band.high_us:,.0f}, held-out error {band.error:.0%})",
            highlight=False,
        )
    if e.unvalidated:
        out.print(f"not validated (band: a factor 2): {', '.join(e.unvalidated)}", highlight=False, markup=False)
    out.print(f"basis: {e.basis}", highlight=False, markup=False, soft_wrap=True)
    out.print(f"GPU: {e.gpu_basis}", highlight=False, markup=False, soft_wrap=True)
