"""The variant contract (docs/design.md §3.2), read without executing the file.

A variant file defines ``TASK``, ``SPACE`` (a literal dict of parameter -> candidate values),
optionally ``constraints(params, shape) -> bool``, and ``launch(*inputs, **params)``. The trusted
process only parses it (``ast``); the code runs in a sandboxed child (evaluator/sandbox/child.py).

Example::

    >>> from warpforge.kernels.variant import builtin_variants
    >>> [v.name for v in builtin_variants("softmax")]  # doctest: +SKIP
    ['looped', 'single_pass']
"""

from __future__ import annotations

import ast
import hashlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warpforge.errors import UsageError
from warpforge.kernels.autotune_space import autotune_space
from warpforge.kernels.members import TEMPLATES_DIR as TEMPLATES_DIR  # the shipped templates, defined there
from warpforge.kernels.members import split_member, template_files
from warpforge.kernels.source_limits import SourceRefused, parse_limited
from warpforge.kernels.space_values import CONFIG_PARAM, REASON, SpaceRefused, space_from_node


class VariantError(UsageError):
    """A variant file breaks the contract; the message says what to fix. ``reason``: the grammar rule
    (evaluator/static/grammar/) when the source could not even be read (too large, too deep, not parsable)."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Variant:
    """A parsed variant: its source, content hash and tunable space (never its executed code)."""

    name: str
    task: str
    source: str
    space: dict[str, list[Any]]
    has_constraints: bool
    path: Path | None = None
    # Training variants define launch_forward and launch_backward besides launch (docs/design.md §3.2).
    has_backward: bool = False
    # KernelBench's answer format: ``class ModelNew(nn.Module)`` instead of ``launch`` (built from the task's
    # init inputs, the reference's state loaded, then called on the leading inputs). TASK is optional:
    # "" means the task it is evaluated against (see for_task).
    model_new: bool = False

    def for_task(self, task: str) -> Variant:
        """This variant bound to ``task`` when it names none (a ModelNew answer); unchanged otherwise."""
        from dataclasses import replace

        return replace(self, task=task) if not self.task else self

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def configs(self) -> list[dict[str, Any]]:
        """The cartesian product of SPACE, in a stable order (constraints not yet applied)."""
        names = list(self.space)
        return [dict(zip(names, values)) for values in itertools.product(*(self.space[n] for n in names))]

    @property
    def space_size(self) -> int:
        size = 1
        for values in self.space.values():
            size *= len(values)
        return size


def parse_variant(source: str, name: str = "variant", path: Path | None = None) -> Variant:
    """Parse a variant's source statically; raise VariantError with a one-line fix on bad input."""
    where = str(path) if path else name
    try:  # within the source limits: a deep or huge source is an error, never a crash
        tree = parse_limited(source, cookie=False)
    except SourceRefused as err:
        reason, message = err.reason, str(err)
        if reason == "syntax_error":
            line, _, msg = message.removeprefix("line ").partition(": ")
            raise VariantError(f"{where}:{line}: syntax error: {msg}", reason) from None
        raise VariantError(f"{where}: {reason}: {message}", reason) from None
    task: str | None = None
    space: dict[str, list[Any]] | None = None
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    model_new = any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body)
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        if target == "TASK":
            # a str literal only: literal_eval of `{[1]: 2}` raises TypeError, not the ValueError it documents
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                raise VariantError(f"{where}: TASK must be a string literal")
            task = value.value
        elif target == "SPACE" and value is not None:
            if space is not None:
                raise VariantError(f"{where}: {REASON}: SPACE is assigned twice: define it once", REASON)
            try:  # typed from the tree, never evaluated (kernels/space_values.py)
                space = space_from_node(value)
            except SpaceRefused as exc:
                raise VariantError(f"{where}: {exc.reason}: {exc}", exc.reason) from None
    if model_new and task is None:
        task = ""  # the task it is evaluated against
    elif not isinstance(task, str) or not task:
        raise VariantError(f"{where}: missing TASK = '<task name>'")
    if model_new and "launch" in functions:
        raise VariantError(f"{where}: defines both launch and class ModelNew: a variant is one or the other")
    if "launch" not in functions and not model_new:
        raise VariantError(
            f"{where}: missing 'def launch(*inputs, **params)' (or KernelBench's `class ModelNew(nn.Module)`)"
        )
    training = {"launch_forward", "launch_backward"} & functions
    if len(training) == 1:
        missing = ({"launch_forward", "launch_backward"} - training).pop()
        raise VariantError(
            f"{where}: defines {training.pop()} but not {missing}: a training variant defines both "
            "(docs/design.md §3.2)"
        )
    try:  # an autotuned kernel's configurations are the space (kernels/autotune_space.py)
        tuned = autotune_space(tree)
    except SpaceRefused as exc:
        raise VariantError(f"{where}: decorator: {exc}", "decorator") from None
    if tuned is not None and space is not None:
        raise VariantError(
            f"{where}: {REASON}: SPACE beside @triton.autotune: the autotuned kernel's configurations "
            "are the space; drop SPACE (or the decorator)",
            REASON,
        )
    space = tuned if tuned is not None else space or {}
    return Variant(
        name=name,
        task=task,
        source=source,
        space={k: list(v) for k, v in space.items()},
        has_constraints="constraints" in functions,
        path=path,
        has_backward=bool(training),
        model_new=model_new,
    )


# Triton asserts that num_warps is a power of two (an AssertionError deep in the launcher otherwise), and
# num_stages is a positive pipeline depth.
NUM_WARPS = (1, 2, 4, 8, 16, 32)


def _where(variant: Variant) -> str:
    return str(variant.path) if variant.path else variant.name


def check_space(variant: Variant) -> None:
    """SPACE is there, non-empty, and its Triton launch options are ones Triton accepts; else VariantError."""
    where = _where(variant)
    if not variant.space and variant.model_new:
        return  # a ModelNew answer without SPACE is one configuration
    if not variant.space:
        raise VariantError(
            f"{where}: no SPACE to pick parameters from: define a literal SPACE with every parameter "
            "launch() takes, e.g. SPACE = {'BLOCK': [256, 1024], 'num_warps': [4, 8]}"
        )
    bad = [v for v in variant.space.get("num_warps", []) if isinstance(v, bool) or v not in NUM_WARPS]
    if bad:
        raise VariantError(f"{where}: SPACE['num_warps'] has {bad}: Triton needs a power of two from {list(NUM_WARPS)}")
    bad = [v for v in variant.space.get("num_stages", []) if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        raise VariantError(f"{where}: SPACE['num_stages'] has {bad}: Triton needs a positive integer")


def _same(a: Any, b: Any) -> bool:
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)  # JSON true is not SPACE's 1


def check_params(variant: Variant, params: dict[str, Any]) -> None:
    """Every given parameter is in SPACE and takes one of SPACE's values; else VariantError naming the fix.

    Example::

        >>> check_params(variant, {"num_warps": 3})  # doctest: +SKIP
        VariantError: num_warps=3 is not in SPACE['num_warps'] of good.py: choose one of [2, 4]
    """
    where = _where(variant)
    unknown = [k for k in params if k not in variant.space]
    if unknown:
        raise VariantError(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} for "
            f"{where}: its SPACE has {', '.join(variant.space)}"
        )
    for name, value in params.items():
        if not any(_same(value, v) for v in variant.space[name]):
            raise VariantError(
                f"{name}={_json(value)} is not in SPACE[{name!r}] of {where}: choose one of "
                f"{_json(variant.space[name])} (or add it to SPACE)"
            )


def _json(value: Any) -> str:
    import json

    try:
        return json.dumps(value)
    except TypeError:
        return repr(value)


def first_config(
    variant: Variant, given: dict[str, Any], feasible: list[dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """The first configuration in SPACE order that agrees with ``given``, among ``feasible`` (the
    configurations that satisfy ``constraints``, from the evaluator's space stage; None when the variant
    has no constraints). None when there is none.

    Example::

        >>> # SPACE = {"BLOCK": [128, 256], "num_warps": [2, 4]}, no constraints
        >>> first_config(variant, {"num_warps": 4})  # doctest: +SKIP
        {'BLOCK': 128, 'num_warps': 4}
    """
    names = list(variant.space)
    candidates = (
        feasible
        if feasible is not None
        else (dict(zip(names, values)) for values in itertools.product(*(variant.space[n] for n in names)))
    )
    for config in candidates:
        if all(_same(config.get(k), v) for k, v in given.items()):
            return dict(config)
    return None


def load_variant(path: str | Path) -> Variant:
    p = Path(path)
    if not p.is_file():
        raise VariantError(f"variant file {p} does not exist")
    try:  # UTF-8 only, strictly: the evaluator checks and runs exactly these bytes (evaluator/static/grammar/)
        source = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VariantError(
            f"{p}: not UTF-8 text (byte {exc.start}): a variant file is UTF-8 only", "source_encoding"
        ) from None
    return parse_variant(source, name=p.stem, path=p.resolve())


def builtin_variants(task: str) -> list[Variant]:
    """The template variants shipped for a task (``kernels/templates/<task>/*.py``); for a family's member
    (``elementwise[gelu_tanh]``) the family's, with the member's constants written in (kernels/members.py)."""
    if split_member(task) is not None:
        from warpforge.kernels.task import member_templates

        return [load_variant(p) for p in member_templates(task)]
    return [load_variant(p) for p in template_files(task)]


def next_configuration(variant: Variant, params: dict[str, Any]) -> dict[str, Any] | None:
    """``params`` with the configuration after the one it names, for a space given as a list of configurations
    (a list-form SPACE or an autotuned kernel's): ``eval`` tries them in order and takes the first that fits, as
    Triton's autotuner skips one that does not (out of resources); None past the last or for a product SPACE.

        >>> v = Variant(name="v", task="t", source="", space={"@config": ["#0 {}", "#1 {}"]}, has_constraints=False)
        >>> next_configuration(v, {"@config": "#0 {}"}), next_configuration(v, {"@config": "#1 {}"})
        ({'@config': '#1 {}'}, None)
    """
    labels = variant.space.get(CONFIG_PARAM, [])
    label = params.get(CONFIG_PARAM)
    if label not in labels or labels.index(label) + 1 >= len(labels):
        return None
    return {**params, CONFIG_PARAM: labels[labels.index(label) + 1]}
