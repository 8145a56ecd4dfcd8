"""Source facts for export (export/source.py): launcher rewrite, standalone check, signature, shape map."""

from __future__ import annotations

import ast

import pytest

from warpforge.export.source import SourceError, check_standalone, op_signature, shape_map, wrap_launches
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants


def test_every_template_launch_is_wrapped_and_nothing_else_changes() -> None:
    for task in ("rmsnorm", "softmax", "layernorm", "swiglu", "cross_entropy", "matmul"):
        for v in builtin_variants(task):
            out = wrap_launches(v.source)
            ast.parse(out)
            launches = v.source.count("_kernel[")
            assert out.count("wrap_triton(") == launches, (task, v.name)
            assert out.count("from torch.library import wrap_triton\n") == 1
            # every other line is kept verbatim (comments included)
            kept = [line for line in v.source.splitlines() if "_kernel[" not in line]
            assert all(line in out.splitlines() for line in kept), (task, v.name)


def test_split_vocab_wraps_both_kernels() -> None:
    v = next(v for v in builtin_variants("cross_entropy") if v.name == "split_vocab")
    out = wrap_launches(v.source)
    assert "wrap_triton(_ce_partial_kernel)[(M, splits)](" in out
    assert "wrap_triton(_ce_combine_kernel)[(triton.cdiv(M, _COMBINE_ROWS),)](" in out


def test_a_variant_without_kernels_is_refused() -> None:
    with pytest.raises(SourceError, match="no @triton.jit kernel"):
        wrap_launches("def launch(x):\n    return x\n")


@pytest.mark.parametrize(
    "line", ["import warpforge", "from warpforge.kernels import task", "import warpforge.evaluator as e"]
)
def test_sources_importing_warpforge_are_refused(line: str) -> None:
    with pytest.raises(SourceError, match="imports warpforge"):
        check_standalone(f"import torch\n{line}\n", "variant x")
    check_standalone("import torch\nimport triton.language as tl\n", "variant x")


def test_signature_and_shape_map_follow_the_task_definitions() -> None:
    # matmul: a [M, K] @ b [K, N] (kernels/tasks/matmul.py)
    mm = get_task("matmul")
    assert op_signature(mm).names == ("a", "b") and op_signature(mm).outputs == 1
    assert shape_map(mm) == {"M": (0, 0, 2), "K": (0, 1, 2), "N": (1, 1, 2)}
    # cross_entropy: logits [M, V], targets [M]; M is logits' first dim (lowest input index wins)
    assert shape_map(get_task("cross_entropy")) == {"M": (0, 0, 2), "V": (0, 1, 2)}
    assert op_signature(get_task("layernorm")).annotated() == "x: torch.Tensor, w: torch.Tensor, b: torch.Tensor"
