"""SPACE is typed from the syntax tree on the trusted side (kernels/space_values.py): int, float, bool, str or
None per parameter, anything else ``space_value`` with one line naming the parameter, never an internal error.

The first two cases are the ones that once ended ``warpforge eval`` with "internal error": a bytes literal
(json.dumps of the child request) and an unhashable dict key (ast.literal_eval in parse_variant)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.evaluator.static.checks import check_source
from warpforge.kernels.variant import TEMPLATES_DIR, VariantError, parse_variant

TEMPLATE = (TEMPLATES_DIR / "softmax" / "single_pass.py").read_text()
ANCHOR = '"ROWS_PER_PROGRAM": [1, 2, 4, 8],'


def with_entry(entry: str) -> str:
    assert ANCHOR in TEMPLATE
    return TEMPLATE.replace(ANCHOR, ANCHOR + "\n    " + entry)


@pytest.mark.parametrize(
    "entry",
    [
        '"X": [b"ab"],',  # bytes: json.dumps of the child request raised TypeError
        '"X": [{[1]: 2}],',  # unhashable key: ast.literal_eval raised TypeError
        '"X": [1j],',
        '"X": [{1, 2}],',
        '"X": [[1, 2]],',
        '"X": [(1, 2)],',
        '"X": [{"a": 1}],',
        '"X": [1e999],',
        '"X": [-1e999],',
        '"X": [2 ** 64],',
        '"X": [9223372036854775808],',
        '"X": [...],',
        '"X": [-True],',
        '"X": [-"a"],',
        '"X": [BLOCK],',
        '"X": [len("a")],',
        '"X": ["\\x00"],',
        '"X": ["\\ud800"],',
        '"X": [],',
        '"X": 4,',
        '"X y": [1],',
        '"ROWS_PER_PROGRAM": [1],',
        "1: [1],",
        '"é": [1],',
    ],
)
def test_a_space_value_outside_the_types_is_refused_on_both_readers(entry: str) -> None:
    source = with_entry(entry)
    with pytest.raises(VariantError) as err:
        parse_variant(source, "mutant")
    assert err.value.reason == "space_value" and "\n" not in str(err.value)
    finding = check_source(source)
    assert finding is not None and finding.reason == "space_value", finding


@pytest.mark.parametrize(
    ("entry", "values"),
    [
        ('"X": [1, -2, 2.5, -0.5, True, None, "tl.float16"],', [1, -2, 2.5, -0.5, True, None, "tl.float16"]),
        ('"X": (9223372036854775807, -9223372036854775808),', [2**63 - 1, -(2**63)]),
    ],
)
def test_typed_values_are_read_without_evaluation(entry: str, values: list[object]) -> None:
    variant = parse_variant(with_entry(entry), "honest")
    assert variant.space["X"] == values
    assert [type(v) for v in variant.space["X"]] == [type(v) for v in values]


def test_space_and_task_are_never_evaluated() -> None:
    with pytest.raises(VariantError, match="TASK must be a string literal"):
        parse_variant(TEMPLATE.replace('TASK = "softmax"', "TASK = {[1]: 2}"), "mutant")
    with pytest.raises(VariantError) as err:
        parse_variant(TEMPLATE + "\nSPACE = {'A': [1]}\n", "mutant")
    assert err.value.reason == "space_value"


@pytest.mark.parametrize("entry", ['"X": [b"ab"],', '"X": [{[1]: 2}],'])
def test_warpforge_eval_says_space_value_in_one_line(entry: str, tmp_path: Path) -> None:
    path = tmp_path / "candidate.py"
    path.write_text(with_entry(entry))
    res = CliRunner().invoke(app, ["eval", "softmax", str(path), "--backend", "interpret", "--unsafe-run-unsandboxed"])
    assert res.exit_code == 2, res.output
    assert "space_value" in res.stderr and "SPACE['X']" in res.stderr and "internal error" not in res.stderr


def _wide_space(params: int, values: int) -> str:
    return "".join(f'"P{i}": {list(range(values))},' for i in range(params))


def test_a_space_past_the_bound_is_refused_before_anything_runs() -> None:
    # 7 parameters of 10 values beside the template's 4 x 6 x 4: 960,000,000 configurations, 9,600 times the
    # bound, refused from the list lengths alone (building them would take minutes and gigabytes).
    source = with_entry(_wide_space(7, 10))
    with pytest.raises(VariantError) as err:
        parse_variant(source, "mutant")
    assert err.value.reason == "space_too_large" and "\n" not in str(err.value)
    assert "9.6e+08 configurations" in str(err.value), err.value
    finding = check_source(source)
    assert finding is not None and finding.reason == "space_too_large", finding


def test_a_space_at_the_bound_is_accepted() -> None:
    # 10**5 = 100,000 exactly (the template's own ROWS_PER_PROGRAM, num_warps and num_stages lists multiply it:
    # they are replaced here so the product is known without reading the template)
    head, _, tail = TEMPLATE.partition("SPACE = {")
    body = tail[tail.index("}") + 1 :]
    source = (
        head
        + "SPACE = {"
        + '"ROWS_PER_PROGRAM": [1], "num_warps": [4], "num_stages": [1], '
        + _wide_space(5, 10)
        + "}"
        + body
    )
    variant = parse_variant(source, "honest")
    assert variant.space_size == 100_000
    assert check_source(source) is None
