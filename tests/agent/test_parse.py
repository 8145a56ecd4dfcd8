"""Every answer is untrusted: code only from the final content, the variant contract and the evaluator's static
checks applied, duplicates found up to comments and formatting, and each failure named from the closed set."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpforge.agent.client import split_reasoning
from warpforge.agent.parse import OUTCOMES, check_answer, extract_code, normalized_hash

ANSWERS = Path(__file__).parent / "answers"


def fenced(source: str, prose: str = "Rows in registers, one program per row.") -> str:
    return f"{prose}\n\n```python\n{source}\n```\n"


def answer(name: str) -> str:
    return fenced((ANSWERS / name).read_text())


def test_good_answer_is_accepted_with_its_rationale() -> None:
    parsed = check_answer(answer("softmax_good.py"), task="softmax", finish_reason="stop", seen=set())
    assert parsed.outcome == "accepted" and parsed.variant is not None
    assert parsed.variant.space == {"num_warps": [1, 4]} and parsed.variant.task == "softmax"
    assert parsed.rationale == "Rows in registers, one program per row."
    assert parsed.ast_hash == normalized_hash((ANSWERS / "softmax_good.py").read_text())


@pytest.mark.parametrize(
    ("content", "outcome", "needle"),
    [
        ("I would tile the rows and use online softmax.", "no_code", "```python"),
        (fenced("TASK = 'softmax'\nSPACE = {'B': [1]}\ndef launch(x:\n    return x"), "parse_error", "syntax error"),
        (fenced("TASK = 'rmsnorm'\nSPACE = {'B': [1]}\ndef launch(x, **p):\n    return x"), "parse_error", "rmsnorm"),
        (fenced("TASK = 'softmax'\nSPACE = {}\ndef launch(x, **p):\n    return x"), "parse_error", "SPACE is empty"),
        (fenced("TASK = 'softmax'\nSPACE = {'B': [1]}\n"), "parse_error", "launch"),
        (answer("softmax_hack_torch.py"), "rejected", "torch_compute_call"),
        (answer("softmax_hack_reference.py"), "rejected", "forbidden_import"),
    ],
)
def test_bad_answers_get_a_closed_outcome_and_a_fixable_message(content: str, outcome: str, needle: str) -> None:
    parsed = check_answer(content, task="softmax", finish_reason="stop", seen=set())
    assert parsed.outcome == outcome and outcome in OUTCOMES
    assert needle in parsed.message


def test_truncated_answer_never_runs_even_with_a_complete_fence() -> None:
    parsed = check_answer(answer("softmax_good.py"), task="softmax", finish_reason="length", seen=set())
    assert parsed.outcome == "truncated" and parsed.variant is None


def test_code_inside_reasoning_is_not_taken() -> None:
    raw = "<think>\n" + answer("softmax_good.py") + "</think>I cannot decide yet."
    content, reasoning = split_reasoning(raw)
    assert "def launch" in reasoning
    assert check_answer(content, task="softmax", finish_reason="stop", seen=set()).outcome == "no_code"


def test_duplicates_are_found_through_comments_docstrings_and_formatting() -> None:
    source = (ANSWERS / "softmax_good.py").read_text()
    docstring = '"""Softmax, one row per program, whole row in registers (an LLM-style rewrite)."""'
    reformatted = source.replace(docstring, "# a comment instead of a docstring").replace(
        'num_warps=params["num_warps"])', "num_warps=params['num_warps'],  # tuned\n)"
    )
    assert reformatted != source
    seen = {normalized_hash(source)}
    assert check_answer(fenced(reformatted), task="softmax", finish_reason="stop", seen=seen).outcome == "duplicate"
    changed = source.replace('"num_warps": [1, 4]', '"num_warps": [2, 8]')
    assert check_answer(fenced(changed), task="softmax", finish_reason="stop", seen=seen).outcome == "accepted"


def test_last_block_with_launch_wins_over_other_blocks() -> None:
    content = (
        "First a helper:\n```python\nBLOCK = 4\n```\nand the file:\n```python\nTASK='softmax'\n"
        "SPACE={'B': [1]}\ndef launch(x, **p):\n    return x\n```\n```bash\npip install nothing\n```"
    )
    code = extract_code(content)
    assert code is not None and code.startswith("TASK='softmax'")


PARENT = (ANSWERS / "softmax_good.py").read_text()
DIFF = """Fewer warps:
```diff
--- a/variant.py
+++ b/variant.py
@@ -8,3 +8,3 @@

-SPACE = {"num_warps": [1, 4]}
+SPACE = {"num_warps": [2, 8, 16]}

```
"""


def test_a_diff_answer_is_applied_to_the_parent() -> None:
    parsed = check_answer(DIFF, task="softmax", finish_reason="stop", seen=set(), parent_source=PARENT)
    assert parsed.outcome == "accepted" and parsed.variant is not None
    assert parsed.variant.space == {"num_warps": [2, 8, 16]}
    assert parsed.variant.source == PARENT.replace("[1, 4]", "[2, 8, 16]")


def test_a_diff_that_does_not_apply_is_patch_failed() -> None:
    stale = DIFF.replace('-SPACE = {"num_warps": [1, 4]}', '-SPACE = {"BLOCK": [64]}')
    parsed = check_answer(stale, task="softmax", finish_reason="stop", seen=set(), parent_source=PARENT)
    assert parsed.outcome == "patch_failed" and "hunk 1" in parsed.message
    orphan = check_answer(DIFF, task="softmax", finish_reason="stop", seen=set(), parent_source=None)
    assert orphan.outcome == "patch_failed"
