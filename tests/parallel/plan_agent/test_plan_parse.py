"""Plan answers parsed strictly: each malformed shape gets its outcome and a message that says what to fix."""

from __future__ import annotations

import json

import pytest

from warpforge.parallel.plan_agent.parse import extract_json, parse_plan_answer


def fenced(obj: object) -> str:
    return f"Some thoughts first.\n```json\n{json.dumps(obj)}\n```\nDone."


@pytest.mark.parametrize(
    ("content", "finish", "outcome", "says"),
    [
        (fenced({"plans": [{"plan": {"tp": 2, "zero": 1}, "rationale": "r"}]}), "stop", "accepted", ""),
        ('{"plans": [{"plan": {"pp": 2}, "rationale": "structured output"}]}', "stop", "accepted", ""),
        ("Use TP 2 and PP 4.", "stop", "no_code", "no ```json block"),
        (fenced({"plans": [{"plan": {"tpp": 2}, "rationale": "r"}]}), "stop", "parse_error", "plans.0.plan.tpp"),
        (fenced({"plans": [{"plan": {"tp": "two"}, "rationale": "r"}]}), "stop", "parse_error", "plans.0.plan.tp"),
        (fenced({"plans": [{"plan": {"zero": 5}, "rationale": "r"}]}), "stop", "parse_error", "zero"),
        (fenced({"plans": [{"plan": {"recompute": "some"}, "rationale": "r"}]}), "stop", "parse_error", "recompute"),
        (fenced({"plans": [{"plan": {"tp": 2}}]}), "stop", "parse_error", "rationale"),
        (fenced({"plans": [{"plan": {"tp": 2}, "rationale": ""}]}), "stop", "parse_error", "rationale"),
        (fenced({"plans": []}), "stop", "parse_error", "plans"),
        (fenced({"plan": {"tp": 2}}), "stop", "parse_error", "plans"),
        (fenced({"plans": [{"plan": {"tp": 2}, "rationale": "r", "score": 9}]}), "stop", "parse_error", "score"),
        (
            fenced({"plans": [{"plan": {"tp": t}, "rationale": "r"} for t in (1, 2, 4, 8, 1)]}),
            "stop",
            "parse_error",
            "at most 4",
        ),
        ('```json\n{"plans": [{"plan": {"tp": 2,}, "rationale": "r"}]}\n```', "stop", "parse_error", "line 1 column"),
        (fenced({"plans": [{"plan": {"tp": 2}, "rationale": "r"}]}), "length", "truncated", "cut off"),
    ],
)
def test_each_answer_shape_gets_its_outcome(content: str, finish: str, outcome: str, says: str) -> None:
    parsed = parse_plan_answer(content, finish_reason=finish, max_plans=4)
    assert parsed.outcome == outcome
    assert says in parsed.message
    assert (len(parsed.plans) > 0) == (outcome == "accepted")


def test_the_last_json_block_is_the_answer() -> None:
    content = (
        'First idea:\n```json\n{"plans": [{"plan": {"tp": 1}, "rationale": "a"}]}\n```\nBetter:\n'
        '```json\n{"plans": [{"plan": {"tp": 4}, "rationale": "b"}]}\n```'
    )
    parsed = parse_plan_answer(content, finish_reason="stop", max_plans=4)
    assert [p.plan for p in parsed.plans] == [{"tp": 4}]
    assert extract_json("```python\nprint(1)\n```") is None
