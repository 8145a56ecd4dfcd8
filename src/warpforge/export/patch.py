"""``--patch``: an ``apply_NS_kernels(model)`` helper that swaps Hugging Face transformers modules for the ops.

Matching is by structure, so the generated helper never imports transformers: an ``*RMSNorm`` module with a
``weight`` and an epsilon equal to the task's (1e-6), ``torch.nn.LayerNorm`` with the task's epsilon (1e-5)
and an affine weight and bias, and a gated MLP (``gate_proj``, ``up_proj``, ``down_proj``, SiLU ``act_fn``).
A module whose epsilon differs from the task's is left alone: the kernel hard-codes the task's epsilon.
Cross-entropy is not patched: transformers computes the loss inside ``loss_function`` with ignore_index and
mean reduction, which the task's per-row loss does not cover.

Example::

    >>> files, kinds = render_patch(env, "mykernels", ["rmsnorm", "swiglu"])   # doctest: +SKIP
    >>> kinds
    ['RMSNorm', 'SwiGLU MLP']
"""

from __future__ import annotations

from typing import Any

KINDS = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm", "swiglu": "SwiGLU MLP"}


def render_patch(env: Any, ns: str, ops: list[str],
                 trained: list[str] | None = None) -> tuple[dict[str, bytes], list[str]]:
    present = [op for op in ops if op in KINDS]
    kinds = [KINDS[op] for op in present]
    trained_present = [op for op in present if op in (trained or [])]
    ctx = {"ns": ns, "ops": present, "kinds": kinds, "trained": trained_present,
           "untrained": [op for op in present if op not in trained_present]}
    return ({"patch.py": env.get_template("patch.py.j2").render(**ctx).encode(),
             "tests/test_patch.py": env.get_template("test_patch.py.j2").render(**ctx).encode()}, kinds)
