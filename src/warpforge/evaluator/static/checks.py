"""Static checks on a variant's source, done in the trusted process by reading the AST only.

``launch`` may allocate tensors and launch Triton kernels; it may not compute with torch (a torch
matmul inside ``launch`` is cuBLAS, not a found kernel) nor reach the reference. Two rule sets:

- ``core``: torch compute calls and methods, forbidden imports, process creation (anywhere, module
  level included);
- ``strict`` (the default): the variant grammar (grammar/), an allowlist of what a variant module
  may contain, module level and host code and kernels; whatever it does not name is refused with the
  rule it broke.

Dynamic tricks that slip past (they should not under ``strict``) are caught at run time: the child
records every aten operator a launch dispatches (``disallowed_ops``), and the ghost replay disables
every Triton launch and requires the output to change (evaluator/judge/judge.py). ``core`` exists so the
adversarial manifest can test those run-time layers on their own (``runtime_only`` fixtures).

Example::

    >>> check_source("import os\ndef launch(x):\n    return os.fork()").reason
    'forbidden_import'
"""

from __future__ import annotations

import ast
import re

from warpforge.evaluator.static.grammar import ALLOC_CALLS, TORCH_VALUES, GrammarError, check_module, parse_limited
from warpforge.evaluator.static.vocab import ALLOWED_TORCH as CORE_TORCH
from warpforge.evaluator.static.vocab import StaticFinding, is_jit

# What the grammar lets a variant name in torch (the agent's prompt states it from here); the ``core``
# blocklist keeps its wider CORE_TORCH (streams, torch.library) for the run-time fixtures behind the grammar.
ALLOWED_TORCH = ALLOC_CALLS | TORCH_VALUES

# Tensor methods that compute (as opposed to describing or viewing a tensor).
COMPUTE_METHODS = {
    "sum",
    "mean",
    "exp",
    "exp2",
    "log",
    "log2",
    "log1p",
    "softmax",
    "log_softmax",
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "einsum",
    "max",
    "min",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "sigmoid",
    "relu",
    "silu",
    "gelu",
    "tanh",
    "mul",
    "add",
    "sub",
    "div",
    "pow",
    "sqrt",
    "rsqrt",
    "norm",
    "var",
    "std",
    "cumsum",
    "logsumexp",
    "abs",
    "neg",
    "reciprocal",
    "square",
    "clamp",
    "where",
    "masked_fill",
    "gather",
    "scatter",
    "index_select",
    "sort",
    "topk",
    "copy_",
    "mul_",
    "add_",
    "div_",
    "sub_",
    "exp_",
    "linear",
    "conv2d",
    "layer_norm",
    "rms_norm",
    "cross_entropy",
    "nll_loss",
    "float",
    "half",
    "bfloat16",
    "double",
}
# aten operators (as recorded at run time by the child's dispatch mode, outside Triton's own launches)
# that a launch may call: allocation, views, copies and metadata. Anything else is torch computing the
# answer, however it was reached (getattr, operator.matmul, torch.ops, the task's reference).
ALLOWED_ATEN = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "zeros",
    "zeros_like",
    "zero_",
    "new_zeros",
    "ones",
    "ones_like",
    "new_ones",
    "full",
    "full_like",
    "new_full",
    "fill_",
    "scalar_tensor",
    "arange",
    "view",
    "_unsafe_view",
    "reshape",
    "_reshape_alias",
    "as_strided",
    "t",
    "transpose",
    "permute",
    "expand",
    "unsqueeze",
    "squeeze",
    "slice",
    "select",
    "narrow",
    "split",
    "split_with_sizes",
    "chunk",
    "unbind",
    "unfold",
    "alias",
    "detach",
    "lift_fresh",
    "lift_fresh_copy",
    "clone",
    "copy_",
    "_to_copy",
    "set_",
    "resize_",
    "view_as_real",
    "view_as_complex",
    "is_same_size",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "sym_storage_offset",
    "contiguous",
    "_copy_from",
    "_copy_from_and_resize",
    "record_stream",
}  # not _local_scalar_dense: .item() / float(t) read tensor memory on the host
FORBIDDEN_IMPORTS = (
    "warpforge",
    "torch.nn",
    "torch.ops",
    "torch._C",
    "torch.linalg",
    "torch.special",
    "torch.fft",
    "numpy",
    "cupy",
    "ctypes",
    "scipy",
    "subprocess",
    "multiprocessing",
    "pty",
)
# New processes are refused outright (the OS sandbox also forbids them under the interpreter, and kills
# its whole PID namespace before reading anything a candidate wrote).
PROCESS_CALLS = re.compile(r"^(fork|forkpty|setsid|setpgid|setpgrp|system|popen|exec\w*|spawn\w*|posix_spawn\w*)$")


def _torch_aliases(tree: ast.Module) -> set[str]:
    names = {"torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name == "torch" and a.asname}
    return names


def check_source(source: str, rules: str = "strict") -> StaticFinding | None:
    """The first static rule the source breaks, or None (``rules``: ``strict`` or ``core``).

    ``strict`` is the variant grammar (grammar/). ``core`` keeps the source rules (UTF-8 only, size and
    depth limits: the exact-bytes guarantee holds for every rule set) and the blocklist below, so the
    adversarial manifest can prove the run-time layers behind the grammar on their own.
    """
    if rules == "strict":
        return check_module(source)
    try:
        tree = parse_limited(source)
    except GrammarError as err:
        return err.finding
    for node in ast.walk(tree):
        # Module level too: a fork at import time is as much an escape as one inside launch.
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "os"
            and PROCESS_CALLS.match(node.func.attr)
        ):
            return StaticFinding(
                "process_spawn",
                f"calls os.{node.func.attr}: candidates may not create "
                "processes (they would escape the sandbox's kill and memory limits)",
            )
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for mod in modules:
            if any(mod == bad or mod.startswith(bad + ".") for bad in FORBIDDEN_IMPORTS):
                return StaticFinding(
                    "forbidden_import",
                    f"imports {mod}: a variant may use only torch "
                    "allocation utilities and Triton, never the reference or other compute",
                )
    torch_names = _torch_aliases(tree)
    host_functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and not is_jit(n)]
    for fn in host_functions:
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                return StaticFinding("torch_compute_call", f"'{fn.name}' uses the @ operator (a torch matmul)")
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            attr = node.func.attr
            base = node.func.value
            if isinstance(base, ast.Name) and base.id == "os" and PROCESS_CALLS.match(attr):
                return StaticFinding(
                    "process_spawn",
                    f"'{fn.name}' calls os.{attr}: candidates may not create "
                    "processes (they would escape the sandbox's kill and memory limits)",
                )
            if isinstance(base, ast.Name) and base.id in torch_names and attr not in CORE_TORCH:
                return StaticFinding(
                    "torch_compute_call",
                    f"'{fn.name}' calls torch.{attr}: launch may only allocate tensors and launch Triton kernels",
                )
            root = base
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in torch_names and isinstance(base, ast.Attribute):
                dotted = ast.unparse(node.func)
                if not dotted.startswith(("torch.cuda.", "torch.library.")):
                    return StaticFinding("torch_compute_call", f"'{fn.name}' calls {dotted}")
            if attr in COMPUTE_METHODS and not (isinstance(base, ast.Name) and base.id in {"tl", "triton", "math"}):
                return StaticFinding(
                    "torch_compute_call",
                    f"'{fn.name}' calls .{attr}() on a tensor: compute belongs in a @triton.jit kernel",
                )
    return None


def disallowed_ops(ops: list[str]) -> list[str]:
    """The recorded run-time operators outside ALLOWED_ATEN (a dtype cast counts as compute)."""
    return sorted(op for op in ops if op not in ALLOWED_ATEN)
