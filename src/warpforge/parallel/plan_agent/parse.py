"""Plan answers are untrusted too: take the JSON out of the final content, check it strictly, name the outcome.

The model answers one JSON object, in a ```json block (or as the whole content, with structured output)::

    {"plans": [{"plan": {"tp": 2, "pp": 1, "micro_batch": 2, "recompute": "none", "zero": 2},
                "rationale": "one or two sentences: why this plan should be faster"}]}

Each ``plan`` holds ``PlanConfig`` fields only (unknown keys, wrong types and out-of-range values are a
``parse_error``: a misspelt ``tpp`` must not silently become ``tp=1``); ``dp`` may be omitted (it fills the
cluster); ``global_batch`` and ``precision`` are the search's. A call's outcome is one of ``parse.OUTCOMES``
(``no_code`` here means no JSON with plans); the outcome of each plan it proposed is one of
``PLAN_OUTCOMES``, decided against the simulator by ``parallel/plan_agent/agent.py``:

- ``ranked``: valid, simulated and fits in memory (its rank among the search's fitting plans is stored);
- ``does_not_fit``: valid but over the usable HBM (the message says by how much, and what takes the memory);
- ``invalid``: the simulator cannot run it (divisibility, GPU count, batch): the message says what to change;
- ``duplicate``: the same plan (after defaults are filled) was already proposed in this run.

Example::

    >>> parse_plan_answer('```json\\n{"plans": [{"plan": {"tp": 2}, "rationale": "halve weights"}]}\\n```',
    ...                   finish_reason="stop", max_plans=4).outcome
    'accepted'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from warpforge.parallel.specs import PlanConfig, one_line

PLAN_OUTCOMES = ("ranked", "does_not_fit", "invalid", "duplicate")

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)

# Structured output (opt-in per model): the same object, described for the server. Not "strict": OpenAI's
# strict mode needs every property required, and a plan names only the fields it changes.
PLAN_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "parallel_plans",
        "strict": False,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["plans"],
            "properties": {
                "plans": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["plan", "rationale"],
                        "properties": {"plan": {"type": "object"}, "rationale": {"type": "string"}},
                    },
                }
            },
        },
    },
}


class ProposedPlan(BaseModel):
    """One proposed plan: ``PlanConfig`` fields as the model wrote them, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plan: dict[str, Any]
    rationale: str = Field(min_length=1)

    @field_validator("plan")
    @classmethod
    def _plan_fields(cls, v: dict[str, Any]) -> dict[str, Any]:
        PlanConfig.model_validate(v)  # field names, types and ranges; cross-field validity is the simulator's
        return v


class PlanAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    plans: list[ProposedPlan] = Field(min_length=1)


@dataclass(frozen=True)
class ParsedPlans:
    outcome: str  # parse.OUTCOMES: accepted | no_code | parse_error | truncated
    message: str  # one line, sent back on the re-ask; "" when accepted
    plans: tuple[ProposedPlan, ...] = ()


def extract_json(content: str) -> str | None:
    """The JSON text of an answer: the last ```json fence (or an unlabelled fence holding an object), else the
    whole content when it is an object (structured output); None when there is none."""
    blocks = [(lang.lower(), body.strip()) for lang, body in _FENCE.findall(content)]
    fenced = [b for lang, b in blocks if lang == "json" or (lang == "" and b.startswith("{"))]
    if fenced:
        return fenced[-1]
    text = content.strip()
    return text if text.startswith("{") else None


def parse_plan_answer(content: str, *, finish_reason: str, max_plans: int) -> ParsedPlans:
    """Parse one answer strictly; ``accepted`` means well-formed, not yet valid for the simulator."""
    if finish_reason == "length":
        return ParsedPlans(
            "truncated",
            "the answer was cut off at the token limit: answer with the JSON object "
            "only, shorter rationales, no prose outside the ```json block",
        )
    text = extract_json(content)
    if text is None:
        return ParsedPlans(
            "no_code",
            'no ```json block with {"plans": [...]} was found: answer with one ```json '
            "block holding the object described above",
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return ParsedPlans(
            "parse_error",
            f"the JSON does not parse (line {exc.lineno} column {exc.colno}: "
            f"{exc.msg}): answer with valid JSON, no comments or trailing commas",
        )
    try:
        answer = PlanAnswer.model_validate(data)
    except ValidationError as exc:
        return ParsedPlans("parse_error", f"the JSON does not match the format: {_plan_errors(exc)}")
    if len(answer.plans) > max_plans:
        return ParsedPlans("parse_error", f"{len(answer.plans)} plans: propose at most {max_plans} per answer")
    return ParsedPlans("accepted", "", tuple(answer.plans))


def _plan_errors(exc: ValidationError) -> str:
    """One line; an error inside a plan names the PlanConfig field (``plans.0.plan: tpp: Extra inputs ...``)."""
    parts = []
    for e in exc.errors()[:3]:
        loc = ".".join(str(x) for x in e["loc"])
        cause = e.get("ctx", {}).get("error")
        msg = one_line(cause) if isinstance(cause, ValidationError) else str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
