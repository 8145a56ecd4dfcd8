"""The chain templates' shared vocabulary, written into each template's marked regions from one source.

A chain template (a head, a GEMM or a convolution, then up to ``MAX_STEPS`` steps of kernels/fx_chain.py
``STEP_OPS`` and ``PARAM_OPS`` on the fp32 tile) declares the steps it computes as groups of :data:`GROUPS` in its
module constant ``CHAIN_STEPS``. Templates stay self-contained files (the evaluator's grammar checks one file, the
exact bytes that run, and a variant imports nothing of ours), so the vocabulary is copied into them, between
marker comments, by :func:`render` from kernels/fx_chain.py ``TRITON_STEPS`` (each op's Triton expression, once):

- ``constants``: the module constants ``OP1, A1, B1, ..., OP6, A6, B6`` at the template's task's default member
  (a member's constants replace these lines: kernels/members.py ``with_constants``);
- ``vocabulary``: ``_tanh`` and ``_softplus``, ``_step`` with a branch for each declared op that has an
  expression (another op is a static assert), and ``_steps``, the chain's steps FIRST..LAST;
- ``parameters``: the constexpr tail ``OP1: tl.constexpr, ...`` of a kernel's signature;
- ``arguments``: the same tail passed by keyword where a kernel is launched.

The regions are laid out as ``ruff format`` writes them, so formatting the tree leaves them as rendered.
``python -m warpforge.kernels.chain_regions`` rewrites every chain template's regions; ``--check`` lists the stale
ones and exits 1 (tests/kernels/test_chain_regions.py fails on them too).

Example::

    >>> expand(("elementwise", "param"))[-4:]
    ('add_p', 'sub_p', 'mul_p', 'div_p')
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import sys
from pathlib import Path

from warpforge.kernels.fx_chain import MAX_STEPS, PARAM_OPS, REDUCE_OPS, STEP_OPS, TRITON_NOTES, TRITON_STEPS
from warpforge.kernels.members import TEMPLATES_DIR

# What a template may declare in CHAIN_STEPS: each group's ops. "elementwise" and "param" are `_step`'s branches;
# the others a kernel computes itself (a reduction or softmax over a row or the channels, a 1-D pooling along the
# row, a global average pooling, a GroupNorm), so a template declares them only where its kernel does.
GROUPS: dict[str, tuple[str, ...]] = {
    "elementwise": tuple(op for op in TRITON_STEPS if op not in PARAM_OPS),
    "param": tuple(PARAM_OPS),
    "row": (*(op for op in STEP_OPS if op in REDUCE_OPS), "row_softmax"),
    "row_pool": ("row_pool_max", "row_pool_avg"),
    "spatial_mean": ("spatial_mean",),
    "group_norm": ("group_norm",),
}

KINDS = ("constants", "vocabulary", "parameters", "arguments")
_TOOL = "python -m warpforge.kernels.chain_regions"
_BEGIN = re.compile(r"^(?P<indent> *)# ---- generated: (?P<kind>\w+) \(" + re.escape(_TOOL) + r"\) ----$")


def _begin(kind: str, indent: str) -> str:
    return f"{indent}# ---- generated: {kind} ({_TOOL}) ----"


def _end(kind: str, indent: str) -> str:
    return f"{indent}# ---- end generated: {kind} ----"


_HELPERS = """@triton.jit
def _tanh(x):
    # 1 - exp(-2|x|) cancels below |x| ~ 0.1 (3e-4 relative at 1e-4): there the odd series to x^5, whose
    # next term 17x^7/315 is below 6e-8 relative.
    ax = tl.abs(x)
    t = tl.exp(-2.0 * ax)
    big = (1.0 - t) / (1.0 + t)
    x2 = x * x
    small = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0)))
    return tl.where(ax < 0.1, small, tl.where(x < 0, -big, big))


@triton.jit
def _softplus(x):
    # log(1 + exp(x)) overflows for x > 88; max(x, 0) + log1p(exp(-|x|)) does not, with log1p by its series
    # where 1 + u rounds u away (u < 1e-3: u - u^2/2 + u^3/3, next term below 3e-13).
    u = tl.exp(-tl.abs(x))
    log1p = tl.where(u < 1e-3, u * (1.0 - u * (0.5 - u * (1.0 / 3.0))), tl.log(1.0 + u))
    return tl.maximum(x, 0.0) + log1p
"""


def expand(groups: tuple[str, ...]) -> tuple[str, ...]:
    """The ops of the declared groups, in :data:`GROUPS`' order; ValueError for an unknown group."""
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise ValueError(f"CHAIN_STEPS names {unknown}, not among the groups {sorted(GROUPS)}")
    return tuple(op for g in GROUPS if g in groups for op in GROUPS[g])


def declared(text: str) -> tuple[str, ...] | None:
    """The groups a template's ``CHAIN_STEPS`` names (a tuple of strings at module level); None without one."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CHAIN_STEPS"]:
            value = ast.literal_eval(node.value)
            if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"CHAIN_STEPS is a tuple of group names, got {value!r}")
            return value
    return None


def _task_of(text: str) -> str:
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["TASK"]:
            return str(ast.literal_eval(node.value))
    raise ValueError("a chain template names its TASK")


def _default_constants(task: str) -> dict[str, object]:
    """The step constants of the task's default member (kernels/tasks/<task>.py ``MEMBERS``)."""
    module = importlib.import_module(f"warpforge.kernels.tasks.{task}")
    constants = next(c for name, _, c in module.MEMBERS if name == module.DEFAULT_MEMBER)
    return {k: constants[k] for s in range(1, MAX_STEPS + 1) for k in (f"OP{s}", f"A{s}", f"B{s}")}


def _tail() -> list[str]:
    return [f"{k}{s}" for s in range(1, MAX_STEPS + 1) for k in ("OP", "A", "B")]


def _vocabulary(ops: tuple[str, ...]) -> list[str]:
    takes_p = any(op in PARAM_OPS for op in ops)
    p = "p, " if takes_p else ""
    out = [
        *_HELPERS.splitlines(),
        "",
        "",
        "@triton.jit",
        f"def _step(y, z, {p}OP: tl.constexpr, A: tl.constexpr, B: tl.constexpr):",
        "    # One step of the chain on the fp32 tile: y the running value, z the head's output with its bias"
        + (", p the" if takes_p else "."),
        *(["    # parameter per output column or channel ([1, BLOCK_N], fp32)."] if takes_p else []),
        '    if OP == "none":',
        "        out = y",
    ]
    for op in ops:
        if op in TRITON_STEPS:
            out.append(f'    elif OP == "{op}":')
            if op in TRITON_NOTES:
                out.append(f"        # {TRITON_NOTES[op]}")
            out.append(f"        out = {TRITON_STEPS[op]}")
    out += [
        "    else:",
        '        tl.static_assert(False, "a step this template does not declare in CHAIN_STEPS")',
        "    return out",
        "",
        "",
        "@triton.jit",
        "def _steps(",
        "    y,",
        "    z,",
        *(["    p,"] if takes_p else []),
        "    FIRST: tl.constexpr,",
        "    LAST: tl.constexpr,",
        *(f"    {name}: tl.constexpr," for name in _tail()),
        "):",
        '    # Steps FIRST..LAST of the chain, resolved at compile time (a step past its end is "none" and costs',
        "    # nothing): a kernel with a row step or a norm runs those before it on tiles, those after it on the",
        "    # reduced or normalized values.",
    ]
    for s in range(1, MAX_STEPS + 1):
        out += [f"    if FIRST <= {s} and {s} <= LAST:", f"        y = _step(y, z, {p}OP{s}, A{s}, B{s})"]
    out += ["    return y", "", ""]
    return out


def _region(kind: str, indent: str, text: str) -> list[str]:
    """The lines between ``kind``'s markers (without them), at the markers' indentation."""
    if kind == "constants":
        values = _default_constants(_task_of(text))
        body = [
            "# The chain: each step's op and scalars, \"none\" past its end (a member's constants replace these",
            "# lines; the default is the task's default member).",
            *(f"{name} = {_literal(values[name])}" for name in _tail()),
        ]
    elif kind == "vocabulary":
        groups = declared(text)
        if groups is None:
            raise ValueError("a template with a vocabulary region declares CHAIN_STEPS")
        body = _vocabulary(expand(groups))
    elif kind == "parameters":
        body = [f"{name}: tl.constexpr," for name in _tail()]
    elif kind == "arguments":
        body = [f"{name}={name}," for name in _tail()]
    else:
        raise ValueError(f"no region kind {kind!r} (kinds: {', '.join(KINDS)})")
    return [f"{indent}{line}" if line else "" for line in body]


def _literal(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def render(text: str) -> str:
    """``text`` with each marked region rewritten from the one source; ValueError for an unclosed region."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        found = _BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if found is None:
            continue
        kind, indent = found["kind"], found["indent"]
        end = _end(kind, indent)
        close = next((j for j in range(i, len(lines)) if lines[j] == end), None)
        if close is None:
            raise ValueError(f"the region {kind!r} opened at line {i} is not closed by {end.strip()!r}")
        out += _region(kind, indent, text)
        out.append(end)
        i = close + 1
    return "\n".join(out)


def regions(text: str) -> list[str]:
    """The kinds of the regions in ``text``, in order."""
    return [m["kind"] for m in map(_BEGIN.match, text.split("\n")) if m]


def region_texts(text: str) -> list[str]:
    """Each region of ``text``, its markers included, in order."""
    lines = text.split("\n")
    out: list[str] = []
    start: int | None = None
    for i, line in enumerate(lines):
        if _BEGIN.match(line):
            start = i
        elif start is not None and line.strip().startswith("# ---- end generated:"):
            out.append("\n".join(lines[start : i + 1]))
            start = None
    return out


def is_chain_template(text: str) -> bool:
    """Whether a template takes a chain (the step constants, a ``_step``, a region or a declaration): each such
    template must declare CHAIN_STEPS and carry the regions."""
    return bool(re.search(r"^(OP1 = |CHAIN_STEPS = |def _step\(|# ---- generated: )", text, re.M)) or any(
        _BEGIN.match(line) for line in text.split("\n")
    )


def chain_templates(root: Path = TEMPLATES_DIR) -> list[Path]:
    """The shipped chain templates."""
    return sorted(p for p in root.glob("*/*.py") if is_chain_template(p.read_text()))


def stale(root: Path = TEMPLATES_DIR) -> list[Path]:
    """The chain templates whose regions differ from their rendering; ValueError naming the template whose
    declaration or markers are wrong."""
    out = []
    for path in chain_templates(root):
        text = path.read_text()
        try:
            rendered = render(text)
        except ValueError as err:
            raise ValueError(f"{path.relative_to(root)}: {err}") from None
        if rendered != text:
            out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=_TOOL,
        description="Rewrite the chain templates' generated regions "
        "from kernels/fx_chain.py (TRITON_STEPS) and kernels/chain_regions.py.",
    )
    parser.add_argument("--check", action="store_true", help="list stale templates and exit 1; write nothing")
    args = parser.parse_args(argv)
    try:
        old = stale()
    except ValueError as err:  # a template's declaration or markers: say which rule, no traceback
        print(f"error: {err}", file=sys.stderr)
        return 1
    for path in old:
        print(f"{'stale' if args.check else 'rewrote'}: {path.relative_to(TEMPLATES_DIR)}")
        if not args.check:
            path.write_text(render(path.read_text()))
    if not old:
        print(f"{len(chain_templates())} chain templates: every region as rendered")
    return 1 if args.check and old else 0


if __name__ == "__main__":
    sys.exit(main())
