"""KernelBench-style task files (``class Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()``) as tasks.

Weights reach the variant: a case is ``get_inputs()`` followed by the model's state (its ``state_dict``,
parameters and persistent buffers, in that order; ``Task.param_names`` names them), all drawn under
``torch.manual_seed(seed)`` (the model is built first, then the inputs), floating tensors cast to the
task dtype. The reference runs the model with exactly those tensors (``torch.func.functional_call``), so
a kernel variant receives ``launch(*inputs, *state)`` and a ``ModelNew`` variant has that state loaded.

Shapes: a problem's shape is its module-level integer globals that ``get_inputs``/``get_init_inputs``
read (directly, or through another global such as ``input_shape = (num_classes,)``). SHAPES holds the
file's values (the benchmark shape); CHECK_SHAPES are derived from it with every size above
:data:`KEEP_AT_MOST` scaled down to odd and non-power-of-two values (1, primes, 2^k + 1) within
:data:`CHECK_ELEMENTS` elements per input, so the Triton interpreter judges the whole problem in minutes.
Each shape runs the file's own code in a private namespace (its source re-executed with those globals
set), so weights and reshape constants follow the shape and no shape leaks into another.

Example::

    >>> from warpforge.kernels.task import load_task_file
    >>> task = load_task_file("level1/19_ReLU.py")  # doctest: +SKIP
    >>> task.check_shapes[0]                         # doctest: +SKIP
    {'batch_size': 13, 'dim': 13}
"""

from __future__ import annotations

import ast
import math
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any, NamedTuple

import torch

from warpforge.kernels.taskdef import Shape, Task, TaskError, shape_key

# Sizes at most this stay at the file's value: kernel sizes, strides, dimension indices and channel counts
# such as 3 are already cheap, and scaling them changes the problem (a kernel of 1 is no convolution).
KEEP_AT_MOST = 8
# Largest input a derived check shape may have: the interpreter runs an elementwise kernel at ~10 ms per
# 256-element program on this machine's 2 cores (evaluator/judge/judge.py), so 100k elements is ~4 s per case.
CHECK_ELEMENTS = 100_000
# When every derived size is 1 and the largest input is still over CHECK_ELEMENTS (literal image sizes:
# 3x224x224 = 150528 per item), those smallest sizes are still checked up to this many elements.
FLOOR_ELEMENTS = 1_000_000
# Largest inputs plus weights a derived check shape may hold on the CPU: 160M elements are 0.64 GB in float32,
# which with the reference model's own copy measured 1.3 GB resident for VGG19 at batch 1 (143M weights);
# 2_ShallowWideMLP's benchmark weights (32768 x 32768 twice) would be 17 GB.
TOTAL_ELEMENTS = 160_000_000
# Largest work a derived check shape may hold (:class:`Work`): 100k elements bound the inputs, not the work.
# KernelBench level 1's convolutions derived 1e8-2.7e8 multiply-adds (58, 62, 80: a 3x5x7 or 5x9 kernel over
# 8-128 channels), and a depthwise one (82) 61504 outputs x 9 taps. The interpreter pays ~1 ms per tile op on
# this machine's 2 cores (loaded): the conv direct template's launch at 128 positions x 16 channels took 136 s
# at 7.3e7 multiply-adds (63) and 134 s at 5.5e5 tap steps (82), and the judge's whole check has 240-410 s for
# ~14 launches. At these caps its slowest configuration is ~10-20 s a launch.
CHECK_MACS = 10_000_000
CHECK_TAPS = 100_000
# While capping the work, a size above KEEP_AT_MOST is halved only where the code also runs at half the halved
# value: the judge's hidden shapes draw each size from [v/2, 1.2 v + 2], so an image cut to 7 under a 7-wide
# kernel (which a hidden 3 would break) keeps its size and the channels shrink instead.
# A generated copy of a problem file may end with this dict (evaluator/judge/matching.py): shape keys of the
# matched built-in task -> the problem's globals, so that task's templates read their usual keys.
ALIAS_ATTR = "WARPFORGE_SHAPE_KEYS"
MATCH_ATTR = "WARPFORGE_MATCHED_TASK"  # with it, a line saying which task matched and how

# torch's global RNG is process-wide: a seeded draw holds this lock so that concurrent threads
# (workers in one process) never interleave their draws.
_SEED_LOCK = threading.RLock()
# Why sizes could not be derived, per problem path: the ok says so (evaluator/run/interpret.py).
NOTES: dict[str, str] = {}


def _tensors(values: Any) -> list[torch.Tensor]:
    return [v for v in (values if isinstance(values, (list, tuple)) else [values]) if isinstance(v, torch.Tensor)]


def _code_names(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _code_names(const)
    return names


@dataclass(frozen=True)
class ProblemSource:
    """A problem file's module-level assignments, re-executable with some integer globals replaced."""

    path: Path
    tree: ast.Module
    assigned: dict[str, ast.expr]  # global name -> the expression assigned to it (last assignment)

    @classmethod
    def parse(cls, path: Path) -> ProblemSource:
        tree = ast.parse(path.read_text(), filename=str(path))
        assigned: dict[str, ast.expr] = {}
        for node in tree.body:
            for name, value in _simple_assignments(node):
                assigned[name] = value
        return cls(path, tree, assigned)

    def namespace(self, values: Shape) -> dict[str, Any]:
        """A fresh module namespace with ``values`` assigned in place of the file's own expressions."""
        tree = ast.Module(body=[], type_ignores=[])
        items: dict[str, dict[int, int]] = {}  # list or tuple global -> {index: value} (keys ``name[index]``)
        for key, v in values.items():
            name, index = _split_key(key)
            if index is not None:
                items.setdefault(name, {})[index] = int(v)
        for node in self.tree.body:
            pairs = _simple_assignments(node)
            if pairs and any(name in values or name in items for name, _ in pairs):
                for name, value in pairs:  # `a, b = 1, 2` and `a = b = 3` become one assignment per name
                    if name in values:
                        new: ast.expr = ast.Constant(int(values[name]))
                    elif name in items:
                        new = _with_items(value, items[name])
                    else:
                        new = value
                    tree.body.append(
                        ast.copy_location(
                            ast.Assign(
                                targets=[ast.copy_location(ast.Name(id=name, ctx=ast.Store()), node)],
                                value=ast.copy_location(new, node),
                            ),
                            node,
                        )
                    )
                continue
            tree.body.append(node)
        ast.fix_missing_locations(tree)
        ns: dict[str, Any] = {"__name__": f"warpforge_problem_{self.path.stem}", "__file__": str(self.path)}
        exec(compile(tree, str(self.path), "exec"), ns)
        return ns


def _simple_assignments(node: ast.stmt) -> list[tuple[str, ast.expr]]:
    """(name, expression) for ``a = e``, ``a = b = e`` and ``a, b = e1, e2`` at module level; else []."""
    if not isinstance(node, ast.Assign):
        return []
    if all(isinstance(t, ast.Name) for t in node.targets):
        return [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
    if (
        len(node.targets) == 1
        and isinstance(node.targets[0], ast.Tuple)
        and isinstance(node.value, ast.Tuple)
        and len(node.targets[0].elts) == len(node.value.elts)
        and all(isinstance(t, ast.Name) for t in node.targets[0].elts)
    ):
        return [(t.id, v) for t, v in zip(node.targets[0].elts, node.value.elts) if isinstance(t, ast.Name)]
    return []


def size_globals(module: ModuleType, source: ProblemSource) -> tuple[list[str], list[str]]:
    """(every integer global get_inputs/get_init_inputs depend on, in file order; the ones that are sizes).

    Dependencies are followed through other globals (``input_shape = (num_classes,)`` makes
    ``num_classes`` one); values of at most KEEP_AT_MOST are kept as they are.
    """
    seen: set[str] = set()
    todo = [n for f in ("get_inputs", "get_init_inputs") for n in _code_names(getattr(module, f).__code__)]
    while todo:
        name = todo.pop()
        if name in seen or name not in source.assigned:
            continue
        seen.add(name)
        todo += [n.id for n in ast.walk(source.assigned[name]) if isinstance(n, ast.Name)]
    ints: list[str] = []
    for name in source.assigned:
        if name not in seen:
            continue
        value = getattr(module, name, None)
        if type(value) is int:
            ints.append(name)
        elif isinstance(value, (list, tuple)):
            ints += [_item_key(name, i) for i in _literal_items(source.assigned[name], value)]
    return ints, [n for n in ints if global_value(module, n) > KEEP_AT_MOST]


def _item_key(name: str, index: int) -> str:
    return f"{name}[{index}]"


def _split_key(key: str) -> tuple[str, int | None]:
    """``hidden_layer_sizes[1]`` -> (``hidden_layer_sizes``, 1); a scalar global's key -> (key, None)."""
    if key.endswith("]") and "[" in key:
        name, _, index = key[:-1].partition("[")
        if index.isdigit():
            return name, int(index)
    return key, None


def global_value(module: ModuleType, key: str) -> int:
    """The file's value of a shape key: a scalar global, or one item of a list or tuple global."""
    name, index = _split_key(key)
    value = getattr(module, name)
    return int(value if index is None else value[index])


def _items(expr: ast.expr) -> tuple[list[ast.expr], bool] | None:
    """(item expressions, is a tuple) of a list or tuple global: a literal (``[32768, 32768]``,
    ``(batch_size, 3, 224, 224)``), or an expression of literals only (``[1024] * 16``, evaluated here);
    None for anything that reads names or calls functions (``[w] * depth``, ``list(range(n))``), whose items
    are not the file's to replace one by one."""
    if isinstance(expr, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in expr.elts):
            return None
        return list(expr.elts), isinstance(expr, ast.Tuple)
    if any(isinstance(n, (ast.Name, ast.Call, ast.Attribute)) for n in ast.walk(expr)):
        return None
    try:
        value = eval(compile(ast.Expression(expr), "<size global>", "eval"), {"__builtins__": {}})
    except Exception:  # noqa: BLE001 - an expression that is no list of literals
        return None
    if not isinstance(value, (list, tuple)):
        return None
    return [ast.Constant(v) for v in value], isinstance(value, tuple)


def _literal_items(expr: ast.expr, value: list[Any] | tuple[Any, ...]) -> list[int]:
    """Indices of the integer literals of a list or tuple global that still hold the file's value (a list
    appended to after its assignment is left alone); items that are names are followed as globals."""
    parsed = _items(expr)
    if parsed is None or len(parsed[0]) != len(value):
        return []
    return [
        i
        for i, (e, v) in enumerate(zip(parsed[0], value))
        if isinstance(e, ast.Constant) and type(e.value) is int and type(v) is int and v == e.value
    ]


def _with_items(expr: ast.expr, items: dict[int, int]) -> ast.expr:
    """A list or tuple global's expression with some integer items replaced (the rest as written)."""
    parsed = _items(expr)
    if parsed is None:
        return expr
    elts = [ast.Constant(items[i]) if i in items else e for i, e in enumerate(parsed[0])]
    return ast.Tuple(elts=elts, ctx=ast.Load()) if parsed[1] else ast.List(elts=elts, ctx=ast.Load())


def _candidates(sizes: list[str], bench: Shape) -> list[tuple[Shape, bool]]:
    """Derived shapes before the element budget, each with whether to keep sizes odd while shrinking: small
    primes, a batch of 1 with sizes just above a power of two (257), a size just above 1024 (1031, prime)
    in the last place, and the benchmark shape with its largest size halved (not kept odd) until it fits, so
    sizes that must divide each other, such as channels and GroupNorm's groups, mostly still do. Never
    above the benchmark."""

    def cap(name: str, value: int) -> int:
        return min(int(bench[name]), value)

    out = [
        ({n: cap(n, 13) for n in sizes}, True),
        ({n: cap(n, 1 if i == 0 else 257) for i, n in enumerate(sizes)}, True),
        ({n: cap(n, 1031 if i == len(sizes) - 1 else (3 if i == 0 else 67)) for i, n in enumerate(sizes)}, True),
        ({n: int(bench[n]) for n in sizes}, False),
    ]
    return [(dict(s), odd) for i, (s, odd) in enumerate(out) if s not in [o for o, _ in out[:i]]]


class Work(NamedTuple):
    """What a forward computes, as the interpreter pays for it: multiply-adds (a convolution's counted as its
    gather computes them, every tap of every output), and a convolution's tap steps: output positions x
    kernel taps x groups x tiles of 16 output channels a group, the steps of a direct loop that holds a tile
    of positions x 16 channels (index and mask work per tap, paid once per multiply-add by a depthwise
    convolution, whose 1-channel groups fill no tile)."""

    macs: int
    taps: int

    @property
    def over(self) -> bool:
        return self.macs > CHECK_MACS or self.taps > CHECK_TAPS


def forward_work(model: torch.nn.Module, inputs: list[Any]) -> Work | None:
    """The :class:`Work` of ``model``'s forward on ``inputs`` (meta tensors: nothing computed); None when the
    forward cannot be counted there."""
    from torch.utils.flop_counter import FlopCounterMode

    steps: list[int] = []

    def gather_conv(
        x_shape: list[int], w_shape: list[int], *args: Any, out_shape: list[int] | None = None, **kwargs: Any
    ) -> int:
        # FLOPs (2 per multiply-add): out elements x input channels of a group x taps. torch's own count takes
        # a transposed convolution's input positions, 1/stride^dims of this (1/8 at stride 2 in 3-D).
        assert out_shape is not None
        c_out = max(int(out_shape[1]), 1)
        positions = math.prod(int(d) for d in out_shape) // c_out
        taps = math.prod(int(d) for d in w_shape[2:])
        if args[4]:  # (bias, stride, padding, dilation, transposed, ...): w is [C_in, C_out / G, k...]
            groups = max(c_out // max(int(w_shape[1]), 1), 1)
            c_in_group = int(w_shape[0]) // groups
        else:  # w is [C_out, C_in / G, k...]
            groups = max(int(x_shape[1]) // max(int(w_shape[1]), 1), 1)
            c_in_group = int(w_shape[1])
        steps.append(positions * taps * groups * -(-(c_out // groups) // 16))
        return 2 * positions * c_out * taps * c_in_group

    aten = torch.ops.aten
    counter = FlopCounterMode(
        display=False, custom_mapping={aten.convolution: gather_conv, aten._convolution: gather_conv}
    )
    try:
        with counter, torch.no_grad():
            model(*inputs)
    except Exception:  # noqa: BLE001 - an op without a meta kernel, the user's code at a size it was not written for
        return None
    return Work(int(counter.get_total_flops()) // 2, sum(steps))


def as_run(model: torch.nn.Module) -> torch.nn.Module:
    """The model as KernelBench runs it: as constructed (nn.Module starts in training mode, so a BatchNorm
    normalizes with the batch's own statistics), with every Dropout module off, since a random mask is no
    function a kernel can be matched or checked against."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.eval()
    return model


class KernelBenchProblem:
    """One problem file: its namespaces per shape, models per shape, inputs, reference and derived shapes."""

    def __init__(self, module: ModuleType, path: Path) -> None:
        self.module, self.path = module, path
        self.source = ProblemSource.parse(path)
        self.aliases: dict[str, Any] = dict(getattr(module, ALIAS_ATTR, {}) or {})
        self.int_names, self.size_names = size_globals(module, self.source)
        self.bench: Shape = {n: global_value(module, n) for n in self.int_names}
        # Sizes that change how many weights the model has (layers[2] = 23 ResNet blocks) keep the file's value:
        # the reference splits inputs from weights by the benchmark's count of weights (Task.param_names).
        base = self._input_dims(self.bench)
        if base is not None:
            self.size_names = [
                n
                for n in self.size_names
                if (d := self._input_dims({**self.bench, n: max(1, self.bench[n] // 2)})) is None or len(d) == len(base)
            ]
            # So do hyperparameters that size no input or weight (GroupNorm's group count: halved, every
            # dimension stays): a matched template takes them as constants read from the module at the probe,
            # so probe, check and hidden shapes must share them (hidden shapes keep them: fixed_keys).
            self.size_names = [
                n for n in self.size_names if self._input_dims({**self.bench, n: max(1, self.bench[n] // 2)}) != base
            ]
        self._ns: dict[str, dict[str, Any]] = {}
        self._models: dict[str, torch.nn.Module] = {}
        self._by_signature: dict[tuple[Any, ...], Shape] = {}
        self._lock = threading.RLock()

    # -- shapes as users and templates see them (alias keys) vs. the file's globals -------------------------
    def public(self, values: Shape) -> Shape:
        inverse: dict[str, list[str]] = {}
        for key, name in self.aliases.items():
            if isinstance(name, str):
                inverse.setdefault(name, []).append(key)
        # An integer alias is a key of the matched task that sizes no input (a flag): its value, always.
        out: Shape = {k: v for k, v in self.aliases.items() if isinstance(v, int)}
        for name, v in values.items():
            for key in inverse.get(name, [name]):
                out[key] = int(v)
        # A list alias is a product of globals and literal sizes (a reshaped match, evaluator/judge/match_adapters.py):
        # derived from the globals, which keep their own names so that globals_of recovers them.
        for key, parts in self.aliases.items():
            if isinstance(parts, list):
                size = 1
                for part in parts:
                    size *= int(values[part]) if isinstance(part, str) else int(part)
                out[key] = size
        return out

    def globals_of(self, shape: Shape) -> Shape:
        values: Shape = {}
        for key, v in shape.items():
            name = self.aliases.get(key, key)
            if not isinstance(name, str) or name not in self.bench:
                continue  # descriptive keys only
            if name in values and values[name] != int(v):
                keys = sorted(k for k, n in self.aliases.items() if n == name)
                raise TaskError(
                    f"{self.path.name}: shape {shape_key(shape)} gives {name} two values "
                    f"({values[name]} and {v}): its keys {keys} are one size of this problem"
                )
            values[name] = int(v)
        return {**self.bench, **values}

    # -- per-shape code -------------------------------------------------------------------------------------
    def namespace(self, shape: Shape) -> dict[str, Any]:
        values = self.globals_of(shape)
        key = shape_key(values)
        with self._lock:
            if key not in self._ns:
                self._ns[key] = self.source.namespace(values) if values != self.bench else vars(self.module)
            return self._ns[key]

    def init_inputs(self, shape: Shape) -> tuple[Any, ...]:
        return tuple(self.namespace(shape)["get_init_inputs"]())

    def model(self, shape: Shape) -> torch.nn.Module:
        key = shape_key(self.globals_of(shape))
        with self._lock:
            if key not in self._models:
                ns = self.namespace(shape)
                with _SEED_LOCK:
                    torch.manual_seed(0)
                    self._models[key] = as_run(ns["Model"](*ns["get_init_inputs"]()))
            return self._models[key]

    def draw(self, shape: Shape, seed: int) -> tuple[list[Any], list[torch.Tensor]]:
        """(get_inputs(), the model's state) at ``shape`` under ``seed``: the model first, then the inputs."""
        ns = self.namespace(shape)
        with _SEED_LOCK:
            torch.manual_seed(seed)
            state = list(ns["Model"](*ns["get_init_inputs"]()).state_dict().values())
            values = list(ns["get_inputs"]())
        return values, state

    @staticmethod
    def signature(inputs: tuple[Any, ...] | list[Any]) -> tuple[Any, ...]:
        return tuple(tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__ for v in inputs)

    def remember(self, shape: Shape, inputs: tuple[Any, ...]) -> None:
        with self._lock:
            self._by_signature.setdefault(self.signature(inputs), self.globals_of(shape))

    def model_for(self, inputs: tuple[Any, ...]) -> torch.nn.Module:
        """The model built at the shape these inputs were made for (made here; else the benchmark's)."""
        values = self._by_signature.get(self.signature(inputs))
        return self.model(self.public(values) if values is not None else self.public(self.bench))

    def largest_input(self, values: Shape) -> int:
        """Elements of the largest input at these sizes, counted on meta tensors (nothing allocated)."""
        ns = self.namespace(self.public(values))
        with torch.device("meta"):
            return max((t.numel() for t in _tensors(list(ns["get_inputs"]()))), default=0)

    def _input_dims(self, values: Shape) -> tuple[tuple[int, ...], ...] | None:
        """The dimensions of every input and state tensor at these globals, on meta tensors (nothing
        allocated); None when the file's code does not run there."""
        try:
            with torch.device("meta"):
                ns = self.source.namespace(values)
                state = list(ns["Model"](*ns["get_init_inputs"]()).state_dict().values())
                return tuple(tuple(t.shape) for t in _tensors(list(ns["get_inputs"]()) + state))
        except Exception:  # noqa: BLE001 - the user's code at values it was not written for (or without meta)
            return None

    def _forward_runs(self, values: Shape) -> bool:
        """Whether the file's forward runs at these globals, on meta tensors (nothing computed)."""
        try:
            with torch.device("meta"):
                ns = self.source.namespace(values)
                ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
        except Exception:  # noqa: BLE001 - the user's code at values it was not written for (or without meta)
            return False
        return True

    def fixed_keys(self) -> frozenset[str]:
        """Public shape keys that are no size: integer globals on which no input's or state's dimensions depend
        (``dim`` handed to the constructor as the dimension to reduce, a stride), decided by changing each one
        (+1 and doubled) and looking at the inputs, and the matched task's integer aliases (a flag, ELEM_BYTES).
        Hidden shapes keep these: ``dim = 1`` perturbed to 2 or 4 is another function or none at all. So are
        sizes the forward cannot run without (a bias parameter's broadcast dims, ``bias_shape = (C, 1, 1)``
        added to a convolution's [N, C, H, W]: at 2 it no longer broadcasts)."""
        base = self._input_dims(self.bench)
        fixed: set[str] = {k for k, v in self.aliases.items() if isinstance(v, int)}
        if base is None:  # the constructor cannot run on meta: nothing known, only the aliases' flags
            return frozenset(fixed)
        # a size of 1 the forward needs (a broadcast dim): only those are run, and only where the forward runs
        runs = any(int(self.bench[n]) == 1 for n in self.int_names) and self._forward_runs(self.bench)
        inverse: dict[str, list[str]] = {}
        for key, name in self.aliases.items():
            if isinstance(name, str):
                inverse.setdefault(name, []).append(key)
        for name in self.int_names:
            v = int(self.bench[name])
            bumped = [self._input_dims({**self.bench, name: w}) for w in (v + 1, 2 * v)]
            # A count of layers or blocks (ResNet101's layers = [3, 4, 23, 3]) changes how many weights there
            # are, and Task.param_names is the benchmark's list: hidden shapes keep it too.
            if all(d is None or d == base for d in bumped) or any(
                d is not None and len(d) != len(base) for d in bumped
            ):
                fixed.update(inverse.get(name, [name]))
            elif v == 1 and runs and not any(self._forward_runs({**self.bench, name: w}) for w in (v + 1, 2 * v)):
                fixed.update(inverse.get(name, [name]))
        return frozenset(fixed)

    # -- derived check shapes -------------------------------------------------------------------------------
    def _total_elements(self, values: Shape) -> int | None:
        """Elements of every input and state tensor at these globals (meta tensors); None when unknown."""
        dims = self._input_dims(values)
        return None if dims is None else sum(math.prod(d) for d in dims)

    def _work(self, values: Shape) -> Work | None:
        """The forward's :class:`Work` at these globals (on meta tensors); None when unknown."""
        try:
            with torch.device("meta"):
                ns = self.source.namespace(values)
                model = ns["Model"](*ns["get_init_inputs"]())
                inputs = list(ns["get_inputs"]())
        except Exception:  # noqa: BLE001 - the user's code at values it was not written for (or without meta)
            return None
        return forward_work(model, inputs)

    def _meta_failure(self, values: Shape) -> str | None:
        """Why the file's code fails at these globals, found on meta tensors (shapes only, nothing allocated:
        a pooling window larger than the image, an assert on the image size); None when it runs there."""
        try:
            with torch.device("meta"), torch.no_grad():
                ns = self.source.namespace(values)
                try:
                    model = ns["Model"](*ns["get_init_inputs"]())
                except Exception:  # noqa: BLE001 - an __init__ that reads values (Swin's .item()): built on the CPU
                    with torch.device("cpu"):
                        model = ns["Model"](*ns["get_init_inputs"]())
                    model = model.to("meta")
                model(*ns["get_inputs"]())
        except Exception as exc:  # noqa: BLE001 - the user's code at a size it was not written for
            return _why(exc, self.path)
        return None

    def derive(
        self, reference: Callable[..., Any], make: Callable[[Shape, int], tuple[Any, ...]]
    ) -> tuple[list[Shape], str]:
        """Check shapes within CHECK_ELEMENTS per input on which the file's code runs, and a note when none."""
        if not self.size_names:
            fixed = ", ".join(f"{n}={v}" for n, v in self.bench.items()) or "no integer globals"
            return [], (
                f"check shapes: none derived from {self.path.name} (get_inputs/get_init_inputs read "
                f"no size above {KEEP_AT_MOST} from module globals: {fixed}); only its own shape is checked"
            )
        out: list[Shape] = []
        failures: list[str] = []
        # The smallest sizes tried, their largest input, and why sizes kept larger values (size -> reason).
        floor: tuple[Shape, int, dict[str, str]] | None = None
        meta_probe: bool | None = None  # whether the code runs on meta at the benchmark shape (decided once)
        for start, odd in _candidates(self.size_names, self.bench):
            # The benchmark shape halved (the last candidate) steps around a size the code refuses to halve
            # (MobileNetV1's AvgPool2d(7) needs 224x224 images, Swin asserts them): that size keeps its value,
            # the others go on shrinking, so the problem is still checked below its benchmark shape.
            retreat = not odd
            values = {**self.bench, **start}
            kept: dict[str, str] = {}
            previous: tuple[Shape, str] | None = None  # the values before the last halving, and its size
            for _ in range(400):  # at most log2(benchmark) halvings per size, and one refusal per size
                try:
                    biggest = self.largest_input(values)
                    total = self._total_elements(values) if biggest <= CHECK_ELEMENTS else None
                    fits = biggest <= CHECK_ELEMENTS and (total is None or total <= TOTAL_ELEMENTS)
                    # within the elements but over the work: the sizes still large enough to halve go on
                    # shrinking (none: this is as small as the work cap goes)
                    heavy: list[str] = []
                    if fits and (work := self._work(values)) is not None and work.over:
                        heavy = [n for n in self.size_names if n not in kept and values[n] > KEEP_AT_MOST]
                    if fits and not heavy:
                        inputs = make(self.public(values), 0)
                        outs = _tensors(reference(*inputs))
                        if outs and all(torch.isfinite(o).all() for o in outs if o.is_floating_point()):
                            if self.public(values) not in out:
                                out.append(self.public(values))
                        break
                except Exception as exc:  # noqa: BLE001 - the user's code at a size it was not written for
                    why = _why(exc, self.path)
                    if retreat and previous is not None:
                        failed, (values, name) = values, previous
                        kept[name] = f"{name} stays {values[name]}: the code fails at {failed[name]} ({why})"
                        previous = None
                        continue
                    if odd or not out:
                        failures.append(f"{shape_key({n: values[n] for n in self.size_names})} ({why})")
                    break
                open_sizes = heavy or [n for n in self.size_names if n not in kept and values[n] > 1]
                if not open_sizes:
                    if floor is None or biggest < floor[1]:
                        floor = (dict(values), biggest, dict(kept))
                    break
                name = max(open_sizes, key=lambda n: values[n])
                half = max(1, values[name] // 2)
                new = {**values, name: half | 1 if odd else half}  # odd: never a power of two above 1
                single = self._one_per_divisor(values, name, new[name])
                if single is not None:
                    kept[name] = single
                    continue
                if heavy:
                    refused = self._meta_failure(new) or self._meta_failure({**new, name: max(1, new[name] // 2)})
                    if refused is not None:
                        kept[name] = (
                            f"{name} stays {values[name]} under the work cap: the code fails at "
                            f"{new[name]} or half of it ({refused})"
                        )
                        continue
                elif retreat:
                    if meta_probe is None:
                        meta_probe = self._meta_failure(self.bench) is None
                    refused = self._meta_failure(new) if meta_probe else None
                    if refused is not None:
                        kept[name] = f"{name} stays {values[name]}: the code fails at {new[name]} ({refused})"
                        continue
                    previous = (values, name)
                values = new
        note = ""
        if not out and floor is not None:
            return self._at_floor(floor, reference, make)
        # A candidate whose sizes all reached KEEP_AT_MOST may still be over the work (8 channels x 8^3 under a
        # 3x5x7 kernel: 9e7 MACs); while another is within it, the heavy one is left out.
        works = [self._work(self.globals_of(s)) for s in out]
        light = [s for s, w in zip(out, works) if w is None or not w.over]
        known = [(w, s) for s, w in zip(out, works) if w is not None]
        out = light or ([min(known, key=lambda ws: ws[0].macs)[1]] if known else out)  # else the lightest
        if failures:
            note = f"check shapes: {self.path.name} could not run at {'; '.join(failures[:3])}" + (
                f" (derived sizes kept: {', '.join(shape_key(s) for s in out)})"
                if out
                else "; only its own shape is checked"
            )
        return out, note

    def _one_per_divisor(self, values: Shape, name: str, value: int) -> str | None:
        """Why ``name`` stays at its value rather than going to ``value``: a kept size (one sizing no tensor,
        GroupNorm's group count) must divide it (the code fails at a non-multiple) and ``value`` would leave
        fewer than 2 per divisor: 512 features in 512 groups normalize each to 0, every output the bias."""
        old = int(values[name])
        for kept in self.int_names:
            k = int(values[kept])
            if kept in self.size_names or k < 2 or old % k or value >= 2 * k:
                continue
            if self._meta_failure({**values, name: old + 1}) is not None:
                return f"{name} stays {old}: {kept} = {k} must divide it, at least twice"
        return None

    def _at_floor(
        self,
        floor: tuple[Shape, int, dict[str, str]],
        reference: Callable[..., Any],
        make: Callable[[Shape, int], tuple[Any, ...]],
    ) -> tuple[list[Shape], str]:
        """The smallest sizes the code runs at, their largest input still over CHECK_ELEMENTS: checked there
        up to FLOOR_ELEMENTS (the interpreter's minutes, not hours), with a note saying why they are larger
        than the budget; past it, a note naming those sizes and the bytes."""
        values, biggest, kept = floor
        sizes = shape_key({n: values[n] for n in self.size_names})
        why_big = "; ".join(kept.values()) or "dimensions written as literals in get_inputs set it"
        mb = f"{biggest * 4 / 1e6:.1f} MB in float32"
        total = self._total_elements(values)
        if total is not None and total > TOTAL_ELEMENTS:
            return [], (
                f"check shapes: none derived from {self.path.name}: at the smallest sizes ({sizes}) its "
                f"inputs and weights hold {total} elements ({total * 4 / 1e9:.2f} GB in float32, over the "
                f"{TOTAL_ELEMENTS} allowed on the CPU; {why_big}); only its own shape is checked"
            )
        if biggest > FLOOR_ELEMENTS:
            return [], (
                f"check shapes: none derived from {self.path.name}: at the smallest sizes ({sizes}) the "
                f"largest input has {biggest} elements ({mb}, over the {FLOOR_ELEMENTS} the CPU "
                f"checks; {why_big}); only its own shape is checked"
            )
        try:
            outs = _tensors(reference(*make(self.public(values), 0)))
            runs = bool(outs) and all(torch.isfinite(o).all() for o in outs if o.is_floating_point())
            why = "its output is not finite"
        except Exception as exc:  # noqa: BLE001 - the user's code at a size it was not written for
            runs, why = False, _why(exc, self.path)
        if not runs:
            return [], (
                f"check shapes: none derived from {self.path.name}: at the smallest sizes ({sizes}) the "
                f"largest input has {biggest} elements ({mb}; {why_big}) and the code fails there ({why}); "
                "only its own shape is checked"
            )
        return [self.public(values)], (
            f"check shapes: at the smallest sizes ({sizes}) the largest input of {self.path.name} still has "
            f"{biggest} elements ({mb}), over the {CHECK_ELEMENTS} budget ({why_big}): checked there"
        )


def _why(exc: BaseException, path: Path | None = None) -> str:
    """One short line for a failure of the user's code: the innermost error (make_inputs wraps it in a
    TaskError whose first 80 characters were only the shape), cut at 100 characters; a bare ``assert`` says
    nothing, so its line of the problem file is quoted (``assert channels % groups == 0``)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).splitlines()[0][:100] if str(exc).strip() else ""
    if not text and path is not None:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        if frames and frames[-1].line:
            text = f"line {frames[-1].lineno}: {frames[-1].line.strip()[:100]}"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# Import names whose pip package is spelled otherwise; any other missing module is installed by its own name.
PIP_NAMES = {
    "cv2": "opencv-python",
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
}


def missing_import(path: Path, exc: BaseException) -> str | None:
    """One line for a problem file that imports a module which is not installed (``from einops import
    rearrange`` without einops), naming the package to install; None for any other import failure."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:  # the loader may have wrapped it (raise ... from)
        seen.add(id(cause))
        if isinstance(cause, ModuleNotFoundError) and cause.name:
            top = cause.name.split(".")[0]
            return f"{Path(path).name} imports {top}, which is not installed: pip install {PIP_NAMES.get(top, top)}"
        cause = cause.__cause__ or cause.__context__
    return None


def _cast(v: Any, dtype: torch.dtype, device: str) -> Any:
    if not isinstance(v, torch.Tensor):
        return v
    return v.to(dtype=dtype, device=device) if v.is_floating_point() else v.to(device)


def _adversarial(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Derived versions of one random floating input (kept only where the reference stays finite)."""
    x = x.clone()
    last = x.shape[-1] if x.dim() else 1
    return {
        "negated": -x,
        "signed": x * 2 - x.abs().max().clamp(min=1e-3),  # rand in [0, 1) becomes [-m, 2 - m): both signs
        "large_magnitude": x * 1e4,
        "tiny_magnitude": x * 1e-4,
        "ties": (x * 4).round() / 4,  # a handful of repeated values per row
        "constant_rows": x[..., :1].expand_as(x).clone() if x.dim() and last else x,
    }


def problem_dtype(module: ModuleType) -> torch.dtype:
    """The dtype a problem is judged in: fp16 or bf16 when every floating input ``get_inputs()`` makes is (drawn on
    meta tensors: nothing allocated), else fp32. A kernel written for fp16 (Triton's matmul tutorial) is judged in
    fp16, with the tolerances every built-in task has for it; its weights are cast alike."""
    try:
        with torch.device("meta"):
            sample = _tensors(list(module.get_inputs()))
    except Exception:  # noqa: BLE001 - an input drawn from values (.item()) cannot be drawn on meta: fp32 as before
        return torch.float32
    kinds = {t.dtype for t in sample if t.is_floating_point()}
    return kinds.pop() if len(kinds) == 1 and kinds <= {torch.float16, torch.bfloat16} else torch.float32


def kernelbench_task(module: ModuleType, path: Path) -> Task:
    """Adapt a KernelBench module to the task contract."""
    try:
        problem = KernelBenchProblem(module, path)
    except (AttributeError, SyntaxError, OSError) as exc:
        raise TaskError(f"{path}: not a KernelBench problem file ({type(exc).__name__}: {exc})") from exc
    try:
        try:
            with torch.device("meta"):  # names only: the benchmark shape's weights are never allocated
                param_names = tuple(module.Model(*module.get_init_inputs()).state_dict())
        except Exception:  # noqa: BLE001 - an __init__ that reads values (.item()) cannot run on meta
            param_names = tuple(module.Model(*module.get_init_inputs()).state_dict())
    except Exception as exc:
        raise TaskError(f"{path}: Model(*get_init_inputs()) failed: {type(exc).__name__}: {exc}") from exc
    n_params = len(param_names)
    n_inputs: dict[str, int] = {}

    def reference(*inputs: Any) -> Any:
        split = len(inputs) - n_params
        model = problem.model_for(inputs)
        # A training-mode BatchNorm updates its running statistics (and counter) in place: on copies, so the
        # case's own tensors stay as drawn
        buffers = {name for name, _ in model.named_buffers()}
        state = {n: t.clone() if n in buffers else t for n, t in zip(param_names, inputs[split:])}
        with torch.no_grad():
            return torch.func.functional_call(model, state, tuple(inputs[:split]))

    def make_inputs(shape: Shape, dtype: torch.dtype, seed: int, device: str) -> tuple[Any, ...]:
        try:
            values, state = problem.draw(shape, seed)
        except TaskError:
            raise
        except Exception as exc:
            raise TaskError(
                f"{path.name}: get_inputs() at {shape_key(shape)} failed: {type(exc).__name__}: {exc}"
            ) from exc
        n_inputs[shape_key(shape)] = len(values)
        out = tuple(_cast(v, dtype, device) for v in values + state)
        problem.remember(shape, out)
        return out

    def adversarial_inputs(shape: Shape, dtype: torch.dtype, seed: int, device: str) -> dict[str, tuple[Any, ...]]:
        """Each floating input of get_inputs() negated, given both signs, scaled by 1e4 and 1e-4, rounded to
        ties and made constant along rows, all inputs at once; kept where the reference stays finite."""
        base = make_inputs(shape, dtype, seed, "cpu")
        n = n_inputs[shape_key(shape)]
        floating = [i for i, v in enumerate(base[:n]) if isinstance(v, torch.Tensor) and v.is_floating_point()]
        if not floating:
            return {}
        kinds = {i: _adversarial(base[i]) for i in floating}
        out: dict[str, tuple[Any, ...]] = {}
        for kind in kinds[floating[0]]:
            inputs = tuple(kinds[i][kind].to(dtype) if i in kinds else v for i, v in enumerate(base))
            try:
                ref = _tensors(
                    reference(
                        *tuple(
                            v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs
                        )
                    )
                )
                # in a half dtype the problem's own output can overflow (an fp16 matmul of x1e4 inputs is inf in
                # torch too): such inputs judge no implementation
                if dtype in (torch.float16, torch.bfloat16):
                    ref += _tensors(reference(*inputs))
            except Exception:  # noqa: BLE001 - e.g. a problem defined only on positive inputs
                continue
            if ref and all(torch.isfinite(r).all() for r in ref if r.is_floating_point()):
                out[kind] = tuple(_cast(v, dtype, device) for v in inputs)
        return out

    def on_meta(shape: Shape, dtype: torch.dtype, count: Callable[[tuple[Any, ...]], float]) -> float:
        # The benchmark shape is 0.3-8.6 GB per input: count on meta tensors, which hold no data.
        try:
            with torch.device("meta"):
                ns = problem.source.namespace(problem.globals_of(shape))
                model = ns["Model"](*ns["get_init_inputs"]())
                inputs = tuple(
                    _cast(v, dtype, "meta") for v in list(ns["get_inputs"]()) + list(model.state_dict().values())
                )
            return count(inputs)
        except Exception:  # noqa: BLE001 - an op without a meta kernel: count on real tensors
            return count(make_inputs(shape, dtype, 0, "cpu"))

    def flops(shape: Shape, dtype: torch.dtype) -> float:
        from torch.utils.flop_counter import FlopCounterMode

        def count(inputs: tuple[Any, ...]) -> float:
            counter = FlopCounterMode(display=False)
            with counter:
                model = problem.model(shape) if inputs and _tensors(list(inputs))[0].device.type != "meta" else None
                split = len(inputs) - n_params
                if model is None:
                    ns = problem.source.namespace(problem.globals_of(shape))
                    with torch.device("meta"):
                        model = ns["Model"](*ns["get_init_inputs"]())
                torch.func.functional_call(model, dict(zip(param_names, inputs[split:])), tuple(inputs[:split]))
            return float(counter.get_total_flops())

        return on_meta(shape, dtype, count)

    def bytes_moved(shape: Shape, dtype: torch.dtype) -> float:
        def count(inputs: tuple[Any, ...]) -> float:
            split = len(inputs) - n_params
            ns = problem.source.namespace(problem.globals_of(shape))
            meta = _tensors(list(inputs))[0].device.type == "meta" if _tensors(list(inputs)) else False
            with torch.device("meta") if meta else torch.device("cpu"), torch.no_grad():
                model = ns["Model"](*ns["get_init_inputs"]()) if meta else problem.model(shape)
                outs = _tensors(
                    torch.func.functional_call(model, dict(zip(param_names, inputs[split:])), tuple(inputs[:split]))
                )
            return float(sum(t.numel() * t.element_size() for t in _tensors(list(inputs)) + outs))

        return on_meta(shape, dtype, count)

    bench = problem.public(problem.bench)
    check_shapes, note = problem.derive(reference, lambda s, seed: make_inputs(s, torch.float32, seed, "cpu"))
    if not problem.size_names and problem.bench == {}:
        with torch.device("meta"):  # names only: a literal 8 GB input is never allocated
            sample = list(module.get_inputs())
        bench = {f"x{i}_d{j}": int(d) for i, t in enumerate(_tensors(sample)) for j, d in enumerate(t.shape)}
    matched = getattr(module, MATCH_ATTR, "")
    if matched:
        note = "; ".join(
            n
            for n in (
                f"searched with the templates of the built-in task {matched}, judged by "
                f"{path.name}'s own reference and inputs",
                note,
            )
            if n
        )
    if note:
        NOTES[str(path)] = note
    else:
        NOTES.pop(str(path), None)
    doc = (module.__doc__ or module.Model.__doc__ or "").strip().splitlines()
    return Task(
        name=path.stem,
        description=doc[0] if doc else f"KernelBench problem {path.stem}",
        path=path,
        reference=reference,
        make_inputs=make_inputs,
        shapes=[bench],
        check_shapes=check_shapes or [bench],
        dtypes=[problem_dtype(module)],
        flops=flops,
        bytes_moved=bytes_moved,
        builtin=False,
        param_names=param_names,
        init_inputs=problem.init_inputs,
        model=problem.model,
        adversarial_inputs=adversarial_inputs,
        fixed_keys=problem.fixed_keys(),
    )
