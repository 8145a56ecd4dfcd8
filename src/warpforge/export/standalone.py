"""A task module as an exported package ships it: self-contained, every warpforge definition it uses written in.

Several built-in task modules build their member from shared warpforge helpers (``conv`` imports
``kernels/fx_chain.py``'s steps, ``kernels/channel_steps.py`` and ``taskdef.Member``; ``conv_transpose`` the
``conv`` task module itself). An exported package must run where warpforge is not installed, so
:func:`standalone_source` rewrites such a module at export time from the sources that are installed now:

- the definitions the task's contract needs (``reference``, ``make_inputs``, the shapes, ``MEMBERS``, ...; see
  :data:`CONTRACT`) are kept verbatim, comments included; what only the matcher reads (``propose_members`` and
  the helpers only it calls, ``MATCH_PROBES``, ...) is left out;
- each ``from warpforge.X import a, b`` is replaced by the top-level definitions of ``X`` that ``a`` and ``b``
  need, transitively (``apply_steps`` brings ``STEP_OPS`` and ``PARAM_OPS``, generated from the one source of
  the step vocabulary, never a copy kept in this repository), each block headed by the module it came from;
- ``from warpforge.kernels.tasks import conv`` (a module) becomes the definitions its ``conv.X`` reads need,
  a name the task defines too (``DTYPES``) written in as ``_conv_DTYPES``.

A module that imports no warpforge is shipped as it is. What comes out is checked by
:func:`~warpforge.export.source.check_standalone`; a definition that cannot be written in (a name another
definition binds as a local, a star import) is a one-line :class:`~warpforge.export.source.SourceError`.

Example::

    >>> src = "from warpforge.kernels.fx_chain import MAX_STEPS\\nNAME = 'x'\\nSHAPES = [MAX_STEPS]\\n"
    >>> out = standalone_source(src, "x")
    >>> "import warpforge" in out, "MAX_STEPS = 6" in out
    (False, True)
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

from warpforge.export.source import SourceError

# What an exported package (and a reader of the task's contract) may read from a task module: the contract
# of kernels/task.py, less what only the matcher reads (``propose_members``, ``MATCH_PROBES``, ``UNIT_DIMS_AT``,
# ``FILL_INPUTS``).
CONTRACT = (
    "NAME",
    "DESCRIPTION",
    "reference",
    "make_inputs",
    "SHAPES",
    "CHECK_SHAPES",
    "SMALL_SHAPES",
    "DTYPES",
    "TOLERANCES",
    "flops",
    "bytes_moved",
    "adversarial_inputs",
    "ACCUMULATION",
    "PRECISION_SHAPES",
    "precision_inputs",
    "GRAD_INPUTS",
    "GRAD_TOLERANCES",
    "grad_scales",
    "MEMBERS",
    "DEFAULT_MEMBER",
    "KIND",
    "OPTIONAL_INPUTS",
)
ROOT = "warpforge"


def _is_ours(module: str | None) -> bool:
    return bool(module) and (module == ROOT or str(module).startswith(ROOT + "."))


def _bound(node: ast.stmt) -> set[str]:
    """Names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    names: set[str] = set()
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, (ast.AnnAssign, ast.AugAssign))
        else []
    )
    for t in targets:
        names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):  # names bound inside a block at module level
        names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        names |= {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names


def _first_line(lines: list[str], node: ast.stmt) -> int:
    """1-based first line of a statement with its decorators and the comment lines right above it."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first


@dataclass
class _Module:
    """One warpforge module being written in: its parsed source and the statements chosen from it."""

    name: str
    text: str
    tree: ast.Module
    chosen: set[int] = field(default_factory=set)  # indices into tree.body
    renames: dict[str, str] = field(default_factory=dict)

    @property
    def stem(self) -> str:
        return self.name.rsplit(".", 1)[-1]


def _module_source(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise SourceError(f"{name} is no Python source file warpforge can write into an exported task")
    return Path(spec.origin).read_text()


class _Inliner:
    """Chooses, per warpforge module, the top-level statements a set of names needs (transitively)."""

    def __init__(self) -> None:
        self.modules: dict[str, _Module] = {}
        self.order: list[str] = []  # modules in the order their definitions must appear (dependencies first)

    def module(self, name: str) -> _Module:
        if name not in self.modules:
            text = _module_source(name)
            self.modules[name] = _Module(name, text, ast.parse(text))
        return self.modules[name]

    def need(self, module: str, names: set[str]) -> None:
        mod = self.module(module)
        body = mod.tree.body
        binders: dict[str, list[int]] = {}
        for i, node in enumerate(body):
            for n in _bound(node):
                binders.setdefault(n, []).append(i)
        missing = sorted(n for n in names if n not in binders)
        if missing:
            raise SourceError(f"{module} defines no {', '.join(missing)}: the task's import cannot be written in")
        todo = list(names)
        seen: set[str] = set()
        while todo:
            n = todo.pop()
            if n in seen or n not in binders:
                continue
            seen.add(n)
            for i in binders[n]:
                node = body[i]
                if isinstance(node, ast.ImportFrom) and _is_ours(node.module) and node.level == 0:
                    mod.chosen.add(i)
                    self._import_from(node, {n})  # one import statement, a closure per name it brings
                    continue
                if i in mod.chosen:
                    continue
                mod.chosen.add(i)
                if isinstance(node, ast.Import) and any(_is_ours(a.name) for a in node.names):
                    raise SourceError(
                        f"{module} imports a warpforge module as a whole (`import warpforge...`): "
                        "import the names it uses instead"
                    )
                elif not isinstance(node, (ast.Import, ast.ImportFrom)):
                    todo.extend(_used(node))
        if module not in self.order:
            self.order.append(module)

    def _import_from(self, node: ast.ImportFrom, wanted: set[str]) -> None:
        if any(a.name == "*" for a in node.names):
            raise SourceError(f"`from {node.module} import *` cannot be written into an exported task")
        for alias in node.names:
            local = alias.asname or alias.name
            if local not in wanted:
                continue
            if alias.asname and alias.asname != alias.name:
                raise SourceError(
                    f"`from {node.module} import {alias.name} as {alias.asname}`: import it under its "
                    "own name so it can be written into an exported task"
                )
            self.need(str(node.module), {alias.name})

    def block(self, mod: _Module) -> list[str]:
        """The chosen statements of one module (its warpforge imports left out), renames applied."""
        lines = mod.text.splitlines(keepends=True)
        out: list[str] = []
        for i in sorted(mod.chosen):
            node = mod.tree.body[i]
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue  # warpforge's are written in; the others are gathered at the top (imports())
            first = _first_line(lines, node)
            chunk = lines[first - 1 : node.end_lineno]
            if mod.renames:
                chunk = _renamed(chunk, first, node, mod.renames)
            out.append("".join(chunk).rstrip("\n") + "\n")
        return out


def _local_names(scope: ast.AST) -> set[str]:
    """Names a function, lambda or class body binds itself (its arguments, assignments, inner definitions)."""
    names = {n.id for n in ast.walk(scope) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names |= {
        n.name
        for n in ast.walk(scope)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not scope
    }
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        names |= {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
    return names


def _global_refs(node: ast.AST) -> list[ast.AST]:
    """The Name nodes (and function/class definitions) of ``node`` that mean a module-level name: not inside a
    body that binds the same name itself."""
    found: list[ast.AST] = []

    def visit(n: ast.AST, shadowed: frozenset[str]) -> None:
        if isinstance(n, ast.Name) and n.id not in shadowed:
            found.append(n)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if n.name not in shadowed:
                found.append(n)
            # decorators, bases, defaults and annotations are read in the enclosing scope
            outer: list[ast.AST] = [*n.decorator_list]
            if isinstance(n, ast.ClassDef):
                outer += [*n.bases, *n.keywords]
            else:
                outer += [*n.args.defaults, *(d for d in n.args.kw_defaults if d)]
                outer += [x.annotation for x in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs] if x.annotation]
                outer += [n.returns] if n.returns else []
            for o in outer:
                visit(o, shadowed)
            inner = frozenset(shadowed | _local_names(n))
            for stmt in n.body:
                visit(stmt, inner)
            return
        if isinstance(n, ast.Lambda):
            visit(n.body, frozenset(shadowed | _local_names(n)))
            return
        for child in ast.iter_child_nodes(n):
            visit(child, shadowed)

    visit(node, frozenset())
    return found


def _used(node: ast.AST) -> set[str]:
    """Module-level names a top-level statement reads (annotations included: dataclass fields need theirs)."""
    return {n.id if isinstance(n, ast.Name) else n.name for n in _global_refs(node)}  # type: ignore[attr-defined]


def _renamed(chunk: list[str], first: int, node: ast.stmt, renames: dict[str, str]) -> list[str]:
    """The statement's lines with each module-level name of ``renames`` replaced where it means that name."""
    edits: list[tuple[int, int, int, str]] = []
    for n in _global_refs(node):
        if isinstance(n, ast.Name) and n.id in renames:
            edits.append((n.lineno, n.col_offset, n.end_col_offset or 0, renames[n.id]))
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in renames:
            found = re.search(rf"\b(def|class)\s+({re.escape(n.name)})\b", chunk[n.lineno - first])
            assert found is not None
            edits.append((n.lineno, found.start(2), found.end(2), renames[n.name]))
    return _edit(chunk, first, edits)


def _edit(lines: list[str], first: int, edits: list[tuple[int, int, int, str]]) -> list[str]:
    """Replace (line, start col, end col) spans, columns being UTF-8 byte offsets as ast gives them."""
    out = list(lines)
    for lineno, start, end, text in sorted(edits, reverse=True):
        raw = out[lineno - first].encode()
        out[lineno - first] = (raw[:start] + text.encode() + raw[end:]).decode()
    return out


def imports_warpforge(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(_is_ours(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_ours(node.module):
            return True
    return False


def standalone_source(source: str, what: str, roots: tuple[str, ...] | None = CONTRACT) -> str:
    """``source`` (a task module) with every warpforge definition it uses written in (module docstring);
    ``roots``: the names whose definitions are kept (None: every statement, for a runtime module)."""
    if not imports_warpforge(source):
        return source
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    body = tree.body
    inliner = _Inliner()
    # warpforge modules imported as a whole (`from warpforge.kernels.tasks import conv`): alias -> module name
    module_aliases: dict[str, str] = {}
    imported: dict[str, str] = {}  # a name imported from warpforge -> its module
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_ours(node.module):
            for entry in node.names:
                full = f"{node.module}.{entry.name}"
                if importlib.util.find_spec(str(node.module)) is not None and _is_module(full):
                    module_aliases[entry.asname or entry.name] = full
                else:
                    imported[entry.asname or entry.name] = str(node.module)

    # The task's own statements the contract needs (statements that bind nothing, such as an assert, stay).
    binders: dict[str, list[int]] = {}
    for i, node in enumerate(body):
        for n in _bound(node):
            binders.setdefault(n, []).append(i)
    keep: set[int] = {i for i, node in enumerate(body) if not _bound(node) or roots is None}
    todo = [n for n in (roots or ()) if n in binders] or [n for i in keep for n in _used(body[i])]
    seen: set[str] = set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        for i in binders.get(n, []):
            if i not in keep:
                keep.add(i)
                if not isinstance(body[i], (ast.Import, ast.ImportFrom)):
                    todo.extend(_used(body[i]))
    for i, node in enumerate(body):  # the task's own imports stay (unused ones cost nothing)
        if isinstance(node, ast.Import) and any(_is_ours(a.name) for a in node.names):
            raise SourceError(
                f"{what} imports a warpforge module as a whole (`import warpforge...`): import the "
                "names it uses instead"
            )
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not _is_ours(getattr(node, "module", None)):
            keep.add(i)
    kept_code = [body[i] for i in sorted(keep) if not isinstance(body[i], (ast.Import, ast.ImportFrom))]
    used = set().union(*(_used(n) for n in kept_code)) if kept_code else set()

    # Names imported from warpforge that the kept code uses, and the attributes read of a module alias.
    for name, module in imported.items():
        if name in used or roots is None:  # a runtime module's imports are its surface: all written in
            inliner._import_from(
                next(
                    n
                    for n in body
                    if isinstance(n, ast.ImportFrom)
                    and n.module == module
                    and any((a.asname or a.name) == name for a in n.names)
                ),
                {name},
            )
    attr_edits: list[tuple[int, int, int, str]] = []
    own = set(binders)
    own_defs = {b for stmt in body if not isinstance(stmt, (ast.Import, ast.ImportFrom)) for b in _bound(stmt)}
    for alias_name, module in module_aliases.items():
        alias = alias_name
        reads: dict[tuple[int, int, int], str] = {}
        for node in kept_code:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == alias:
                    if sub.lineno != sub.end_lineno:
                        raise SourceError(f"{what}: line {sub.lineno}: {alias}.{sub.attr} spans lines")
                    reads[(sub.lineno, sub.col_offset, sub.end_col_offset or 0)] = sub.attr
                elif isinstance(sub, ast.Name) and sub.id == alias and not _is_attribute_base(node, sub):
                    raise SourceError(
                        f"{what}: line {sub.lineno}: the module {alias} is used other than as "
                        f"{alias}.NAME; it cannot be written into an exported task"
                    )
        if not reads:
            continue
        inliner.need(module, set(reads.values()))
        mod = inliner.module(module)
        chosen_names = set().union(
            *(
                _bound(mod.tree.body[i])
                for i in mod.chosen
                if not isinstance(mod.tree.body[i], (ast.Import, ast.ImportFrom))
            )
        )
        mod.renames = {n: f"_{mod.stem}_{n}" for n in chosen_names if n in own_defs}
        for (lineno, start, end), attr in reads.items():
            attr_edits.append((lineno, start, end, mod.renames.get(attr, attr)))

    # Two definitions of one name (the task's and a written-in one, or two written-in ones) would shadow.
    removed = set(imported) | set(module_aliases)
    origin: dict[str, str] = {}
    for name in inliner.order:
        mod = inliner.modules[name]
        for i in mod.chosen:
            node = mod.tree.body[i]
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for n in (mod.renames.get(b, b) for b in _bound(node)):
                if (n in own and n not in removed) or origin.get(n, name) != name:
                    raise SourceError(
                        f"{what}: {name}'s {n} clashes with another definition of that name; it "
                        "cannot be written into an exported task"
                    )
                origin[n] = name

    # Assemble: the task's text with its warpforge imports and matcher-only statements removed, the written-in
    # definitions after its last import.
    out = _edit(lines, 1, attr_edits)
    drop: set[int] = set()
    for i, node in enumerate(body):
        warp_import = isinstance(node, ast.ImportFrom) and node.level == 0 and _is_ours(node.module)
        if i not in keep or warp_import:
            drop.update(range(_first_line(lines, node), (node.end_lineno or node.lineno) + 1))
    imports = [
        i
        for i, node in enumerate(body)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and not (isinstance(node, ast.ImportFrom) and _is_ours(node.module))
    ]
    after = (
        (body[imports[-1]].end_lineno or 0)
        if imports
        else (body[0].end_lineno or 0)
        if body and isinstance(body[0], ast.Expr)
        else 0
    )
    own_imports = {ast.unparse(body[i]) for i in imports}
    extra_imports: list[str] = []
    blocks: list[str] = []
    for name in inliner.order:
        mod = inliner.modules[name]
        for i in sorted(mod.chosen):
            node = mod.tree.body[i]
            if isinstance(node, (ast.Import, ast.ImportFrom)) and not _is_ours(getattr(node, "module", None)):
                text = ast.unparse(node)
                if text not in own_imports and text not in extra_imports and "__future__" not in text:
                    extra_imports.append(text)
        chunks = inliner.block(mod)
        if chunks:
            blocks.append(
                f"\n\n# ---- written in at export from {name} (the definitions used below) ----\n" + "\n".join(chunks)
            )
    text_lines: list[str] = []
    for lineno, line in enumerate(out, start=1):
        if lineno not in drop:
            text_lines.append(line)
        if lineno == after:
            text_lines.extend(f"{imp}\n" for imp in extra_imports)
            text_lines.append("".join(blocks) + ("\n\n# ---- this module ----\n" if blocks else ""))
    result = re.sub(r"\n{4,}", "\n\n\n", "".join(text_lines))
    if imports_warpforge(result):
        raise SourceError(
            f"{what} still imports warpforge where it cannot be written in (an import inside a "
            "function the task's contract uses): import at module level"
        )
    return result


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _is_attribute_base(tree: ast.AST, name: ast.Name) -> bool:
    return any(isinstance(n, ast.Attribute) and n.value is name for n in ast.walk(tree))
