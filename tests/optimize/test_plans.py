"""A transformers config is read as the planner's model spec field by field (values from the configs)."""

from __future__ import annotations

from transformers import GPT2Config, MixtralConfig, Qwen3Config

from warpforge.optimize.plans import best_plans, model_spec


def test_qwen3_8b_fields() -> None:
    # Qwen3-8B's published config: 36 layers, hidden 4096, 32 heads of 128, 8 KV heads, FFN 12288
    spec = model_spec(
        Qwen3Config(
            hidden_size=4096,
            intermediate_size=12288,
            num_hidden_layers=36,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=151936,
        ),
        seq=4096,
    )
    assert (spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.ffn, spec.vocab, spec.seq) == (
        36,
        4096,
        32,
        8,
        12288,
        151936,
        4096,
    )
    assert spec.kv_channels is None and spec.head_dim == 128  # 32 x 128 = 4096: no separate head dim
    assert spec.activation == "swiglu" and not spec.is_moe


def test_a_head_dim_apart_from_hidden_and_a_gpt2() -> None:
    tiny = model_spec(
        Qwen3Config(
            hidden_size=64,
            num_attention_heads=2,
            head_dim=64,
            num_key_value_heads=1,
            num_hidden_layers=2,
            intermediate_size=128,
            vocab_size=512,
        ),
        seq=32,
    )
    assert tiny.kv_channels == 64 and tiny.q_width == 128
    gpt2 = model_spec(GPT2Config(n_embd=768, n_layer=12, n_head=12, vocab_size=50257), seq=1024)
    assert (gpt2.layers, gpt2.hidden, gpt2.heads, gpt2.activation, gpt2.tied_embeddings) == (12, 768, 12, "gelu", True)


def test_mixtral_is_a_mixture_of_experts() -> None:
    spec = model_spec(
        MixtralConfig(
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            num_local_experts=8,
            num_experts_per_tok=2,
            vocab_size=32000,
        ),
        seq=4096,
    )
    assert spec.is_moe and (spec.experts, spec.top_k) == (8, 2)


def test_best_plans_fit_and_rank_by_throughput() -> None:
    spec = model_spec(
        Qwen3Config(
            hidden_size=4096,
            intermediate_size=12288,
            num_hidden_layers=36,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=151936,
        ),
        seq=4096,
    )
    section = best_plans(spec, "dgx-h100", nodes=1)
    assert section.gpus == 8 and section.plans
    assert all(p.fits in ("yes", "uncertain") and p.peak_mem_gb <= p.hbm_gb for p in section.plans)
    speeds = [p.tokens_per_s for p in section.plans]
    assert speeds == sorted(speeds, reverse=True)
