"""The ``--patch`` helper's rotary, attention and loss swaps, on a tiny random Llama (transformers, no download).

The rotary, attention and fused_linear_cross_entropy tasks live on another branch; here each op is a stub module
computing its contract in plain PyTorch (so autograd differentiates it) and counting its calls. What is tested is
the patch: which calls reach the ops, with what layout, and that three AdamW steps of the patched model give the
unpatched model's losses. The exported ops themselves are tested by their generated suites.
"""

from __future__ import annotations

import copy
import importlib
import sys

import pytest
import torch

from warpforge.export.package import _env
from warpforge.export.patch import render_patch

transformers = pytest.importorskip("transformers")

STUBS = {
    "rotary": """
import torch
CALLS = []
def rotary(x, cos, sin):  # x [B, H, S, D]; cos, sin [S, D]
    assert x.dim() == 4 and cos.shape == sin.shape == x.shape[2:], (x.shape, cos.shape)
    CALLS.append(tuple(x.shape))
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin
""",
    "attention": """
import torch
CALLS = []
def attention(q, k, v):  # causal, scale 1/sqrt(D), GQA: k, v have fewer heads
    CALLS.append((tuple(q.shape), tuple(k.shape)))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
""",
    "fused_linear_cross_entropy": """
import torch
CALLS = []
def fused_linear_cross_entropy(h, w, target):  # per-row loss, fp32, 0 on ignored rows
    CALLS.append((tuple(h.shape), tuple(w.shape)))
    logits = h.float() @ w.float().T
    return torch.nn.functional.cross_entropy(logits, target, ignore_index=-100, reduction="none")
""",
}
NS = "stubpatch"


@pytest.fixture(scope="module")
def stub_package(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("stubs")
    pkg = root / NS
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for op, source in STUBS.items():
        (pkg / f"{op}.py").write_text(source)
    files, kinds = render_patch(_env(), NS, sorted(STUBS), trained=sorted(STUBS))
    (pkg / "patch.py").write_bytes(files["patch.py"])
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(f"{NS}.patch"), kinds
    finally:
        sys.path.remove(str(root))


def _llama():  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        rms_norm_eps=1e-6,
        attn_implementation="sdpa",
    )
    return transformers.LlamaForCausalLM(config)


def _steps(model, steps: int = 3) -> list[float]:  # type: ignore[no-untyped-def]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in range(steps):
        ids = torch.randint(0, 96, (2, 7), generator=torch.Generator().manual_seed(step))
        labels = ids.clone()
        labels[0, :2] = -100  # ignored tokens, as padding would be
        loss = model(ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def test_rotary_attention_and_loss_reach_the_ops_and_train_alike(stub_package) -> None:  # type: ignore[no-untyped-def]
    patch, kinds = stub_package
    assert len(kinds) == 3
    original = _llama()
    patched = copy.deepcopy(original)
    # the original trains first: the rotary swap is process-wide for modeling_llama
    expected = _steps(original.train())
    replaced = getattr(patch, f"apply_{NS}_kernels")(patched)
    assert "" in replaced  # the causal LM itself (the root module): lm_head + loss
    assert any(r.endswith("modeling_llama.apply_rotary_pos_emb") for r in replaced), replaced
    assert any(r.startswith("attention:") for r in replaced), replaced
    try:
        got = _steps(patched.train())
    finally:  # the rotary swap is process-wide for modeling_llama: undo it for the other tests
        mod = sys.modules["transformers.models.llama.modeling_llama"]
        swapped = getattr(mod, "apply_rotary_pos_emb")  # noqa: B009
        setattr(mod, "apply_rotary_pos_emb", getattr(swapped, f"{NS}_original", swapped))  # noqa: B010
    torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), atol=1e-5, rtol=1e-5)
    calls = {op: importlib.import_module(f"{NS}.{op}").CALLS for op in STUBS}
    # 3 steps x 2 layers: q and k rotated per layer; attention per layer; one loss per step
    assert len(calls["rotary"]) == 3 * 2 * 2 and calls["rotary"][0] == (2, 4, 7, 8)
    assert len(calls["attention"]) == 3 * 2 and calls["attention"][0] == ((2, 4, 7, 8), (2, 2, 7, 8))
    assert calls["fused_linear_cross_entropy"] == [((14, 32), (96, 32))] * 3
    # without labels the model's own forward runs (logits), unchanged
    ids = torch.randint(0, 96, (1, 5), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        assert patched(ids).logits.shape == (1, 5, 96)
