"""The backend contract: every registered backend declares its capabilities, and declarations match what it offers."""

from __future__ import annotations

import pytest

from warpforge.evaluator.run.backend import BACKENDS, Backend
from warpforge.evaluator.run.pool import LocalPool

FLAGS = ("measures", "uses_gpu", "live_timing", "can_remeasure", "has_precheck")


def test_defaults_say_not_supported() -> None:
    assert all(getattr(Backend, f) is False for f in FLAGS)

    class Bare(Backend):
        name = "bare"

        def _evaluate(self, job):  # type: ignore[no-untyped-def]
            raise AssertionError("not called")

    bare = Bare()
    try:
        with pytest.raises(NotImplementedError, match="can_remeasure=False"):
            bare.remeasure(None, None)  # type: ignore[arg-type]
        with pytest.raises(NotImplementedError, match="has_precheck=False"):
            bare.precheck(None)  # type: ignore[arg-type]
    finally:
        bare.close()


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_declared_capabilities_match_the_methods(name: str) -> None:
    cls = BACKENDS[name]
    assert cls.name == name
    assert all(isinstance(getattr(cls, f), bool) for f in FLAGS)
    assert cls.can_remeasure == (cls.remeasure is not Backend.remeasure)
    assert cls.has_precheck == (cls.precheck is not Backend.precheck)
    if (cls.uses_gpu or cls.live_timing or cls.can_remeasure) and cls.__module__.startswith("warpforge."):
        assert cls.measures  # only a timing backend can time on a GPU, live, or A/B (tests' stand-ins may pretend)


def test_builtin_declarations() -> None:
    expected = {
        "interpret": (False, False, False, False),
        "cuda": (True, True, True, True),
        "replay": (True, False, False, False),
    }
    for name, flags in expected.items():
        cls = BACKENDS[name]
        assert (cls.measures, cls.uses_gpu, cls.live_timing, cls.can_remeasure) == flags


def test_the_pool_reads_the_declaration_not_the_method() -> None:
    class Undeclared(Backend):  # has a remeasure() but does not declare it: the pool never calls it
        name = "undeclared"

        def _evaluate(self, job):  # type: ignore[no-untyped-def]
            raise AssertionError("not called")

        def remeasure(self, job_a, job_b):  # type: ignore[no-untyped-def]
            return [1.0], [2.0]

    pool = LocalPool(Undeclared, workers=1)
    try:
        assert pool.can_remeasure is False
    finally:
        pool.close()
