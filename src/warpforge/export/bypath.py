"""A PyTorch-module problem (KernelBench format) as a standalone task module, so its winner exports like a task.

``warpforge run problem.py`` searches a by-path problem (kernels/kernelbench.py): shapes are the file's
integer globals (under a matched built-in task's keys, ``M``/``N``, when the matcher chose its templates),
a case is ``get_inputs()`` followed by the state of ``Model(*get_init_inputs())`` drawn under one seed,
and the reference is the model with that state loaded. The exported package must run without warpforge,
so :func:`task_module_source` writes that contract as Python: the problem file the campaign searched,
verbatim, followed by a generated tail defining ``NAME``, ``SHAPES``, ``CHECK_SHAPES``, ``DTYPES``,
``TOLERANCES``, ``make_inputs``, ``reference``, ``flops`` and ``bytes_moved`` on top of it. The tail
re-runs the problem's code per shape (its size globals set to the shape's values after every top-level
statement, so derived globals such as ``input_shape = (batch_size, dim)`` follow), as the by-path loader
does; the export tests check that both give the same inputs, outputs and counts.

The op's signature is (get_inputs()..., state tensors...): what the winning variant's ``launch`` takes
(the matcher permutes a template's arguments to the problem's order).

Refused (one line, :class:`~warpforge.export.source.SourceError`): a winner that is a ``ModelNew`` module
(no ``launch`` to wrap in a custom op); a problem that defines a name the tail defines; a campaign whose
searched file is gone and cannot be matched again to the same copy.

Example::

    >>> text = task_module_source(get_task("kb/19_ReLU.py"))  # doctest: +SKIP
    >>> "def make_inputs(shape, dtype, seed, device):" in text  # doctest: +SKIP
    True
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import inspect
import keyword
import re
import sys
from dataclasses import replace
from pathlib import Path, PurePath
from typing import Any

from warpforge.export.op_plan import OpPlan, ReaderLike
from warpforge.export.source import SourceError, shape_map
from warpforge.kernels.kernelbench import ALIAS_ATTR
from warpforge.kernels.taskdef import Task, dtype_name

MARK = "# ---- warpforge export: the task contract of the problem above (generated; the problem is unchanged) ----"
# Names the tail defines at module level: a problem that defines one would have it replaced under its code.
TAIL_NAMES = (
    "NAME",
    "DESCRIPTION",
    "SHAPES",
    "CHECK_SHAPES",
    "DTYPES",
    "TOLERANCES",
    "make_inputs",
    "reference",
    "flops",
    "bytes_moved",
)
# Argument names the op module's body uses itself (export/templates/op.py.j2): an input may not shadow them.
RESERVED = {"inputs", "gpu", "params", "torch", "triton", "grad_out", "ctx", "out", "saved", "values", "result"}

# The tail, formatted with the literals of one problem. Helpers are prefixed _wf_ so no problem name is hit.
TAIL = '''

{mark}
import ast as _wf_ast
import threading as _wf_threading

import torch as _wf_torch

_WF_MARK = {mark!r}  # the line above: what precedes it is the problem's own code
NAME = {name!r}
DESCRIPTION = {description!r}
# The problem's benchmark shape (its file's values) and the smaller shapes warpforge verified the kernel on.
SHAPES = {shapes!r}
CHECK_SHAPES = {check_shapes!r}
DTYPES = [{dtypes}]
TOLERANCES = {{{tolerances}}}
# A shape key -> the problem's global it sets ("name[i]": an item of a list or tuple global); other keys
# (a product of globals, a flag of the matched task) describe the shape and set nothing.
_WF_KEYS = {keys!r}
_WF_BENCH = {bench!r}  # the file's values of those globals
# A shape key -> (argument index, dimension, rank) of an argument that carries it: the reference reads a
# call's shape from its arguments to build the model at that shape.
_WF_DIMS = {dims!r}
_WF_STATE = {state!r}  # Model(*get_init_inputs()).state_dict() names: the trailing arguments
_WF_LOCK = _wf_threading.RLock()
_WF_NS = {{}}
_WF_MODELS = {{}}


def _wf_globals(shape):
    values = dict(_WF_BENCH)
    for key, v in shape.items():
        name = _WF_KEYS.get(key, key)
        if isinstance(name, str) and name in values:
            values[name] = int(v)
    return values


def _wf_force(ns, values):
    for key, v in values.items():
        name, _, index = key[:-1].partition("[") if key.endswith("]") else (key, "", "")
        if name not in ns:
            continue
        if not index:
            ns[name] = v
        elif ns[name][int(index)] != v:
            items = list(ns[name])
            items[int(index)] = v
            ns[name] = type(ns[name])(items)


def _wf_namespace(shape):
    """The problem's code at a shape: its statements re-run with its size globals set to the shape's values."""
    values = _wf_globals(shape)
    if values == _WF_BENCH:
        return globals()
    key = tuple(sorted(values.items()))
    with _WF_LOCK:
        if key not in _WF_NS:
            loader = globals().get("__loader__")
            text = loader.get_source(__name__) if hasattr(loader, "get_source") else open(__file__).read()
            ns = {{"__name__": __name__ + "_at_shape", "__file__": globals().get("__file__")}}
            for node in _wf_ast.parse(text[: text.index(_WF_MARK)]).body:
                exec(compile(_wf_ast.Module(body=[node], type_ignores=[]), "<problem>", "exec"), ns)
                _wf_force(ns, values)
            _WF_NS[key] = ns
        return _WF_NS[key]


def _wf_cast(v, dtype, device):
    if not isinstance(v, _wf_torch.Tensor):
        return v
    return v.to(dtype=dtype, device=device) if v.is_floating_point() else v.to(device)


def make_inputs(shape, dtype, seed, device):
    """get_inputs() at this shape, then the state of Model(*get_init_inputs()), both drawn under ``seed``."""
    ns = _wf_namespace(shape)
    with _WF_LOCK, _wf_torch.random.fork_rng(devices=[]):
        _wf_torch.manual_seed(seed)
        state = list(ns["Model"](*ns["get_init_inputs"]()).state_dict().values())
        values = list(ns["get_inputs"]())
    return tuple(_wf_cast(v, dtype, device) for v in values + state)


def _wf_model(shape, device):
    ns = _wf_namespace(shape)
    key = (tuple(sorted(_wf_globals(shape).items())), str(device))
    with _WF_LOCK:
        if key not in _WF_MODELS:
            with _wf_torch.random.fork_rng(devices=[]):
                _wf_torch.manual_seed(0)
                model = ns["Model"](*ns["get_init_inputs"]())
                for m in model.modules():  # as warpforge judged it: as constructed, dropout off
                    if isinstance(m, _wf_torch.nn.modules.dropout._DropoutNd):
                        m.eval()
                _WF_MODELS[key] = model.to(device)
        return _WF_MODELS[key]


def _wf_call(args, state):
    """Model(*get_init_inputs()) at the shape the arguments have, with their state loaded, applied to them."""
    every = list(args) + list(state)
    shape = {{k: int(every[i].shape[d]) for k, (i, d, rank) in _WF_DIMS.items()
             if i >= 0 and isinstance(every[i], _wf_torch.Tensor) and every[i].dim() == rank}}
    device = next((t.device for t in every if isinstance(t, _wf_torch.Tensor)), "cpu")
    model = _wf_model(shape, device)
    buffers = {{name for name, _ in model.named_buffers()}}  # updated in place by a training BatchNorm: copies
    loaded = {{n: t.clone() if n in buffers else t for n, t in zip(_WF_STATE, state)}}
    with _wf_torch.no_grad():
        return _wf_torch.func.functional_call(model, loaded, tuple(args))


def reference({signature}):
    return _wf_call(({args}), ({state_args}))


def _wf_count(shape, dtype):
    """(flops, bytes of the arguments and outputs) of the model at a shape, counted on meta tensors."""
    from torch.utils.flop_counter import FlopCounterMode

    ns = _wf_namespace(shape)
    counter = FlopCounterMode(display=False)
    with _wf_torch.device("meta"), _wf_torch.no_grad():
        model = ns["Model"](*ns["get_init_inputs"]())
        args = [_wf_cast(v, dtype, "meta") for v in ns["get_inputs"]()]
        state = {{k: _wf_cast(v, dtype, "meta") for k, v in model.state_dict().items()}}
        with counter:
            out = _wf_torch.func.functional_call(model, state, tuple(args))
    tensors = [t for t in args + list(state.values()) + list(out if isinstance(out, (tuple, list)) else [out])
               if isinstance(t, _wf_torch.Tensor)]
    return float(counter.get_total_flops()), float(sum(t.numel() * t.element_size() for t in tensors))


def flops(shape, dtype):
    return _wf_count(shape, dtype)[0]


def bytes_moved(shape, dtype):
    return _wf_count(shape, dtype)[1]
'''


def op_name(task_name: str) -> str:
    """The op's name for a problem file's stem: a Python identifier (``19_ReLU`` -> ``op_19_ReLU``), since it names
    the package's module and ``torch.ops.NS.<op>``."""
    out = re.sub(r"\W", "_", task_name)
    return out if out.isidentifier() and not keyword.iskeyword(out) and out == task_name else "op_" + out


def _identifier(name: str, taken: set[str]) -> str:
    out = re.sub(r"\W", "_", name) or "arg"
    if out[0].isdigit() or keyword.iskeyword(out) or out.startswith("_wf_"):
        out = "a_" + out
    while out in taken or out in RESERVED:
        out += "_"
    taken.add(out)
    return out


def _argument_names(task: Task, n_args: int, module: Any) -> tuple[list[str], list[str]]:
    """(get_inputs() names from Model.forward's parameters, else x0, x1...; state names from state_dict)."""
    params = [
        p.name
        for p in inspect.signature(module.Model.forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ][1:]
    given = params[:n_args] if len(params) >= n_args else [f"x{i}" for i in range(n_args)]
    taken: set[str] = set()
    args = [_identifier(n, taken) for n in given]
    return args, [_identifier(n, taken) for n in task.param_names]


def _tuple_text(names: list[str]) -> str:
    return ", ".join(names) + ("," if len(names) == 1 else "")


def task_module_source(task: Task, module: Any, problem_text: str) -> str:
    """The standalone task module of a by-path problem: ``problem_text`` verbatim, then the contract tail."""
    tree = ast.parse(problem_text)
    defined = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    clash = sorted(defined & set(TAIL_NAMES))
    if clash:
        raise SourceError(
            f"{task.name}: {task.path.name} defines {', '.join(clash)}, which the exported task module "
            "defines for the task contract: rename them in the problem file and run it again"
        )
    n_state = len(task.param_names)
    sample = task.make_inputs(task.check_shapes[0], task.dtypes[0], 0, "cpu")
    args, state = _argument_names(task, len(sample) - n_state, module)
    aliases = dict(getattr(module, ALIAS_ATTR, {}) or {})
    dims = {k: tuple(v) for k, v in sorted(shape_map(task).items())}
    bench_public = task.shapes[0]
    keys: dict[str, Any] = {k: aliases.get(k, k) for k in bench_public}
    problem = _problem(task)
    bench = dict(problem.bench)
    text = TAIL.format(
        mark=MARK,
        name=op_name(task.name),
        description=task.description,
        shapes=[dict(s) for s in task.shapes],
        check_shapes=[dict(s) for s in task.check_shapes],
        dtypes=", ".join(f"_wf_torch.{dtype_name(d)}" for d in task.dtypes),
        tolerances=", ".join(f"_wf_torch.{dtype_name(d)}: {task.tolerance(d)!r}" for d in task.dtypes),
        keys={k: v for k, v in keys.items() if isinstance(v, str) and v in bench},
        bench=bench,
        dims=dims,
        state=tuple(task.param_names),
        signature=", ".join(args + state),
        args=_tuple_text(args),
        state_args=_tuple_text(state),
    )
    return problem_text.rstrip("\n") + "\n" + text


def _problem(task: Task) -> Any:
    """The by-path loader's problem object behind ``task`` (its size globals and their file values)."""
    owner = getattr(task.model, "__self__", None)
    if owner is None or not hasattr(owner, "bench"):
        raise SourceError(f"{task.name}: not a PyTorch-module problem loaded from a file")
    return owner


class _TextLoader(importlib.abc.InspectLoader):
    """Loads a module from text held in memory; ``get_source`` serves the tail's re-run of the problem."""

    def __init__(self, text: str) -> None:
        self.text = text

    def get_source(self, fullname: str) -> str:
        return self.text


def load_task_text(text: str, name: str, path: Path) -> Task:
    """The generated module, imported from memory, as a warpforge Task (``path`` names its origin only)."""
    from warpforge.kernels.task import contract_task

    loader = _TextLoader(text)
    spec = importlib.util.spec_from_loader("warpforge_export_task_" + re.sub(r"\W", "_", name), loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    exec(compile(text, f"<warpforge export: {name}>", "exec"), module.__dict__)
    return contract_task(module, path, builtin=False)


def searched_file(reader: ReaderLike, task: Task, campaign: str | None) -> Path:
    """The problem file the winner's campaign searched: a matched copy (the problem plus the matched task's shape
    keys, evaluator/judge/matching.py) or the problem itself. A matched copy that was removed from the cache is
    written again from the problem; refused if that gives another copy (the problem or templates changed)."""
    row = reader.campaign(campaign) if campaign else None
    if row is None:
        return task.path
    ran = [Path(t) for t in row.tasks if PurePath(t).stem == task.name]
    if not ran or ran[0].is_file():
        return ran[0] if ran else task.path
    from warpforge.evaluator.judge.matching import find_match, matched_files
    from warpforge.kernels.task import load_task_file
    from warpforge.preflight import matched_root

    gone = f"{task.name}: campaign {campaign} searched {ran[0]}, which no longer exists"
    if not ran[0].resolve().is_relative_to(matched_root().resolve()):
        raise SourceError(f"{gone}: restore it, or run the problem again and export that campaign")
    originals = [Path(t) for t in (row.spec or {}).get("task_files", ()) if PurePath(t).stem == task.name]
    problem = load_task_file(next((p for p in originals if p.is_file()), task.path))
    match, _ = find_match(problem)
    copy = matched_files(problem, match, matched_root())[0] if match is not None else None
    if copy is None or copy.resolve() != ran[0].resolve():
        raise SourceError(
            f"{gone}, and {problem.path} no longer matches to the same copy (the problem or the "
            f"templates changed): run `warpforge run {problem.path}` again and export that"
        )
    return copy


def standalone_plan(reader: ReaderLike, plan: OpPlan) -> OpPlan:
    """``plan`` of a by-path problem with its task replaced by the generated standalone task module."""
    from warpforge.kernels.task import load_task_file

    if not any(isinstance(n, ast.FunctionDef) and n.name == "launch" for n in ast.parse(plan.variant_source).body):
        raise SourceError(
            f"{plan.task.name}: the winner {plan.variant_name} ({plan.variant_hash[:12]}) defines no "
            "launch function (a ModelNew module replaces the whole model): export wraps launch(*inputs) "
            "in a custom op; search Triton variants with launch (the template proposer, or "
            "--variant-file) to export one"
        )
    path = searched_file(reader, plan.task, plan.info.get("campaign"))
    task = load_task_file(path) if path != plan.task.path else plan.task
    text = task_module_source(task, _problem(task).module, path.read_text())
    op = op_name(task.name)
    return replace(plan, task=load_task_text(text, op, path), task_source=text, info={**plan.info, "op": op})
