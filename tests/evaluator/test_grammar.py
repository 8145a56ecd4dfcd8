"""The variant grammar (evaluator/static/grammar/): honest code passes, each production refuses what it does not
name with its own rule, parse failures are findings, and nothing of the candidate runs before the check."""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path

import pytest

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.static import grammar
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import TEMPLATES_DIR, VariantError, load_variant, parse_variant

ROOT = Path(__file__).parent / "adversarial"
HEAD = "import torch\nimport triton\nimport triton.language as tl\n\nTASK = 'double'\nSPACE = {'BLOCK': [256]}\n\n"
KERNEL = (
    "@triton.jit\ndef k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2 + 1, mask=offs < n)\n\n"
)


def host(body: str, extra: str = "") -> str:
    lines = "\n".join("    " + line for line in body.splitlines())
    return HEAD + extra + KERNEL + f"def launch(x, BLOCK=256):\n{lines}\n"


def test_honest_sources_pass() -> None:
    paths = [p for p in TEMPLATES_DIR.rglob("*.py") if p.name != "__init__.py"]
    paths += sorted(ROOT.glob("control_*.py"))
    assert len(paths) >= 20
    for path in paths:
        assert check_module(path.read_text()) is None, path
    ok = host(
        "y = torch.empty_like(x)\nn = x.numel()\ngrid = (triton.cdiv(n, BLOCK),)\n"
        "assert x.is_contiguous(), f'x is {x.shape}'\nk[grid](x, y, n, BLOCK=BLOCK, num_warps=4)\nreturn y"
    )
    assert check_module("# -*- coding: utf-8 -*-\n" + ok) is None
    shapes = host(
        "M, N = x.shape\nn = x.numel() * 2 + x.stride(0)\ny = torch.empty((M, N), dtype=x.dtype)\n"
        "v = x.view(-1)[: x.numel()]\nassert x.shape == y.shape and x is not None\n"
        "k[(triton.cdiv(len(x), BLOCK),)](v, y, n, BLOCK=BLOCK)\nreturn y"
    )
    assert check_module(shapes) is None


@pytest.mark.parametrize(
    "source, rule",
    [
        ("# coding: utf-7\n" + HEAD, "source_encoding"),
        ("#!/usr/bin/env python\n# vim: set fileencoding=latin-1 :\n" + HEAD, "source_encoding"),
        ("# x\x0c\n# coding: utf-7\n" + HEAD, "source_encoding"),  # str.splitlines() split at the form feed
        ("#\x1c\n# coding: latin-1\n" + HEAD, "source_encoding"),
        (HEAD + "X = '\ud800'\n", "source_encoding"),
        (HEAD + "x = (\n", "syntax_error"),
        (HEAD + "x = 1\x00\n", "syntax_error"),
        (HEAD + "X = " + "-" * 100 + "1\n", "source_too_deep"),  # parses, 100 levels deep
        (HEAD + "X = " + "-" * 30000 + "1\n", "source_too_deep"),  # the parser itself gives up
        (HEAD + "X = " + "+".join(["1"] * 20000) + "\n", "source_too_deep"),  # RecursionError in the parser
        ("x = 1\n" * 20000, "source_too_large"),
        ("import torch as t\n", "module_alias"),
        ("import os\n", "forbidden_import"),
        ("from torch import empty\n", "forbidden_import"),
        (HEAD + "T = torch\n", "module_constant"),
        (HEAD + "F = torch.empty\n", "module_constant"),
        (HEAD + "X: tl.core.builtins.exec('import os') = 1\n", "module_constant"),  # evaluated at import
        (HEAD + "X: print('hi') = 1\n", "module_constant"),
        (HEAD + "X = len([1])\n", "module_constant"),
        (HEAD + "print('hi')\n", "module_statement"),
        (HEAD + "if True:\n    X = 1\n", "module_statement"),
        (HEAD + "class ModelNew:\n    pass\n", "model_new_class"),
        (HEAD + KERNEL + "k = 1\n", "rebinding"),
        (HEAD + "@triton.autotune(configs=[], key=[])\n" + KERNEL.removeprefix("@triton.jit\n"), "forbidden_import"),
        (HEAD + "@print\n" + KERNEL.removeprefix("@triton.jit\n"), "decorator"),
        (HEAD + "@triton.jit(repr=print)\n" + KERNEL.removeprefix("@triton.jit\n"), "decorator"),
        (host("return x", "def constraints(params, shape, f=print):\n    return True\n\n"), "module_constant"),
        (host("k[lambda meta: (meta['x_ptr'],)](x, x, 1)\nreturn x"), "kernel_use"),  # a grid reads no tensor
        (host("g = launch\nreturn x"), "host_name"),
        (host("k[launch](x, x, 1)\nreturn x"), "kernel_use"),
        (host("k.add_pre_run_hook(launch)\nreturn x"), "kernel_use"),
        (host("h = k.run\nreturn x"), "kernel_use"),
        (host("k(x, x, 1)\nreturn x"), "kernel_use"),
        (host("s = x.stride\nk[(1,)](x, x, s)\nreturn x"), "host_name"),
        (host("f = triton.cdiv\nreturn x"), "host_name"),
        (host("y = torch.cuda.current_stream()\nreturn x"), "torch_compute_call"),
        (host("y = torch.library.custom_op\nreturn x"), "torch_compute_call"),
        (host("y = x.sum()\nreturn y"), "torch_compute_call"),
        (host("y = x @ x\nreturn y"), "torch_compute_call"),
        (host("x.shape = 1\nreturn x"), "host_statement"),
        (host("y = torch.empty_like(x)\ny[0] = 1\nreturn y"), "host_statement"),
        (host("torch = 1\nreturn x"), "host_name"),
        (host("while True:\n    pass\nreturn x"), "host_statement"),
        (host("with x:\n    pass\nreturn x"), "host_statement"),
        (host("try:\n    pass\nexcept Exception:\n    pass\nreturn x"), "host_statement"),
        (host("import sys\nreturn x"), "host_statement"),
        (host("y = [i for i in range(3)]\nreturn x"), "host_statement"),
        (host("y = np.asarray(x)\nreturn x"), "host_name"),
        (host("y = f'{x}'\nreturn x"), "host_statement"),
        (host("y = x.item()\nreturn x"), "host_read"),
        (host("y = x.data_ptr()\nreturn x"), "host_read"),
        (host("y = x.__class__\nreturn x"), "private_access"),
        (host("y = getattr(x, 'sum')\nreturn x"), "dynamic_access"),
        (host("y = type(x)\nreturn x"), "dynamic_access"),
        (host("y = x * 2 + 1\nreturn y"), "tensor_use"),
        (host("y = torch.empty_like(x)\nz = -y\nreturn x"), "tensor_use"),
        (host("v = x.view(-1)\nw = v[v > 0]\nreturn x"), "tensor_use"),
        (host("y = x[x]\nreturn y"), "tensor_use"),
        (host("y = max(x, 1)\nreturn x"), "tensor_use"),
        (host("y = float(x)\nreturn x"), "host_read"),
        (host("if x:\n    pass\nreturn x"), "host_read"),
        (host("a, b = x, 1\nc = a + b\nreturn x"), "tensor_use"),
        (host("for r in x:\n    s = r * 2\nreturn x"), "tensor_use"),
        (host("y = x.contiguous()\ny += 1\nreturn y"), "tensor_use"),
        (host("y = f(x)\nreturn x", "def f(n):\n    return n\n\n"), "tensor_use"),
        (HEAD + "@triton.jit\ndef k(x):\n    y = np.float32(1)\n", "jit_body_disallowed"),
        (HEAD + "@triton.jit\ndef k(x):\n    def g():\n        pass\n", "jit_body_disallowed"),
        (HEAD + "def helper(x):\n    return x\n\n@triton.jit\ndef k(x):\n    y = helper(x)\n", "jit_body_disallowed"),
    ],
)
def test_each_rule_refuses_with_its_name(source: str, rule: str) -> None:
    finding = check_module(source)
    assert finding is not None and finding.reason == rule, finding


def test_the_docstring_names_every_rule() -> None:
    doc = grammar.__doc__ or ""
    rules = {
        "source_encoding",
        "source_too_large",
        "syntax_error",
        "source_too_deep",
        "forbidden_import",
        "module_alias",
        "module_constant",
        "decorator",
        "model_new_class",
        "model_new_init",
        "rebinding",
        "host_statement",
        "kernel_use",
        "host_name",
        "jit_body_disallowed",
        "private_access",
        "dynamic_access",
        "host_read",
        "torch_compute_call",
        "module_statement",
        "tensor_use",
        "constexpr_tensor",
        "kernel_argument",
        "space_value",
        "space_too_large",
    }
    assert all(f"[{rule}]" in doc for rule in rules), [r for r in rules if f"[{r}]" not in doc]
    source = inspect.getsource(grammar)
    used = {line.split('"')[1] for line in source.splitlines() if '_fail("' in line or 'fail("' in line}
    assert used <= rules, used - rules


def test_unparsable_sources_are_errors_not_crashes() -> None:
    for source, reason in [
        ("TASK = 'x'\nX = " + "-" * 30000 + "1\n", "source_too_deep"),
        ("x = 1\n" * 20000, "source_too_large"),
    ]:
        with pytest.raises(VariantError) as err:
            parse_variant(source)
        assert err.value.reason == reason


def test_a_non_utf8_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.py"
    path.write_bytes(HEAD.encode() + b"X = '\xe9'\n")  # latin-1 bytes
    with pytest.raises(VariantError, match="UTF-8") as err:
        load_variant(path)
    assert err.value.reason == "source_encoding"


def test_constraints_never_run_before_the_grammar(tmp_path: Path) -> None:
    from warpforge.evaluator.run.stages import space_stage

    class NoChildren:
        def running(self, *a: object, **k: object) -> None:
            raise AssertionError("a child was started for a source the grammar refuses")

    source = (
        HEAD
        + "def constraints(params, shape):\n    import os\n    return True\n\n"
        + KERNEL
        + "def launch(x, BLOCK=256):\n    return x\n"
    )
    job = Job(load_task_file(ROOT / "task_double.py"), parse_variant(source, "v"), {})
    failure, configs = space_stage(NoChildren(), job)  # type: ignore[arg-type]
    assert failure is not None and failure.verdict is Verdict.REJECTED and failure.reason == "host_statement"
    assert configs == []


def test_the_child_imports_only_the_checked_bytes(tmp_path: Path) -> None:
    import linecache

    from warpforge.evaluator.sandbox.child.common import UnverifiedCandidate, load_candidate

    source = "X = 1\ndef f():\n    return X\n"
    path = tmp_path / "candidate.py"
    path.write_bytes(source.encode())
    digest = hashlib.sha256(source.encode()).hexdigest()
    with pytest.raises(UnverifiedCandidate):
        load_candidate(path, "wf_test_candidate_a", sha256=hashlib.sha256(b"other").hexdigest())
    with pytest.raises(UnverifiedCandidate):
        load_candidate(path, "wf_test_candidate_b", sha256=None)
    module = load_candidate(path, "wf_test_candidate_c", sha256=digest)
    path.write_bytes(b"X = 2\ndef f():\n    return 'rewritten'\n")  # after import: getsource keeps the checked text
    assert module.f() == 1 and "return X" in inspect.getsource(module.f)
    linecache.checkcache(str(path))
    assert "return X" in inspect.getsource(module.f)


def test_tl_dot_is_decided_on_the_ast() -> None:
    from warpforge.evaluator.static.grammar import kernels_use

    assert not kernels_use((ROOT / "comment_dot_bf16.py").read_text(), "dot")
    assert kernels_use((TEMPLATES_DIR / "matmul" / "split_k.py").read_text(), "dot")
    assert not kernels_use(HEAD + "X = 'tl.dot'\n" + KERNEL, "dot")


def test_kernel_hash_covers_helpers_as_bound_at_launch(tmp_path: Path) -> None:
    from warpforge.evaluator.sandbox.child.common import kernel_hash, load_candidate

    source = (
        HEAD + "@triton.jit\ndef _f(x):\n    return x * 2 + 1\n\n@triton.jit\ndef _g(x):\n    return x * 2\n\n"
        "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, _f(tl.load(x_ptr + offs)))\n"
    )
    path = tmp_path / "c.py"
    path.write_bytes(source.encode())
    module = load_candidate(path, "wf_test_hash", sha256=hashlib.sha256(source.encode()).hexdigest())
    before = kernel_hash(module.k)
    assert kernel_hash(module.k) == before
    module._f = module._g  # the kernel's own source is unchanged; the helper it calls is another
    assert kernel_hash(module.k) != before


def test_eval_on_an_unparsable_source_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from warpforge.cli import app

    for name in ("grammar_deep_source", "grammar_huge_source"):
        res = CliRunner().invoke(
            app,
            [
                "eval",
                str(ROOT / "task_double.py"),
                str(ROOT / f"{name}.py"),
                "--backend",
                "interpret",
                "--params",
                '{"BLOCK": 256, "num_warps": 4}',
            ],
        )
        assert res.exit_code != 0 and "Traceback" not in res.output, res.output
        assert ("source_too_deep" if "deep" in name else "source_too_large") in res.output


def _jit(body: str) -> str:
    lines = "\n".join("    " + line for line in body.splitlines())
    return (
        HEAD + "@triton.jit\ndef k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n" + lines + "\n\n"
        "def launch(x, BLOCK=256):\n    y = torch.empty_like(x)\n    k[(1,)](x, y, 1, BLOCK=BLOCK)\n    return y\n"
    )


@pytest.mark.parametrize(
    "body",
    [
        "tl.core.builtins.exec('import os')",  # tl.core is a module holding Python's builtins
        "c = tl.core\nc.builtins.print(n)",  # a module as a value, then its members
        "m = tl.math\nm.core.builtins.print(n)",
        "tl.core.knobs.runtime.interpret = True",
        "a = tl.extra.module",
        "a = [print(i) for i in range(3)]",  # Python-only expressions run under the interpreter only
        "a = {'x': 1}\nprint(a)",
        "match n:\n    case 1:\n        pass",
        "a = '{0.dtype}'.format(x_ptr)",
        "k.fn = print",  # stores into a jit function object
        "n[0] = 1",
        "f = k.fn",
        "l = tl\nl.core.builtins.print(n)",  # a module bound to a local: its attributes went unchecked
        "t = triton\nt.runtime.driver",
        "a = (tl, 1)\na[0].core.builtins.print(n)",
        "a = tl.load(x_ptr, other=tl)",
        "f = print\nf(n)",  # a builtin as a value
        "c = k\nc.add_pre_run_hook(print)",  # a jit function bound to a local: its hooks
        "s = tl.sum\nh = s.cache",  # a library jit function bound to a local: its caches and hooks
        "s = tl.load\na = s(x_ptr)",
        "c = tl.constexpr(tl.sum)\nh = c.value.cache",  # a function passed through constexpr, then its cache
        "c = tl.constexpr(k)\nh = c.value.fn",
    ],
)
def test_jit_bodies_reach_only_kernel_namespaces(body: str) -> None:
    finding = check_module(_jit(body))
    assert finding is not None and finding.reason == "jit_body_disallowed", (body, finding)


def test_jit_bodies_keep_tl_math_and_libdevice() -> None:
    body = (
        "offs = tl.arange(0, BLOCK)\nv = tl.load(x_ptr + offs)\nv = tl.math.exp(v) + math.pi\n"
        "v = tl.extra.cuda.libdevice.tanh(v)\nd = tl.float32\nz: tl.constexpr = 1\n"
        "a = tl.reduce(v, 0, tl.maximum)\nb = v.shape[0] + x_ptr.dtype.element_ty.primitive_bitwidth\n"
        "tl.store(y_ptr + offs, v.to(d).reshape(BLOCK), mask=isinstance(z, tl.constexpr))"
    )
    assert check_module(_jit(body).replace("import triton\n", "import triton\nimport math\n")) is None


@pytest.mark.parametrize(
    "body, extra, rule",
    [
        ("d = {'a': x}\ny = d['a'] * 2\nreturn y", "", "tensor_use"),  # a dict hid the tensor from the typing
        ("d = {'a': x}\ny = d.get('a') * 2\nreturn y", "", "tensor_use"),
        ("y = {'a': x}['a'] + 1\nreturn y", "", "tensor_use"),
        ("y = triton.cdiv(x, 1)\nreturn y", "", "tensor_use"),  # (x + 0) // 1 computed by torch
        ("y = torch.full_like(x, x)\nreturn y", "", "tensor_use"),  # fill value read on the host
        ("y = x.new_full(x.shape, x)\nreturn y", "", "tensor_use"),
        ("y = torch.empty(x)\nreturn y", "", "tensor_use"),
        ("y = torch.zeros(4, out=x)\nreturn y", "", "tensor_use"),
        ("y = x.transpose(x, 0)\nreturn y", "", "tensor_use"),
        ("y = x.expand(x)\nreturn y", "", "tensor_use"),
        ("s = torch.Size(x)\nreturn x", "", "tensor_use"),
        ("y = mk(4)\nz = y + 1\nreturn z", "def mk(n):\n    return torch.zeros(n)\n\n", "tensor_use"),
        ("y = torch.empty_like(x)\nk[(x,)](x, y, 1)\nreturn y", "", "host_read"),
        ("g = (x,)\ny = torch.empty_like(x)\nk[g](x, y, 1)\nreturn y", "", "host_read"),
        ("assert x.dim() == 2, f'{x!r}'\nreturn x", "", "host_read"),
        ("assert x.dim() == 2, f'{x.view(-1)}'\nreturn x", "", "host_read"),
        ("raise ValueError(x)", "", "host_read"),
        ("y = torch.empty_like(x)\nh = k[(1,)](x, y, 1)\nreturn h", "", "kernel_use"),
    ],
)
def test_tensor_typing_follows_containers_calls_and_messages(body: str, extra: str, rule: str) -> None:
    finding = check_module(host(body, extra))
    assert finding is not None and finding.reason == rule, (body, finding)


def test_templates_of_like_and_view_as_stay_tensors() -> None:
    ok = host(
        "y = torch.empty_like(x, dtype=torch.float32)\nz = torch.full_like(x, 0.5)\nv = y.view_as(x)\n"
        "d = {'y': y}\nk[(triton.cdiv(x.numel(), BLOCK),)](x, d['y'], x.numel(), BLOCK=BLOCK)\nreturn v"
    )
    assert check_module(ok) is None


@pytest.mark.parametrize(
    "signature, used",
    [
        ("x, w=None, BLOCK=256", "w"),  # launch(*inputs, **params): a two-input task's second input lands in w
        ("x, /, w=1, BLOCK=256", "w"),
        ("x, BLOCK=256, /", "BLOCK"),  # positional-only: never passed by keyword, so an input can land there
    ],
)
def test_positional_parameters_outside_space_are_inputs(signature: str, used: str) -> None:
    finding = check_module(HEAD + KERNEL + f"def launch({signature}):\n    return {used} * 2\n")
    assert finding is not None and finding.reason == "tensor_use", (signature, finding)


@pytest.mark.parametrize(
    "extra, rule",
    [
        ("def constraints(params, shape):\n    k[(1,)](1, 2, 3)\n    return True\n\n", "kernel_use"),
        ("def constraints(params, shape):\n    a = torch.empty(10 ** 12)\n    return True\n\n", "tensor_use"),
        ("def h(n):\n    k[(1,)](n, n, n)\n    return 1\n\n", "kernel_use"),
    ],
)
def test_constraints_and_helpers_compute_on_shapes_only(extra: str, rule: str) -> None:
    finding = check_module(host("return x", extra))
    assert finding is not None and finding.reason == rule, (extra, finding)


COUNTING = (
    "def launch(x, BLOCK=256, calls=[]):\n    calls += [1]\n    y = torch.empty_like(x)\n"
    "    if len(calls) < 3:\n        k[(1,)](x, y, 1, BLOCK=BLOCK)\n    return y\n"
)


@pytest.mark.parametrize(
    "tail, rule",
    [
        (COUNTING, "module_constant"),  # a mutable default outlives the call: honest for 2 calls, then skip the work
        (COUNTING.replace("BLOCK=256, calls", "BLOCK=256, *, calls"), "module_constant"),
        (
            "def h(n, acc=[]):\n    acc += [n]\n    return len(acc)\n\ndef launch(x, BLOCK=256):\n    return x\n",
            "module_constant",
        ),
        ("CALLS = []\n\ndef launch(x, BLOCK=256):\n    c = CALLS\n    c += [x.shape]\n    return x\n", "host_name"),
        (
            "SEEN = {}\n\ndef launch(x, BLOCK=256):\n"
            "    s = SEEN if True else SEEN\n    s |= {x.shape: 1}\n    return x\n",
            "host_name",
        ),
        ("def launch(x, BLOCK=256):\n    s = SPACE\n    s |= {'n': 1}\n    return x\n", "host_name"),
    ],
)
def test_no_state_outlives_a_call(tail: str, rule: str) -> None:
    finding = check_module(HEAD + KERNEL + tail)
    assert finding is not None and finding.reason == rule, (tail, finding)


def test_mutable_constants_are_read_in_place() -> None:
    tail = (
        "KNOWN = {1, 97}\n\ndef launch(x, BLOCK=256):\n"
        "    assert x.numel() not in KNOWN or len(KNOWN) > 0\n    return x\n"
    )
    assert check_module(HEAD + KERNEL + tail) is None


@pytest.mark.parametrize("constants", ["CALLS = []\n", "C = []\nCALLS = C\n"])
def test_kernels_name_no_mutable_constant(constants: str) -> None:
    # under the interpreter a kernel body is Python: CALLS.append(1) would count calls across launches
    finding = check_module(_jit("CALLS.append(1)").replace("SPACE =", constants + "SPACE ="))
    assert finding is not None and finding.reason == "jit_body_disallowed", finding


TYPED_LAUNCH = """import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128]}


@triton.jit
def _k(x_ptr, y_ptr, n, S, BLOCK: tl.constexpr, T: "tl.constexpr"):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs), mask=offs < n)


def launch(x, BLOCK=128):
    y = torch.empty_like(x)
    n = x.numel()
    _k[(1,)](ARGS)
    return y
"""


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ("x, y, n, 1.0, BLOCK=BLOCK, T=n * 2", None),  # shape arithmetic and a SPACE parameter: constexprs
        ("x, y, n, 1.0, BLOCK, triton.next_power_of_2(n)", None),
        ("x, y, n, 1.0, BLOCK=BLOCK, T=x", "constexpr_tensor"),  # a tensor on a (string-annotated) constexpr
        ("x, y, n, 1.0, x, T=1", "constexpr_tensor"),  # by position
        ("x, y, n, 1.0, BLOCK=BLOCK, T=x.view(-1)", "constexpr_tensor"),  # a tensor method gives a tensor
        ("x, y, n, 1.0, BLOCK=BLOCK, T=(x, 1)", "constexpr_tensor"),  # inside a tuple
        ("x, y, n, [x], BLOCK=BLOCK, T=1", "kernel_argument"),  # no kernel parameter receives a list
        ("*(x, y), n, 1.0, BLOCK=BLOCK, T=1", "kernel_argument"),
    ],
)
def test_a_tensor_reaches_only_a_pointer_parameter(args: str, reason: str | None) -> None:
    finding = check_module(TYPED_LAUNCH.replace("ARGS", args))
    assert (finding.reason if finding else None) == reason, finding


TUNED_KERNEL = (
    "def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    if EVEN:\n"
    "        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2 + 1)\n"
    "    else:\n"
    "        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2 + 1, mask=offs < n)\n\n"
)
AUTOTUNE = (
    "@triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=4), "
    "triton.Config({'BLOCK': 256}, num_warps=8)], key=['n'])\n@triton.jit\n"
)
HEURISTICS = "@triton.heuristics({'EVEN': lambda args: args['n'] % args['BLOCK'] == 0})\n@triton.jit\n"
TUNED_LAUNCH = "def launch(x, BLOCK=256):\n    return x\n"
SPACE_HINT = ("rewrite: @triton.autotune(configs=[triton.Config(", "directly above @triton.jit", "SPACE")
LAUNCH_HINT = ("rewrite: @triton.heuristics({", "compute the value in launch", "as a tl.constexpr argument")


def test_autotune_and_heuristics_as_written_are_accepted() -> None:
    assert check_module(HEAD + AUTOTUNE + TUNED_KERNEL + TUNED_LAUNCH) is None
    assert check_module(HEAD + HEURISTICS + TUNED_KERNEL + TUNED_LAUNCH) is None
    assert check_module(HEAD + AUTOTUNE.replace("@triton.jit\n", "") + HEURISTICS + TUNED_KERNEL + TUNED_LAUNCH) is None


@pytest.mark.parametrize(
    ("source", "hints"),
    [
        (HEAD + "@triton.heuristics\n" + TUNED_KERNEL + TUNED_LAUNCH, LAUNCH_HINT),
        (
            HEAD
            + "CONFIGS = [triton.Config({'BLOCK': 128}, num_warps=4)]\n\n@triton.jit\n"
            + TUNED_KERNEL
            + TUNED_LAUNCH,
            SPACE_HINT,
        ),
        ("from triton import heuristics\n" + HEAD + TUNED_KERNEL + TUNED_LAUNCH, LAUNCH_HINT),
        ("from triton import autotune, Config\n" + HEAD + TUNED_KERNEL + TUNED_LAUNCH, SPACE_HINT),
        ("import triton.runtime.autotuner\n" + HEAD + TUNED_KERNEL + TUNED_LAUNCH, SPACE_HINT),
    ],
    ids=[
        "bare_heuristics",
        "config_constant",
        "from_import_heuristics",
        "from_import_autotune_config",
        "import_autotuner",
    ],
)
def test_refused_triton_idioms_name_the_rewrite(source: str, hints: tuple[str, ...]) -> None:
    # Before: "triton.Config: only triton.jit, triton.cdiv, ... are part of a variant" or "from triton import ...:
    # a variant imports only with ..." and nothing on what to write instead; the rule stays the one it was.
    finding = check_module(source)
    assert finding is not None and finding.reason == "forbidden_import", finding
    assert all(hint in finding.message for hint in hints), finding.message


def test_the_named_rewrite_of_autotune_and_heuristics_passes() -> None:
    # What the hints say to write: the configs in SPACE, the heuristic's value computed in launch as a constexpr.
    source = (
        HEAD.replace("SPACE = {'BLOCK': [256]}", "SPACE = {'BLOCK': [128, 256], 'num_warps': [4, 8]}")
        + "@triton.jit\n"
        + TUNED_KERNEL
        + "def launch(x, BLOCK=256, num_warps=4):\n    y = torch.empty_like(x)\n    n = x.numel()\n"
        "    EVEN = n % BLOCK == 0\n"
        "    k[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, EVEN=EVEN, num_warps=num_warps)\n    return y\n"
    )
    assert check_module(source) is None
