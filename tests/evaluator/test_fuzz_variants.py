"""The seeded mutation fuzzer (fuzz_variants.py) over every template and manifest variant: the trusted side's
pre-child pipeline ends every mutant in a verdict or a one-line refusal, never an uncaught exception.

The default tier runs 300 mutants (~4 s of CPU); the slow tier 10,000 (~130 s of CPU, 5-10 min of wall time
on a loaded 2-core machine). A failure names the seed and the mutant's index: replay it with
``WARPFORGE_FUZZ_SEED=<seed> python tests/evaluator/fuzz_variants.py --index <i>``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import fuzz_variants


def _check(count: int) -> None:
    report = fuzz_variants.fuzz(count)
    assert not report.failures, report.describe()
    assert sum(report.outcomes.values()) == count
    # the mutants reach every stage: some refused while reading, some by the grammar, some pass it
    assert any(k.startswith("refused: space_value") for k in report.outcomes), report.outcomes
    assert any(k.startswith("verdict: rejected") for k in report.outcomes), report.outcomes
    assert any(k.startswith("verdict: ok") for k in report.outcomes), report.outcomes


def test_fuzz_short_run() -> None:
    _check(300)


@pytest.mark.slow
@pytest.mark.long
def test_fuzz_full_run() -> None:
    _check(10_000)


def test_every_template_and_manifest_variant_is_a_source() -> None:
    names = {s.name for s in fuzz_variants.sources()}
    assert "template:softmax/single_pass" in names and "fixture:space_bytes.py" in names
    assert len([n for n in names if n.startswith("template:")]) >= 20


def test_a_mutant_is_replayed_alone_from_its_seed_and_index() -> None:
    assert fuzz_variants.make_mutant(7, 123) == fuzz_variants.make_mutant(7, 123)
    assert fuzz_variants.make_mutant(7, 123)[1] != fuzz_variants.make_mutant(8, 123)[1]


def test_an_escaping_exception_is_reported_with_seed_and_index(monkeypatch: pytest.MonkeyPatch) -> None:
    import warpforge.kernels.variant as variant

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setattr(variant, "parse_variant", broken)
    report = fuzz_variants.fuzz(20, seed=5)
    assert report.failures and "TypeError" in report.failures[0].detail
    assert "WARPFORGE_FUZZ_SEED=5" in report.describe() and f"mutant {report.failures[0].index}" in report.describe()
