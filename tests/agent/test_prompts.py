"""Prompts are built from evidence (task, GPU, parent with its measurements, bottleneck, one-line failures),
the contract's example is itself a valid variant, and the token budget cuts low-priority sections first,
recording what it cut."""

from __future__ import annotations

from agent_history import template_history

from warpforge.agent.prompting import build_prompt, example_variant, reask_message
from warpforge.evaluator.static.checks import check_source
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import parse_variant


def test_the_contract_example_is_a_valid_variant() -> None:
    source = example_variant()
    variant = parse_variant(source)
    assert variant.task == "double" and "BLOCK" in variant.space and variant.has_constraints
    assert check_source(source) is None


def test_prompt_carries_the_evidence() -> None:
    task = get_task("softmax")
    history = template_history("softmax")
    parent = history.variants[0]
    prompt = build_prompt(task, history, parent, budget_tokens=50_000, winners=["softmax on A100: looped 0.2 ms"])
    system, user = (m["content"] for m in prompt.messages)
    assert "def launch(x, **params)" in system and 'TASK = "double"' in system  # contract + complete example
    assert "torch.softmax(xf, dim=-1)" in user  # the reference source
    assert '{"M": 4096, "N": 4096}' in user and "float16" in user
    # softmax: 5 FLOP per element; x read and y written once, 4 bytes each in float32 (its first dtype).
    assert f"{5.0 * 4096 * 4096:.3g} FLOP" in user and f"{8.0 * 4096 * 4096:.3g} bytes" in user
    assert "NVIDIA H200" in user and "4.8 TB/s" in user and "132 SMs" in user
    assert parent.variant.source.strip() in user
    assert "0.1 ms" in user and "60% of speed of light" in user
    assert "memory-bound" in user and "Register spills: 64 bytes" in user and "168 registers" in user
    # One line per failure, never a dump: the second line of the message is not there.
    assert '- incorrect (mismatch) with {"num_warps": 32}: max abs error 0.5' in user
    assert "second line" not in user
    assert "softmax on A100: looped 0.2 ms" in user
    assert prompt.cut == ()


def test_budget_cuts_lowest_priority_first_and_records_it() -> None:
    task = get_task("softmax")
    history = template_history("softmax")
    full = build_prompt(task, history, history.variants[0], budget_tokens=50_000, winners=["w " * 50])
    tight = build_prompt(task, history, history.variants[0], budget_tokens=full.tokens - 10, winners=["w " * 50])
    assert tight.cut == ("Past winners (other GPUs, similar tasks)",)
    tiny = build_prompt(task, history, history.variants[0], budget_tokens=1000, winners=["w " * 50])
    assert tiny.cut[:2] == ("Past winners (other GPUs, similar tasks)", "Other variants in this campaign")
    assert "Task" not in tiny.cut and "torch.softmax(xf, dim=-1)" in tiny.messages[1]["content"]
    assert tiny.tokens < full.tokens


def test_first_prompt_without_parent_or_gpu() -> None:
    task = get_task("softmax")
    history = template_history("softmax", gpu=None)
    prompt = build_prompt(task, history, None)
    user = prompt.messages[1]["content"]
    assert "No GPU times yet" in user and "Write a first fast, correct variant" in user
    assert "Parent variant" not in user


def test_reask_states_the_error() -> None:
    text = reask_message("parse_error", "line 3: syntax error: invalid syntax")
    assert "parse_error" in text and "line 3: syntax error" in text and "```python" in text


def test_structured_models_are_asked_for_json() -> None:
    task = get_task("softmax")
    history = template_history("softmax")
    plain = build_prompt(task, history, None).messages[0]["content"]
    structured = build_prompt(task, history, None, structured=True).messages[0]["content"]
    assert "exactly one\n```python block" in plain and '"source"' not in plain
    assert 'A JSON object: "rationale"' in structured and '"source" (the complete\nfile)' in structured


STRICT_BREAKERS = [  # (a launch line that breaks one strict rule, what the prompt must name for it)
    ("import numpy as np", "No numpy"),
    ("from triton.runtime import driver", "`triton.X` only for X in"),
    ("y = torch.matmul(x, x)", "`torch.X` only for X in"),
    ("n = x.__class__", "starts with `_`"),
    ("f = getattr(x, 'add')", "`getattr()`"),
    ("v = x.item()", "`.item()`"),
    ("v = x.to('cpu')", '`.to("cpu")`'),
]


def test_the_system_prompt_states_every_strict_rule_a_candidate_can_break() -> None:
    task = get_task("softmax")
    system = build_prompt(task, template_history("softmax"), None, budget_tokens=50_000).messages[0]["content"]
    for line, told in STRICT_BREAKERS:
        source = (
            f"import torch\nimport triton\n{line}\n"
            if line.startswith(("import", "from"))
            else f"import torch\nimport triton\ndef launch(x):\n    {line}\n    return x\n"
        )
        finding = check_source(source)
        assert finding is not None, line  # the evaluator does reject it...
        assert f"[{finding.reason}]" in system and told in system, line  # ...and the prompt said so
    jit = "import triton\n@triton.jit\ndef k(x):\n    try:\n        pass\n    except Exception:\n        pass\n"
    finding = check_source(jit)
    assert finding is not None and f"[{finding.reason}]" in system and "try" in system
