"""Every answer is untrusted: extract the code, check it statically, dedupe it, name the outcome.

Code is taken from the final content only (``client.split_reasoning`` already removed any reasoning),
from the last fenced python block that defines ``launch`` (else the last python block; an unfenced
answer is accepted only when the whole of it parses as a variant). The variant contract is checked by
``warpforge.kernels.variant.parse_variant`` and the evaluator's static rules by
``warpforge.evaluator.static.checks.check_source`` (both called, never copied). Duplicates are found by the hash
of the normalized AST (comments, docstrings and formatting do not make a new variant).

The closed set of proposal outcomes (before evaluation; an accepted variant's outcome is then the
evaluator's verdicts): ``accepted``, ``no_code``, ``parse_error``, ``truncated``, ``duplicate``,
``patch_failed`` (a diff answer that does not apply to the parent), ``rejected``; a call that failed after
the client's retries is ``call_failed``.

Example::

    >>> check_answer("```python\\nTASK='double'\\nSPACE={'B': [1]}\\ndef launch(x, **p):\\n    return x\\n```",
    ...              task="double", finish_reason="stop", seen=set()).outcome
    'accepted'
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Set
from dataclasses import dataclass

from warpforge.errors import WarpforgeError
from warpforge.evaluator.static.checks import check_source
from warpforge.kernels.variant import Variant, VariantError, parse_variant

OUTCOMES = ("accepted", "no_code", "parse_error", "truncated", "duplicate", "patch_failed", "rejected", "call_failed")
# Outcomes worth one re-ask with the error: the model can fix them. A duplicate or a failed call cannot be
# fixed by telling the model what went wrong.
REASKABLE = frozenset({"no_code", "parse_error", "truncated", "rejected", "patch_failed"})

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


@dataclass(frozen=True)
class ParsedAnswer:
    outcome: str  # one of OUTCOMES
    message: str  # one line: what was wrong (sent back on the re-ask), "" when accepted
    variant: Variant | None = None
    ast_hash: str | None = None
    rationale: str = ""  # the prose outside the code block, shortened


def _structured(content: str) -> tuple[str, str] | None:
    """(rationale, source) of a structured-output answer: a JSON object with a string ``source``."""
    text = content.strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get("source"), str):
        return str(data.get("rationale", "")), data["source"]
    return None


def extract_code(content: str) -> str | None:
    """The variant source in an answer's final content, or None when it has no code."""
    structured = _structured(content)
    if structured is not None:
        return structured[1].strip() + "\n"
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(content)]
    python = [b for lang, b in blocks if lang in ("python", "py", "python3", "")]
    with_launch = [b for b in python if "def launch" in b]
    if with_launch:
        return with_launch[-1].strip() + "\n"
    if python:
        return python[-1].strip() + "\n"
    if "def launch" in content and "TASK" in content:
        try:
            ast.parse(content)
            return content.strip() + "\n"
        except SyntaxError:
            return None
    return None


class PatchError(WarpforgeError, ValueError):
    """A unified diff that does not apply to the parent; the message says which hunk."""


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def extract_patch(content: str) -> str | None:
    """The last ```diff/```patch block of an answer (a unified diff against the parent), or None."""
    blocks = [body for lang, body in _FENCE.findall(content) if lang.lower() in ("diff", "patch", "udiff")]
    return blocks[-1] if blocks else None


def apply_patch(source: str, diff: str) -> str:
    """Apply a unified diff to ``source``; each hunk is found by its context (line numbers only break ties)."""
    lines = source.splitlines()
    hunks: list[tuple[int, list[str]]] = []
    for line in diff.splitlines():
        m = _HUNK.match(line)
        if m:
            hunks.append((int(m.group(1)), []))
        elif hunks and not line.startswith(("---", "+++", "\\")):
            hunks[-1][1].append(line if line else " ")
    if not hunks:
        raise PatchError("the diff has no @@ hunks: answer with the whole file in one ```python block instead")
    offset = 0
    for n, (start, body) in enumerate(hunks, 1):
        old = [ln[1:] for ln in body if ln[:1] in (" ", "-")]
        new = [ln[1:] for ln in body if ln[:1] in (" ", "+")]
        at = [i for i in range(len(lines) - len(old) + 1) if lines[i : i + len(old)] == old]
        if not at:
            raise PatchError(
                f"hunk {n} (at line {start}) does not match the parent's source: answer with the "
                "whole file in one ```python block instead"
            )
        i = min(at, key=lambda i: abs(i - (start - 1 + offset)))
        lines[i : i + len(old)] = new
        offset += len(new) - len(old)
    return "\n".join(lines) + "\n"


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]


def normalized_hash(source: str) -> str:
    """sha256 of the AST without docstrings, comments, formatting or positions."""
    tree = ast.parse(source)
    _strip_docstrings(tree)
    return hashlib.sha256(ast.dump(tree, annotate_fields=False, include_attributes=False).encode()).hexdigest()


def _rationale(content: str) -> str:
    structured = _structured(content)
    if structured is not None:
        return " ".join(structured[0].split())[:500]
    prose = " ".join(_FENCE.sub(" ", content).split())
    return prose[:500]


def check_answer(
    content: str, *, task: str, finish_reason: str, seen: Set[str], name: str = "llm", parent_source: str | None = None
) -> ParsedAnswer:
    """Parse and statically check one answer; ``seen`` holds normalized hashes already proposed.

    Whole files are asked for; an answer that is a unified diff against ``parent_source`` is applied
    (``patch_failed`` when it does not apply).
    """
    rationale = _rationale(content)
    code = extract_code(content)
    patch = extract_patch(content) if code is None and finish_reason != "length" else None
    if patch is not None:
        if parent_source is None:
            return ParsedAnswer(
                "patch_failed",
                "a diff needs a parent: answer with the whole file in one ```python block",
                rationale=rationale,
            )
        try:
            code = apply_patch(parent_source, patch)
        except PatchError as exc:
            return ParsedAnswer("patch_failed", str(exc), rationale=rationale)
    if finish_reason == "length":
        # A cut-off answer may still hold a complete fence, but its code was written under a token limit
        # it did not fit: never run half a kernel.
        return ParsedAnswer(
            "truncated",
            "the answer was cut off at the token limit: answer with the complete file "
            "only, shorter (no explanation outside one ```python block)",
            rationale=rationale,
        )
    if code is None:
        return ParsedAnswer(
            "no_code",
            "no ```python block with the variant file was found: answer with the whole file in one ```python block",
            rationale=rationale,
        )
    try:
        variant = parse_variant(code, name=name).for_task(task)  # a ModelNew answer may name no TASK
    except VariantError as exc:
        return ParsedAnswer(
            "parse_error",
            str(exc).replace(f"{name}:", "line ", 1) if "syntax" in str(exc) else str(exc),
            rationale=rationale,
        )
    if variant.task != task:
        return ParsedAnswer("parse_error", f"TASK is {variant.task!r}; this task is {task!r}", rationale=rationale)
    if not variant.space:  # a campaign tunes: a ModelNew answer too takes its SPACE as forward's keywords
        return ParsedAnswer(
            "parse_error",
            "SPACE is empty: give at least one tunable with its candidate values (num_warps counts)",
            rationale=rationale,
        )
    finding = check_source(code)
    if finding is not None:
        return ParsedAnswer("rejected", f"{finding.reason}: {finding.message}", variant, rationale=rationale)
    digest = normalized_hash(code)
    if digest in seen:
        return ParsedAnswer(
            "duplicate",
            "the same code (up to comments and formatting) was already proposed",
            variant,
            digest,
            rationale,
        )
    return ParsedAnswer("accepted", "", variant, digest, rationale)
