"""A seeded mutation fuzzer over the trusted side's reading of candidate text, before any child runs.

Sources: every template (src/warpforge/kernels/templates/**) and every variant the adversarial manifest names.
Each mutant is one or more AST-level mutations (a literal swapped for bytes, complex, a set, a nested dict, a
huge int, inf or NaN; a statement deleted, duplicated or swapped; a SPACE value changed; a name renamed) or
byte-level ones (odd unicode inserted, bytes flipped, a slice cut or repeated, truncation, a coding cookie),
then run through what the trusted process does with candidate text before a child exists:

    decode (strict UTF-8) -> parse_variant -> the grammar (check_source, strict) -> check_space ->
    check_params / first_config on fuzzed --params JSON -> static_stage(Job) -> the child requests' JSON ->
    EvalResult's stored JSON and printed summary

``constraints`` is candidate code: it runs only in a child, never here. Allowed outcomes are a verdict (an
EvalResult, a StaticFinding) or a one-line refusal (a ``UsageError`` such as VariantError, printable as
UTF-8); anything else (an uncaught exception, a multi-line or unprintable refusal) is a failure, reported with
the seed and the mutant's index. Mutant ``i`` of seed ``s`` depends on nothing else, so one is replayed alone:

    WARPFORGE_FUZZ_SEED=s python tests/evaluator/fuzz_variants.py --index i     # prints the mutant and outcome
    python tests/evaluator/fuzz_variants.py --count 10000                        # a full run, with its time
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MANIFEST_DIR = REPO / "tests" / "evaluator" / "adversarial"
SEED_ENV = "WARPFORGE_FUZZ_SEED"
DEFAULT_SEED = 35_0001

ODD_TEXT = [
    "\u202e",
    "\u200b",
    "\ufeff",
    "\u2028",
    "\x00",
    "\x0c",
    "\x85",
    "\u0301",
    "\uff21",
    "\U0001f600",
    "\\ud800",
    "\\x00",
    "\r",
    "\t",
    "\\",
    "'",
    '"',
    '"""',
    "#",
    "\n",
    "# coding: utf-7\n",
    "\\N{BOM}",
]
NAMES = [
    "TASK",
    "SPACE",
    "launch",
    "constraints",
    "launch_forward",
    "launch_backward",
    "ModelNew",
    "tl",
    "torch",
    "triton",
    "x",
    "_",
    "\ufb01",
    "\u210c",
    "__import__",
    "num_warps",
    "BLOCK",
    "self",
    "print",
    "eval",
]


def weird_literal(rng: random.Random) -> str:
    """Source text of a value a SPACE (or any literal) should never carry into the trusted side untyped."""
    choices = [
        "b'ab'",
        "b''",
        "1j",
        "-2.5j",
        "{1, 2}",
        "set()",
        "{'a': {'b': [1, {2: 3}]}}",
        "{(1, 2): 3}",
        "[[1], [2]]",
        "(1, (2, 3))",
        "10 ** 400",
        "2 ** 64",
        str(2**200),
        "9" * 5000,
        "1e999",
        "-1e999",
        "float('nan')",
        "float('inf')",
        "...",
        "None",
        "True",
        "-True",
        "'\\ud800'",
        "'\\x00'",
        "'a' * 10",
        "'" + "x" * 300 + "'",
        "[]",
        "()",
        "{}",
        "lambda: 0",
        "__import__('os')",
        "print",
        "-'a'",
        "+None",
        "not 1",
        "0x7fffffffffffffff",
        "-0x8000000000000000",
        "0x8000000000000000",
        "1_000",
        "0.0",
        "-0.0",
        "1e-320",
        "'\\N{SNOWMAN}'",
        "{[1]: 2}",
        "{{}: 1}",
    ]
    return rng.choice(choices)


def _parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):  # "9" * 5000: past the int-digits limit, kept as a text mutation
        return None


def _space_node(tree: ast.Module) -> ast.Dict | None:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["SPACE"]
            and isinstance(node.value, ast.Dict)
        ):
            return node.value
    return None


def _bodies(tree: ast.AST) -> list[list[ast.stmt]]:
    return [
        node.body
        for node in ast.walk(tree)
        if isinstance(getattr(node, "body", None), list) and node.body and isinstance(node.body[0], ast.stmt)
    ]


def mutate_ast(source: str, rng: random.Random) -> str | None:
    """One AST mutation, unparsed; None when the source does not parse (then a byte mutation is used)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the mutant generator's own limits
        return None
    kind = rng.choice(
        [
            "literal",
            "literal",
            "space_value",
            "space_value",
            "space_shape",
            "delete",
            "duplicate",
            "swap",
            "rename",
            "rename",
        ]
    )
    if kind == "literal":
        constants = [n for n in ast.walk(tree) if isinstance(n, ast.Constant)]
        new = _parse(weird_literal(rng))
        if constants and new is not None:
            target = rng.choice(constants)
            for parent in ast.walk(tree):
                for name, value in ast.iter_fields(parent):
                    if value is target:
                        setattr(parent, name, new)
                    elif isinstance(value, list) and target in value:
                        value[value.index(target)] = new
    elif kind in ("space_value", "space_shape"):
        space = _space_node(tree)
        if space is None:
            return None
        if kind == "space_value" and space.values:
            lists = [v for v in space.values if isinstance(v, (ast.List, ast.Tuple)) and v.elts]
            new = _parse(weird_literal(rng))
            if lists and new is not None:
                elts = rng.choice(lists).elts
                elts[rng.randrange(len(elts))] = new
        else:
            move = rng.choice(["dup_key", "non_str_key", "non_list", "empty", "new_key", "unpack"])
            if move == "dup_key" and space.keys:
                i = rng.randrange(len(space.keys))
                space.keys.append(space.keys[i])
                space.values.append(space.values[i])
            elif move == "non_str_key" and space.keys:
                space.keys[rng.randrange(len(space.keys))] = _parse(rng.choice(["1", "b'k'", "None", "(1, 2)"]))
            elif move == "non_list" and space.values:
                bad = _parse(rng.choice(["4", "'abc'", "{1: 2}", "range(3)"]))
                space.values[rng.randrange(len(space.values))] = bad
            elif move == "empty" and space.values:
                space.values[rng.randrange(len(space.values))] = ast.List(elts=[], ctx=ast.Load())
            elif move == "new_key":
                space.keys.append(ast.Constant(rng.choice(["a b", "", "é", "X", "__class__", "num_warps"])))
                space.values.append(_parse(f"[{weird_literal(rng)}]") or ast.List(elts=[], ctx=ast.Load()))
            elif move == "unpack":
                space.keys.append(None)  # type: ignore[arg-type]  # ** unpacking: what the AST allows
                space.values.append(_parse("{'Z': [1]}") or ast.Dict(keys=[], values=[]))
    elif kind in ("delete", "duplicate", "swap"):
        bodies = _bodies(tree)
        body = rng.choice(bodies) if bodies else tree.body
        if not body:
            return None
        i = rng.randrange(len(body))
        if kind == "delete":
            del body[i]
            if not body:
                body.append(ast.Pass())
        elif kind == "duplicate":
            body.insert(i, body[i])
        else:
            j = rng.randrange(len(body))
            body[i], body[j] = body[j], body[i]
    else:
        names = [n for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.FunctionDef, ast.arg, ast.keyword))]
        if not names:
            return None
        node = rng.choice(names)
        new_name = rng.choice(NAMES)
        if isinstance(node, ast.Name):
            node.id = new_name
        elif isinstance(node, ast.FunctionDef):
            node.name = new_name
        elif isinstance(node, ast.arg):
            node.arg = new_name
        else:
            node.arg = new_name
    try:
        return ast.unparse(ast.fix_missing_locations(tree))
    except (ValueError, AttributeError, TypeError, RecursionError):  # e.g. an int past the digits limit
        return None


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One byte-level mutation of the UTF-8 text (the result may be invalid UTF-8 on purpose)."""
    kind = rng.choice(
        ["insert_text", "insert_text", "flip", "cut", "repeat", "truncate", "cookie", "huge_int", "space_text"]
    )
    n = len(data)
    at = rng.randrange(n + 1) if n else 0
    if kind == "insert_text":
        return data[:at] + rng.choice(ODD_TEXT).encode("utf-8", "surrogatepass") + data[at:]
    if kind == "flip" and n:
        i = rng.randrange(n)
        return data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
    if kind == "cut" and n:
        return data[:at] + data[min(n, at + rng.randrange(1, 200)) :]
    if kind == "repeat" and n:
        piece = data[at : at + rng.randrange(1, 400)]
        return data[:at] + piece * rng.randrange(2, 50) + data[at:]
    if kind == "truncate":
        return data[:at]
    if kind == "cookie":
        return (
            rng.choice(
                [
                    b"# -*- coding: latin-1 -*-\n",
                    b"# coding: utf-7\n",
                    b"\xef\xbb\xbf",
                    b"#!x\n# vim: set fileencoding=cp1252 :\n",
                ]
            )
            + data
        )
    if kind == "huge_int":
        digits = rng.choice([19, 20, 400, 4301, 5000])
        return data.replace(b"[", b"[" + b"9" * digits + b", ", 1)
    if kind == "space_text":
        return data.replace(
            b"SPACE = {", b"SPACE = {" + weird_literal(rng).encode("utf-8", "surrogatepass") + b": [1], ", 1
        )
    return data


def fuzz_params(rng: random.Random, space: dict[str, list[Any]]) -> Any:
    """A --params value as json.loads could hand it over (any JSON, some of it near SPACE)."""
    pool: list[Any] = [
        1,
        -1,
        0,
        2**70,
        1.5,
        float("nan"),
        float("inf"),
        True,
        None,
        "x",
        "\ud800",
        [1],
        {"a": 1},
        [],
        {},
        "1" * 300,
    ]
    names = list(space) or ["BLOCK"]
    kind = rng.randrange(5)
    if kind == 0:
        return rng.choice([[], "x", 1, None, [{"a": 1}]])  # not an object at all
    given: dict[str, Any] = {}
    for _ in range(rng.randrange(1, 4)):
        name = rng.choice(names + ["nope", ""])
        values = space.get(name) or pool
        given[name] = rng.choice(values) if kind >= 3 else rng.choice(pool)
    return json.loads(json.dumps(given))  # what --params gives: JSON's own values


@dataclass(frozen=True)
class Source:
    name: str  # for reports
    text: str
    task: str  # a built-in task name or a task file path


@lru_cache(maxsize=1)
def sources() -> tuple[Source, ...]:
    """Every template and every variant file the adversarial manifest names, with the task each runs against."""
    from warpforge.kernels.variant import TEMPLATES_DIR

    found = [
        Source(f"template:{p.parent.name}/{p.stem}", p.read_text(encoding="utf-8"), p.parent.name)
        for p in sorted(TEMPLATES_DIR.glob("*/*.py"))
        if not p.stem.startswith("_")
    ]
    seen = {s.name for s in found}
    for entry in json.loads((MANIFEST_DIR / "manifest.json").read_text())["fixtures"]:
        variant, task = entry["variant"], entry["task"]
        task = str(MANIFEST_DIR / task) if task.endswith(".py") else task
        if variant.startswith("template:"):
            continue  # a template: fuzzed above
        if variant in seen:
            continue
        seen.add(variant)
        path = MANIFEST_DIR / variant
        found.append(Source(f"fixture:{variant}", path.read_bytes().decode("utf-8", "surrogateescape"), task))
    return tuple(found)


@lru_cache(maxsize=None)
def _task(name: str) -> Any:
    from warpforge.kernels.task import get_task, load_task_file

    return load_task_file(Path(name)) if name.endswith(".py") else get_task(name)


@dataclass
class Outcome:
    index: int
    source: str
    outcome: str  # "verdict: <verdict>: <reason>" | "refused: <reason>" | "failure"
    detail: str = ""
    mutant: bytes = b""


def make_mutant(seed: int, index: int) -> tuple[Source, bytes]:
    """Mutant ``index`` of ``seed``: its source and bytes (deterministic, independent of every other index)."""
    rng = random.Random(f"{seed}:{index}")
    src = rng.choice(sources())
    text = src.text
    data = text.encode("utf-8", "surrogateescape")
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if rng.random() < 0.6:
            mutated = mutate_ast(data.decode("utf-8", "surrogateescape"), rng)
            if mutated is not None:
                data = mutated.encode("utf-8", "surrogatepass")
                continue
        data = mutate_bytes(data, rng)
    return src, data


def _one_line(message: str) -> str:
    if "\n" in message.strip() or "\r" in message.strip():
        raise AssertionError(f"a refusal of more than one line: {message[:300]!r}")
    message.encode("utf-8")  # printable: a lone surrogate would crash the CLI's print
    return message


def trusted_pipeline(src: Source, data: bytes, rng: random.Random) -> str:
    """Run one mutant through the trusted side's pre-child pipeline; returns its outcome, raises on a failure."""
    from warpforge.errors import UsageError
    from warpforge.evaluator.result import EvalResult, Verdict
    from warpforge.evaluator.run.stages import static_stage
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.evaluator.static.checks import check_source
    from warpforge.kernels.variant import VariantError, check_params, check_space, first_config, parse_variant

    try:
        text = data.decode("utf-8")  # load_variant: strict UTF-8
    except UnicodeDecodeError:
        return "refused: source_encoding"
    finding = check_source(text)  # the grammar sees every text, whatever parse_variant says of it
    if finding is not None:
        _one_line(finding.message)
    try:
        variant = parse_variant(text, name="mutant").for_task(_task(src.task).name)
    except VariantError as exc:
        _one_line(str(exc))
        return f"refused: {exc.reason or 'variant_error'}"
    try:
        check_space(variant)
    except VariantError as exc:
        _one_line(str(exc))
        return "refused: check_space"
    given = fuzz_params(rng, variant.space)
    chosen = first_config(variant, {}) or {}
    if isinstance(given, dict):  # else the CLI's own check refuses it (cli/root.py eval_cmd)
        try:
            check_params(variant, given)
            chosen = first_config(variant, given) or chosen
        except UsageError as exc:
            _one_line(str(exc))
    job = Job(_task(src.task), variant, chosen)
    result = static_stage(job)
    # What a child would be sent (supervisor.ChildPool.run: json.dumps of the request), never sent here.
    json.dumps({"mode": "space", "space": variant.space, "shapes": job.shapes})
    json.dumps({"mode": "check", "params": job.params})
    if result is None:
        result = job.result(Verdict.OK, device="fuzz: nothing ran (the static stages passed)")
    assert isinstance(result, EvalResult)
    stored = json.dumps(result.model_dump(mode="json"))  # db/store.py keeps the whole result as JSON
    EvalResult.model_validate_json(stored)
    _one_line(result.summary())
    _one_line(result.message)
    return f"verdict: {result.summary()}"


def run_one(seed: int, index: int) -> Outcome:
    with warnings.catch_warnings():  # "invalid decimal literal" and the like: the parser's, about mutants
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)  # "invalid escape sequence" in a mutant
        src, data = make_mutant(seed, index)
        rng = random.Random(f"{seed}:{index}:params")
        try:
            return Outcome(index, src.name, trusted_pipeline(src, data, rng))
        except Exception:  # noqa: BLE001 - the fuzzer's whole point: anything escaping is a failure to report
            return Outcome(index, src.name, "failure", traceback.format_exc(limit=6), data)


@dataclass
class Report:
    seed: int
    count: int
    seconds: float
    outcomes: dict[str, int] = field(default_factory=dict)
    failures: list[Outcome] = field(default_factory=list)

    def describe(self) -> str:
        head = (
            f"seed {self.seed}: {self.count} mutants in {self.seconds:.1f} s, {len(self.failures)} failures; "
            f"replay one with {SEED_ENV}={self.seed} python tests/evaluator/fuzz_variants.py --index I"
        )
        top = sorted(self.outcomes.items(), key=lambda kv: -kv[1])[:12]
        lines = [head] + [f"  {n:6d}  {what}" for what, n in top]
        for f in self.failures[:5]:
            lines.append(f"  FAILURE mutant {f.index} ({f.source}):\n{f.detail}")
        return "\n".join(lines)


def seed_from_env() -> int:
    value = os.environ.get(SEED_ENV, "")
    return int(value) if value.strip() else DEFAULT_SEED


def fuzz(
    count: int, seed: int | None = None, start: int = 0, on_outcome: Callable[[Outcome], None] | None = None
) -> Report:
    seed = seed_from_env() if seed is None else seed
    began = time.monotonic()
    report = Report(seed, count, 0.0)
    for index in range(start, start + count):
        outcome = run_one(seed, index)
        key = outcome.outcome if outcome.outcome == "failure" else outcome.outcome.split(" (")[0]
        report.outcomes[key] = report.outcomes.get(key, 0) + 1
        if outcome.outcome == "failure":
            report.failures.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
    report.seconds = time.monotonic() - began
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--index", type=int, help="replay one mutant: print it and its outcome")
    parser.add_argument("--seed", type=int, default=None, help=f"default: ${SEED_ENV}, else {DEFAULT_SEED}")
    args = parser.parse_args(argv)
    seed = seed_from_env() if args.seed is None else args.seed
    if args.index is not None:
        src, data = make_mutant(seed, args.index)
        outcome = run_one(seed, args.index)
        sys.stdout.write(f"--- mutant {args.index} of seed {seed} (from {src.name}) ---\n")
        sys.stdout.write(data.decode("utf-8", "backslashreplace") + "\n---\n")
        sys.stdout.write(f"{outcome.outcome}\n{outcome.detail}\n")
        return 1 if outcome.outcome == "failure" else 0
    report = fuzz(args.count, seed, args.start)
    print(report.describe())
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
