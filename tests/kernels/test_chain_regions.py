"""The chain templates' generated regions (kernels/chain_regions.py): each is its rendering from kernels/fx_chain.py
``TRITON_STEPS``, each template declares the steps it computes, and no chain task proposes a member to a template
that does not declare one of its steps (the conv templates once lacked ``mul_mish``, which every conv chain ending
in ``x * mish(x)`` was proposed to: each template stopped at its static assert). Reads sources only: no kernel
runs here (the families' own tests run the regenerated templates)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.chain_regions import (
    GROUPS,
    KINDS,
    chain_templates,
    declared,
    expand,
    region_texts,
    regions,
    render,
)
from warpforge.kernels.fx_chain import MAX_STEPS, PARAM_OPS, REDUCE_OPS, STEP_OPS, TRITON_STEPS, Step
from warpforge.kernels.members import template_files, with_constants
from warpforge.kernels.tasks import conv, linear_chain, linear_groupnorm

TEMPLATES = chain_templates()
TAIL = [f"{k}{s}" for s in range(1, MAX_STEPS + 1) for k in ("OP", "A", "B")]

# The table of which template computes which step, as the report and docs/tasks.md state it: an independent
# statement of the declarations (a template gaining or losing a group must change this table too).
SUPPORT = {
    "conv/channel_rows": {"elementwise", "param", "row", "spatial_mean"},
    "conv/direct": {"elementwise", "param"},
    "conv/implicit_gemm": {"elementwise", "param"},
    "linear_chain/persistent": {"elementwise", "param"},
    "linear_chain/rows": {"elementwise", "row", "row_pool"},
    "linear_chain/tiled": {"elementwise", "param"},
    "linear_groupnorm/grouped": {"elementwise", "param", "group_norm"},
    "linear_groupnorm/rows": {"elementwise", "param", "group_norm"},
}

# The tasks whose templates take a chain: a step chain -> the member's template constants (ValueError: no member).
MEMBER_CONSTANTS: dict[str, Callable[[tuple[Step, ...]], dict]] = {
    "linear_chain": lambda steps: linear_chain.member(steps)[2],
    "linear_groupnorm": lambda steps: linear_groupnorm.member(steps)[2],
    "conv": lambda steps: conv.member(conv.Hyper(), steps)[2],
    "conv_transpose": lambda steps: conv.member(conv.Hyper(transposed=True), steps)[2],
}
_NORM: Step = ("group_norm", 4.0, 1e-5)
_RELU: Step = ("relu", 0.0, 0.0)


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def test_every_step_op_has_a_group_and_every_step_group_op_an_expression() -> None:
    ops = set(STEP_OPS) | set(PARAM_OPS) | {"group_norm"}
    grouped = [op for ops_ in GROUPS.values() for op in ops_]
    assert sorted(grouped) == sorted(ops), "each op in exactly one group"
    assert set(TRITON_STEPS) == set(GROUPS["elementwise"]) | set(GROUPS["param"])
    assert not set(TRITON_STEPS) & (set(REDUCE_OPS) | {"row_softmax", "spatial_mean"})


def test_the_chain_templates_declare_the_table_and_carry_every_region() -> None:
    assert {_name(p): set(declared(p.read_text()) or ()) for p in TEMPLATES} == SUPPORT
    for path in TEMPLATES:
        kinds = regions(path.read_text())
        assert set(kinds) == set(KINDS), (path, kinds)


@pytest.mark.parametrize("path", TEMPLATES, ids=_name)
def test_each_region_is_its_rendering_and_passes_the_grammar(path: Path) -> None:
    text = path.read_text()
    assert render(text) == text, f"{_name(path)} is stale: run python -m warpforge.kernels.chain_regions"
    assert check_module(text) is None


def test_an_edited_region_or_declaration_is_stale() -> None:
    text = (Path(conv.__file__).parents[1] / "templates" / "conv" / "direct.py").read_text()
    assert render(text) == text
    edited = text.replace("        out = y * A\n", "        out = y * A * 1.0001\n", 1)
    assert edited != text and render(edited) == text
    dropped = text.replace('CHAIN_STEPS = ("elementwise", "param")', 'CHAIN_STEPS = ("elementwise",)')
    assert 'elif OP == "add_p"' not in render(dropped)
    with pytest.raises(ValueError, match="not among the groups"):
        render(text.replace('CHAIN_STEPS = ("elementwise", "param")', 'CHAIN_STEPS = ("activations",)'))


def test_generated_step_branches_are_the_declared_ops() -> None:
    for path in TEMPLATES:
        tree = ast.parse(path.read_text())
        step = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_step")
        branches = {
            c.value
            for c in ast.walk(step)
            if isinstance(c, ast.Constant)
            and isinstance(c.value, str)
            and (c.value in TRITON_STEPS or c.value == "none")
        }
        assert branches - {"none"} == set(expand(declared(path.read_text()) or ())) & set(TRITON_STEPS), path


def _calls_forward_the_tail(path: Path) -> list[str]:
    """Calls of a jit function taking the constexpr tail that pass anything but OP1, A1, ... in its place."""
    tree = ast.parse(path.read_text())
    tails = {}
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            names = [a.arg for a in fn.args.args]
            if "OP1" in names:
                tails[fn.name] = names.index("OP1")
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in tails:
            at = tails[node.func.id]
            passed = [getattr(a, "id", None) for a in node.args[at : at + len(TAIL)]]
            if passed != TAIL:
                wrong.append(f"line {node.lineno}: {node.func.id} gets {passed}")
    return wrong


@pytest.mark.parametrize("path", TEMPLATES, ids=_name)
def test_calls_forward_the_chain_as_it_is(path: Path) -> None:
    assert not _calls_forward_the_tail(path)


def _args(op: str) -> tuple[float, float]:
    if op in REDUCE_OPS:
        return (1.0, 0.0)  # keepdim
    return {
        "clamp": (-1.0, 1.0),
        "leaky_relu": (0.1, 0.0),
        "row_pool_max": (2.0, 0.0),
        "row_pool_avg": (2.0, 0.0),
        "group_norm": _NORM[1:],
        "row_softmax": (0.0, 0.0),
        "spatial_mean": (0.0, 0.0),
    }.get(op, (2.0, 0.0))


def undeclared_proposals(task: str, texts: dict[str, str]) -> list[str]:
    """Each op the task makes a member of (alone, after a ReLU, before one; around a GroupNorm for the norm's
    family) whose constants a template takes (kernels/members.py ``with_constants``: one lacking a constant is
    no template of that member) without declaring the op."""
    found = []
    ops = {name: expand(declared(text) or ()) for name, text in texts.items()}
    takes: dict[tuple[str, frozenset[str]], bool] = {}  # with_constants refuses by the constants' names alone
    for op in sorted({*STEP_OPS, *PARAM_OPS, "group_norm"}):
        step: Step = (op, *_args(op))
        chains = [(step,), (_RELU, step), (step, _RELU)]
        if task == "linear_groupnorm":
            chains += [(step, _NORM), (_NORM, step), (_RELU, _NORM, step)]
        for steps in chains:
            try:
                constants = MEMBER_CONSTANTS[task](steps)
            except ValueError:
                continue
            for name, text in texts.items():
                key = (name, frozenset(constants))
                if key not in takes:
                    takes[key] = with_constants(text, tuple(constants.items())) is not None
                if takes[key] and op not in ops[name]:
                    found.append(f"{task}: {'>'.join(s[0] for s in steps)} proposed to {name}")
    return found


def test_every_chain_task_is_checked() -> None:
    assert {
        ast.literal_eval(
            next(
                n.value
                for n in ast.parse(p.read_text()).body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "TASK"
            )
        )
        for p in TEMPLATES
    } | {"conv_transpose"} == set(MEMBER_CONSTANTS)


@pytest.mark.parametrize("task", sorted(MEMBER_CONSTANTS))
def test_no_task_proposes_a_step_one_of_its_templates_does_not_declare(task: str, tmp_path: Path) -> None:
    texts = {p.stem: p.read_text() for p in template_files(task, root=tmp_path)}
    assert texts
    assert not undeclared_proposals(task, texts)


def test_a_template_declaring_less_than_its_task_proposes_is_found() -> None:
    texts = {p.stem: p.read_text() for p in template_files("conv")}
    texts["direct"] = texts["direct"].replace('CHAIN_STEPS = ("elementwise", "param")', 'CHAIN_STEPS = ("param",)')
    found = undeclared_proposals("conv", texts)
    assert "conv: mul_mish proposed to direct" in found and not any("implicit_gemm" in f for f in found)


def test_ruff_format_keeps_the_regions_as_rendered(tmp_path: Path) -> None:
    """The tree is formatted with ``ruff format`` (pyproject.toml); a region it rewrote would be stale at once."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    config = Path(__file__).parents[2] / "pyproject.toml"
    copies = []
    for path in TEMPLATES:
        copy = tmp_path / f"{path.parent.name}_{path.name}"
        copy.write_text(path.read_text())
        copies.append((path, copy))
    subprocess.run([ruff, "format", "--quiet", "--config", str(config), *(str(c) for _, c in copies)], check=True)
    for path, copy in copies:
        assert region_texts(copy.read_text()) == region_texts(path.read_text()), _name(path)
