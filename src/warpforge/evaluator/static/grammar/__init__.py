"""The variant grammar: what a variant module may contain, as an allowlist checked on its exact bytes.

Checked in the trusted process on the AST only, before any of the candidate's code runs (its
``constraints()`` included). Whatever the productions below do not name is refused; the finding's
``reason`` is the name of the rule (production) that was broken, in brackets below.

Source (checked first, on the text that will be written and imported)::

    [source_encoding]  the bytes are UTF-8 (strict) and any coding cookie on line 1 or 2 says utf-8
                       (a ``# coding: utf-7`` file would be checked as one text and run as another)
    [source_too_large] at most MAX_BYTES bytes and MAX_LINES lines, measured before parsing
    [syntax_error]     it parses (SyntaxError, NUL bytes, parser recursion or memory errors are a verdict)
    [source_too_deep]  AST depth <= MAX_DEPTH and at most MAX_NODES nodes (counted without recursion)

Module::

    module      := docstring? stmt*
    stmt        := import | constant | function | string-expression                     [module_statement]
    import      := "import torch" | "import triton" | "import math"
                 | "import triton.language as tl" | "from __future__ import annotations"   [forbidden_import]
                   (no other module, no other alias: an alias of torch is how ``sys`` was reached) [module_alias]
    constant    := NAME "=" literal                                                       [module_constant]
    literal     := number | string | bool | None | tuple/list/set/dict of literals
                 | unary/binary arithmetic on literals and earlier constants
                 | a dtype name (torch.float16, tl.float32, ...)
    space       := "SPACE" "=" { STR: [value, ...], ... }: distinct ASCII identifier keys, non-empty
                   lists of int | float | bool | str | None literals (finite, 64-bit, no control
                   characters), typed from the tree (kernels/space_values.py)           [space_value]
                   at most 100,000 configurations (the product of the list lengths)      [space_too_large]
    function    := "@triton.jit" def NAME(args): jit-body                                 [decorator]
                 | def (launch | launch_forward | launch_backward | constraints | NAME)(args): host-body
                   (defaults are literals; no decorators other than ``@triton.jit``, no annotations that are
                   not a name or a dotted tl/triton/torch name)
    class       := ONE ``class ModelNew(nn.Module)``: KernelBench's answer format, its productions in
                   the ModelNew section below (``__init__`` builds parameters; ``forward`` is host code like
                   ``launch``)              [model_new_class] [model_new_init] [torch_compute_call]
    every module-level name is bound once (a jit helper rebound below its definition ran as
    Python in the interpreter while the compiled helper was another)                   [rebinding]

Host code (``launch``, ``constraints``, plain helpers)::

    host-stmt   := NAME-target "=" expr | NAME op= expr | return expr? | if/elif/else | for NAME(s) in expr
                 | assert expr (, message)? | raise BuiltinError(message) | kernel-launch | pass/break/continue
                 | string-expression                                                      [host_statement]
    kernel-launch := JIT_NAME "[" grid "]" "(" value-args ")"                              [kernel_use]
    value-args  := a tensor only for a pointer parameter (no tl.constexpr)                [constexpr_tensor]
                   each argument by position or name, none a list, dict or set             [kernel_argument]
    grid        := a tuple of arithmetic expressions, or a local bound to one (values are never callables:
                   see below)
    expr        := literal | NAME (a parameter or a local) | module constant | arithmetic | comparison
                 | boolean | conditional | tuple/list/dict | subscript/slice | call
    call        := triton.cdiv | triton.next_power_of_2 | math.<MATH_CALLS> | torch.<ALLOC_CALLS>
                 | builtin in HOST_BUILTINS | a plain helper of this module | value.<TENSOR_METHODS>
    attribute   := value.<TENSOR_ATTRS> | torch.<dtype> | tl.<dtype> | triton.language.<dtype>
    names       := parameters, locals, module constants; a module name only as the base of an
                   allowlisted attribute, a function only as the callee, a jit function only as
                   ``kernel[grid]``; host code never assigns a module-level name              [host_name]
    f-strings appear only in assert and raise messages                                   [host_statement]
    a module constant holding a list, dict or set is read only as ``v in NAME`` or ``len(NAME)``, and
    defaults hold none: nothing host code can bind outlives a call (``calls += [1]`` on a default
    counted calls)                                                          [host_name] [module_constant]
    kernel launches and torch allocations appear only in ``launch`` (and a training variant's
    ``launch_forward``/``launch_backward``, typed the same way: see LAUNCHERS): ``constraints`` and helpers compute
    on shape values                                                            [kernel_use] [tensor_use]
    tensors (launch's positional parameters, except those SPACE names, which always come by keyword;
    allocations, views and subscripts of them) are used only as
    kernel arguments, allocation templates, view receivers, shape/stride reads and return values: no
    arithmetic, comparison or truth value of a tensor, no tensor index, no tensor passed to a builtin
    or a helper (helpers take and return shape values), no tensor as an argument of an allowlisted call
    except the template of ``*_like``/``view_as``; a container (tuple, list, dict) holding a tensor and
    any method result of one (``d.get('a')``) is a tensor; a launch is a statement, never a value
                                                                                           [tensor_use]
    int()/float()/bool() of a tensor, a tensor in a grid or formatted into a message is a host read
                                                                                           [host_read]

So no value the host code can form is a callable (no lambda, no bound method, no function object):
no callable grid, no hook passed as a value; no attribute of a kernel (``add_pre_run_hook``,
``pre_hook``, ``run``) is reachable; ``torch.library``, ``torch.cuda``, ``sys``, ``threading`` are not
names of the grammar at all.

Kernels (``@triton.jit`` bodies): names are parameters, locals, ``tl``/``triton``/``math``, other jit
functions, module constants and JIT_BUILTINS; no import, global, nonlocal, lambda, try, with, class,
nested def, async, yield, comprehension, walrus or starred; no ``.handle``/``.data`` (the interpreter's
raw buffers); stores bind names only (no attribute or element store); a module is named only as the
namespace of a member (``tl.load``, ``tl.math.exp``, ``tl.extra.cuda.libdevice.tanh``, ``math.pi``),
within JIT_NAMESPACES (``tl.core.builtins`` is Python's builtins); a jit function and a string have no
attributes in a kernel; a module is named only as ``module.member``, a builtin only called, a jit
function only called or passed to a call (never bound: ``l = tl`` then ``l.core``); an attribute of a
value is one of a Triton tensor, dtype, type or constexpr (jit_value_attrs)            [jit_body_disallowed]

Everywhere: no attribute starting with ``_``                                             [private_access]
and no name from FORBIDDEN_NAMES or call to DYNAMIC_CALLS                              [dynamic_access]
host reads of tensor memory (``.item()``, ``.tolist()``, ``.cpu()``...)                 [host_read]
``torch.X`` outside the allocation/dtype vocabulary                                   [torch_compute_call]

Order: source, imports, everywhere-rules, kernels, module statements, host code; the first broken
rule is the finding.

The package by concern: ``rules`` (the vocabulary, the error, shared helpers), ``kernels`` (imports,
module statements and ``@triton.jit`` bodies), ``host`` (host code), ``model_new`` (KernelBench's ModelNew).

Example::

    >>> check_module("import torch as t\\n").reason
    'module_alias'
"""

from __future__ import annotations

from warpforge.evaluator.static.grammar.host import HostCheck
from warpforge.evaluator.static.grammar.kernels import Grammar, kernels_use
from warpforge.evaluator.static.grammar.rules import *  # noqa: F403 - the vocabulary, read by the agent's prompt
from warpforge.evaluator.static.grammar.rules import GrammarError, check_source_text, parse_limited
from warpforge.evaluator.static.vocab import StaticFinding

__all__ = ["Grammar", "GrammarError", "HostCheck", "check_module", "check_source_text", "kernels_use", "parse_limited"]


def check_module(source: str) -> StaticFinding | None:
    """The first grammar rule ``source`` breaks, or None (it may run)."""
    try:
        tree = parse_limited(source)
        Grammar(tree).check()
    except GrammarError as err:
        return err.finding
    return None
