"""``--patch``: an ``apply_NS_kernels(model)`` helper that swaps Hugging Face transformers modules for the ops.

Matching is by structure, so the generated helper never imports transformers: an ``*RMSNorm`` module with a
``weight`` and an epsilon equal to the task's (1e-6), ``torch.nn.LayerNorm`` with the task's epsilon (1e-5)
and an affine weight and bias, and a gated MLP (``gate_proj``, ``up_proj``, ``down_proj``, SiLU ``act_fn``).
A module whose epsilon differs from the task's is left alone: the kernel hard-codes the task's epsilon.
With the training tasks' ops: ``rotary`` replaces ``apply_rotary_pos_emb`` in the modeling module that defines
it beside ``rotate_half``; ``attention`` registers an AttentionInterface function (sdpa where a call is not
causal/unmasked); ``fused_linear_cross_entropy`` replaces a causal LM's forward when labels are given (lm_head
and loss fused, mean over labelled tokens as transformers' ForCausalLMLoss). ``cross_entropy`` (logits in) is not
patched: the fused op is the one that saves the logits' memory.

Example::

    >>> files, kinds = render_patch(env, "mykernels", ["rmsnorm", "swiglu"])   # doctest: +SKIP
    >>> kinds
    ['RMSNorm', 'SwiGLU MLP']
"""

from __future__ import annotations

from typing import Any

KINDS = {
    "rmsnorm": "RMSNorm",
    "layernorm": "LayerNorm",
    "swiglu": "SwiGLU MLP",
    "rotary": "rotary embedding (apply_rotary_pos_emb)",
    "attention": "attention (AttentionInterface)",
    "fused_linear_cross_entropy": "LM head + loss (fused linear cross-entropy)",
}


def render_patch(
    env: Any, ns: str, ops: list[str], trained: list[str] | None = None
) -> tuple[dict[str, bytes], list[str]]:
    present = [op for op in ops if op in KINDS]
    kinds = [KINDS[op] for op in present]
    trained_present = [op for op in present if op in (trained or [])]
    ctx = {
        "ns": ns,
        "ops": present,
        "kinds": kinds,
        "trained": trained_present,
        "untrained": [op for op in present if op not in trained_present],
    }
    return (
        {
            "patch.py": env.get_template("patch.py.j2").render(**ctx).encode(),
            "tests/test_patch.py": env.get_template("test_patch.py.j2").render(**ctx).encode(),
        },
        kinds,
    )
