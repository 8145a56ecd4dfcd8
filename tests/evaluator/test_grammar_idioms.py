"""The Triton idioms users write, under the variant grammar (static/grammar/): each accepted as written and
checked by the rules of the code it stands for; each turned against the evaluator is refused by that rule.

The honest corpus (tests/evaluator/honest/: kernels written here in the styles of Triton's tutorials,
Liger-Kernel and FlagGems) passes the grammar in the default tier; its judgement runs in the slow tier."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.variant import VariantError, parse_variant

HONEST = Path(__file__).parent / "honest"
ANSWERS = sorted(p for p in HONEST.glob("*.py") if not p.name.startswith("p_"))
HEAD = "import torch\nimport triton\nimport triton.language as tl\n"
LIBDEVICE = "from triton.language.extra import libdevice\n"
KERNEL = (
    "@triton.jit\ndef k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    tl.store(y_ptr + offs, BODY, mask=offs < n)\n\n"
)
LAUNCH = "def launch(x):\n    y = torch.empty_like(x)\n    n = x.numel()\n    LINE\n    return y\n"
GRID_LAUNCH = "k[(triton.cdiv(n, 128),)](x, y, n, BLOCK=128)"


def variant(
    body: str = "tl.load(x_ptr + offs, mask=offs < n)", line: str = GRID_LAUNCH, head: str = "", kernel: str = KERNEL
) -> str:
    return (
        HEAD
        + head
        + "\nTASK = 'double'\nSPACE = {'B': [1]}\n\n"
        + kernel.replace("BODY", body)
        + LAUNCH.replace("LINE", line)
    )


def test_the_corpus_is_there_and_passes_the_grammar() -> None:
    assert len(ANSWERS) >= 8
    for path in ANSWERS:
        assert check_module(path.read_text()) is None, path


@pytest.mark.parametrize(
    "source",
    [
        variant("libdevice.rsqrt(tl.load(x_ptr + offs, mask=offs < n))", head=LIBDEVICE),
        variant(
            "libdevice.tanh(tl.load(x_ptr + offs, mask=offs < n))",
            head="from triton.language.extra.cuda import libdevice\n",
        ),
        variant(
            "rsqrt(th(tl.load(x_ptr + offs, mask=offs < n)))",
            head="from triton.language.extra.libdevice import rsqrt, tanh as th\n",
        ),
        variant("tanh(tl.load(x_ptr + offs, mask=offs < n))", head=LIBDEVICE + "tanh = libdevice.tanh\n"),
        variant("ex(tl.load(x_ptr + offs, mask=offs < n))", head="ex = tl.exp\n"),
        variant(
            line="k[(cdiv(n, 128),)](x, y, n, BLOCK=next_power_of_2(100))",
            head="cdiv = triton.cdiv\nnext_power_of_2 = triton.next_power_of_2\n",
        ),
        variant("tl.load(x_ptr + offs, mask=offs < n) * _SCALE", head="_SCALE: tl.constexpr = tl.constexpr(2)\n"),
        variant(
            "half(tl.load(x_ptr + offs, mask=offs < n))",
            kernel="@triton.jit\ndef half(v) -> tl.tensor:\n    return v * 0.5\n\n" + KERNEL,
        ),
        variant(line="k[lambda META: (triton.cdiv(n, META['BLOCK']),)](x, y, n, BLOCK=128)"),
        variant(line="grid = lambda meta: (triton.cdiv(meta['n'], meta['BLOCK']),)\n    k[grid](x, y, n, BLOCK=128)"),
    ],
    ids=[
        "libdevice_module",
        "cuda_libdevice_module",
        "libdevice_functions",
        "libdevice_alias",
        "tl_alias",
        "triton_helper_aliases",
        "annotated_constexpr_constant",
        "return_annotation",
        "lambda_grid",
        "lambda_grid_local",
    ],
)
def test_an_idiom_as_written_is_accepted(source: str) -> None:
    assert check_module(source) is None, check_module(source)


AUTOTUNE = (
    "@triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=4), "
    "triton.Config({'BLOCK': 256}, num_warps=8, num_stages=2)], key=['n'])\n"
)
HEURISTICS = "@triton.heuristics({'BLOCK': lambda args: triton.next_power_of_2(args['n'])})\n"
TUNED_LINE = "k[lambda META: (triton.cdiv(n, META['BLOCK']),)](x, y, n)"


def test_autotune_configurations_are_the_space_read_as_data() -> None:
    source = variant(line=TUNED_LINE, kernel=AUTOTUNE + KERNEL).replace("SPACE = {'B': [1]}\n", "")
    assert check_module(source) is None
    assert parse_variant(source, "tuned").space == {
        "@config": ['#0 {"BLOCK":128,"num_warps":4}', '#1 {"BLOCK":256,"num_warps":8,"num_stages":2}']
    }
    with pytest.raises(VariantError, match="SPACE beside @triton.autotune"):
        parse_variant(variant(line=TUNED_LINE, kernel=AUTOTUNE + KERNEL), "both")


def test_heuristics_as_written_are_accepted() -> None:
    assert check_module(variant(line="k[(triton.cdiv(n, 128),)](x, y, n)", kernel=HEURISTICS + KERNEL)) is None


# Each idiom turned against the evaluator, and the rule that refuses it.
@pytest.mark.parametrize(
    ("source", "rule"),
    [
        # an alias that rebinds to a forbidden function, a module, or Python's builtins
        (variant(head="f = torch.sum\n"), "torch_compute_call"),
        (variant(head="core = tl.core\n"), "module_constant"),
        (variant("b.exec('1')", head="b = tl.core.builtins\n"), "jit_body_disallowed"),
        (variant(head="cx = tl.constexpr\n"), "module_constant"),
        (variant(head="at = triton.autotune\n"), "forbidden_import"),
        (variant("s.fn", head="s = tl.sum\n"), "jit_body_disallowed"),  # an alias has no attributes
        (variant("tl.load(x_ptr + offs) + ex", head="ex = tl.exp\n"), "jit_body_disallowed"),  # only called
        (variant(line="e = cdiv\n    k[(1,)](x, y, n, BLOCK=128)", head="cdiv = triton.cdiv\n"), "host_name"),
        (variant(head="from triton.language.extra.libdevice import rsqrt\nrsqrt = tl.exp\n"), "rebinding"),
        (variant(head="ex = tl.exp\nex = tl.log\n"), "rebinding"),
        (variant(head="from triton.language.extra.libdevice import *\n"), "forbidden_import"),
        (variant(head="from triton.language.extra import cuda\n"), "forbidden_import"),
        (variant(head="from triton.language.extra.cuda.libdevice import core\n"), "forbidden_import"),
        (variant("libdevice.core.builtins", head=LIBDEVICE), "jit_body_disallowed"),
        (variant(line="libdevice.tanh(n)\n    k[(1,)](x, y, n, BLOCK=128)", head=LIBDEVICE), "host_name"),
        # a lambda grid that does something other than compute a grid
        (variant(line="k[lambda META: (META['x_ptr'].fill_(0),)](x, y, n, BLOCK=128)"), "kernel_use"),
        (variant(line="k[lambda META: (triton.cdiv(META['x_ptr'].numel(), 128),)](x, y, n, BLOCK=128)"), "kernel_use"),
        (variant(line="k[lambda META: (x,)](x, y, n, BLOCK=128)"), "host_read"),
        (variant(line="k[lambda META: META](x, y, n, BLOCK=128)"), "kernel_use"),
        (variant(line="k[lambda META: (len(META),)](x, y, n, BLOCK=128)"), "kernel_use"),
        (variant(line="k[lambda META, s=print: (1,)](x, y, n, BLOCK=128)"), "kernel_use"),
        (variant(line="k[lambda META: (print(1),)](x, y, n, BLOCK=128)"), "host_name"),
        (variant(line="k[lambda META: ((lambda: 1)(),)](x, y, n, BLOCK=128)"), "host_name"),
        (variant(line="g = lambda META: (1,)\n    h = g\n    k[h](x, y, n, BLOCK=128)"), "kernel_use"),
        (variant(line="g = lambda META: (1,)\n    return g"), "kernel_use"),
        (variant(line="f = lambda: 1\n    k[(f(),)](x, y, n, BLOCK=128)"), "host_name"),
        # a heuristic with side effects, hooks or values of its own
        (variant(kernel="@triton.heuristics({'BLOCK': lambda args: print(1)})\n" + KERNEL), "host_name"),
        (
            variant(kernel="@triton.heuristics({'BLOCK': lambda args: args['x_ptr'].fill_(1)})\n" + KERNEL),
            "torch_compute_call",
        ),
        (variant(kernel="@triton.heuristics({'BLOCK': lambda args: args})\n" + KERNEL), "decorator"),
        (variant(kernel="@triton.heuristics({'BLOCK': lambda args: args['nope']})\n" + KERNEL), "decorator"),
        (variant(kernel="@triton.heuristics({'n': lambda args: 1})\n" + KERNEL), "decorator"),  # not a constexpr
        (variant(kernel="@triton.heuristics({'BLOCK': print})\n" + KERNEL), "decorator"),
        (variant(kernel="@triton.heuristics(HOOKS)\n" + KERNEL, head="HOOKS = {}\n"), "decorator"),
        (variant(kernel="@triton.heuristics({'BLOCK': lambda args: (lambda: 1)()})\n" + KERNEL), "host_name"),
        # autotune with hooks, computed configurations, or keys that are not the kernel's
        (
            variant(
                kernel="@triton.autotune(configs=[triton.Config({'BLOCK': 1})], key=['n'], pre_hook=print)\n" + KERNEL
            ),
            "decorator",
        ),
        (
            variant(
                kernel="@triton.autotune(configs=[triton.Config({'BLOCK': 1})], key=['n'], "
                "prune_configs_by={'early_config_prune': print})\n" + KERNEL
            ),
            "decorator",
        ),
        (
            variant(
                kernel="@triton.autotune(configs=[triton.Config({'BLOCK': 1}, pre_hook=print)], key=['n'])\n" + KERNEL
            ),
            "decorator",
        ),
        (variant(kernel="@triton.autotune(configs=CONFIGS, key=['n'])\n" + KERNEL, head="CONFIGS = []\n"), "decorator"),
        (
            variant(
                kernel="@triton.autotune(configs=[triton.Config({'BLOCK': N})], key=['n'])\n" + KERNEL, head="N = 2\n"
            ),
            "decorator",
        ),
        (variant(kernel="@triton.autotune(configs=[triton.Config({'x_ptr': 1})], key=['n'])\n" + KERNEL), "decorator"),
        (variant(kernel="@triton.autotune(configs=[triton.Config({'BLOCK': 1})], key=['zz'])\n" + KERNEL), "decorator"),
        # out of place: the everywhere-rule refuses triton.autotune/heuristics there, naming the rewrite
        (variant(kernel="@triton.jit\n" + AUTOTUNE + KERNEL.removeprefix("@triton.jit\n")), "forbidden_import"),
        (variant(kernel=HEURISTICS + AUTOTUNE + KERNEL), "forbidden_import"),  # autotune above heuristics
        (variant(kernel=AUTOTUNE + AUTOTUNE + KERNEL), "forbidden_import"),
        (
            variant(kernel=AUTOTUNE + KERNEL.replace("def k(", "def k2(") + AUTOTUNE + KERNEL).replace(
                "SPACE = {'B': [1]}\n", ""
            ),
            "decorator",
        ),  # two autotuned kernels: which decides the space?
        (variant(line="c = triton.Config({'BLOCK': 1})"), "forbidden_import"),
    ],
)
def test_an_idiom_turned_against_the_evaluator_is_refused(source: str, rule: str) -> None:
    finding = check_module(source)
    assert finding is not None and finding.reason == rule, finding


def test_a_refused_idiom_names_the_rule_and_the_rewrite() -> None:
    finding = check_module(
        variant(
            kernel="@triton.autotune(configs=[triton.Config({'BLOCK': 1})], key=['n'], "
            "reset_to_zero=['y_ptr'])\n" + KERNEL
        )
    )
    assert finding is not None and finding.reason == "decorator"
    assert "configs=[triton.Config(...), ...] and key=[...] only" in finding.message
    finding = check_module(variant(kernel="@triton.jit\n" + HEURISTICS + KERNEL.removeprefix("@triton.jit\n")))
    assert (
        finding is not None
        and finding.reason == "forbidden_import"
        and "rewrite: @triton.heuristics({" in finding.message
    )


def test_a_list_of_configurations_is_a_space_tried_in_order() -> None:
    from warpforge.kernels.space_values import expand

    source = (
        variant(line="k[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=num_warps)")
        .replace("SPACE = {'B': [1]}", "SPACE = [{'BLOCK': 64, 'num_warps': 2}, {'BLOCK': 128, 'num_warps': 4}]")
        .replace("def launch(x):", "def launch(x, BLOCK=64, num_warps=2):")
    )
    assert check_module(source) is None
    space = parse_variant(source, "listed").space
    assert space == {"@config": ['#0 {"BLOCK":64,"num_warps":2}', '#1 {"BLOCK":128,"num_warps":4}']}
    assert expand({"@config": space["@config"][1]}) == {"BLOCK": 128, "num_warps": 4}  # what launch receives
    for bad in (
        "SPACE = []",
        "SPACE = [{'BLOCK': x}]",
        "SPACE = [1, 2]",
        "SPACE = [{'@config': 1}]",
        "SPACE = [{'B': [1, 2]}]",
    ):
        finding = check_module(
            source.replace("SPACE = [{'BLOCK': 64, 'num_warps': 2}, {'BLOCK': 128, 'num_warps': 4}]", bad)
        )
        assert finding is not None and finding.reason == "space_value", (bad, finding)


def test_eval_tries_the_configurations_in_order() -> None:
    from warpforge.kernels.variant import next_configuration

    source = variant(line=TUNED_LINE, kernel=AUTOTUNE + KERNEL).replace("SPACE = {'B': [1]}\n", "")
    tuned = parse_variant(source, "tuned")
    first, second = tuned.space["@config"]
    assert next_configuration(tuned, {"@config": first}) == {"@config": second}
    assert next_configuration(tuned, {"@config": second}) is None  # past the last: the verdict stands
    assert next_configuration(parse_variant(variant(), "plain"), {"B": 1}) is None  # a product SPACE: no order
