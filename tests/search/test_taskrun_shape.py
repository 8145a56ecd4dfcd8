"""TaskRun is built whole in ``__init__`` (a reader sees every attribute there) and composes its ending
(search/engine/final.py) instead of inheriting a mixin of ``NotImplementedError`` stubs."""

from __future__ import annotations

import ast
import inspect

from warpforge.search.engine import final, taskrun


def first_set_outside_init(cls_source: str) -> set[str]:
    cls = ast.parse(cls_source).body[0]
    assert isinstance(cls, ast.ClassDef)
    in_init: set[str] = set()
    elsewhere: set[str] = set()
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, (ast.AnnAssign, ast.AugAssign))
                else []
            )
            for t in targets:
                for x in ast.walk(t):
                    if (
                        isinstance(x, ast.Attribute)
                        and isinstance(x.value, ast.Name)
                        and x.value.id == "self"
                        and isinstance(x.ctx, ast.Store)
                    ):
                        (in_init if fn.name == "__init__" else elsewhere).add(x.attr)
    return elsewhere - in_init


def test_the_checker_finds_an_attribute_born_outside_init() -> None:
    src = (
        "class A:\n    def __init__(self):\n        self.a = 1\n"
        "    def f(self):\n        self.a = 2\n        self.b = 3\n"
    )
    assert first_set_outside_init(src) == {"b"}


def test_taskrun_sets_every_attribute_in_init() -> None:
    assert first_set_outside_init(inspect.getsource(taskrun.TaskRun)) == set()


def test_the_ending_is_composed_not_inherited() -> None:
    assert taskrun.TaskRun.__bases__ == (object,)
    assert "NotImplementedError" not in inspect.getsource(final)
