"""Real KernelBench problems (the unchanged upstream files shipped in warpforge/data/problems): derived check
shapes, adversarial inputs, numeric matching to built-in tasks, and the two tolerance rules side by side."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from warpforge.evaluator.judge.matching import find_match
from warpforge.evaluator.judge.tolerances import tolerance_verdicts
from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.kernelbench import CHECK_ELEMENTS
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.variant import parse_variant
from warpforge.problems import SHIPPED

LEVEL1 = SHIPPED / "level1"


def problem(name: str):  # type: ignore[no-untyped-def]
    return load_task_file(LEVEL1 / f"{name}.py")


def test_the_benchmark_shape_is_the_files_globals_and_check_shapes_are_small_and_odd() -> None:
    task = problem("40_LayerNorm")
    # the file says batch_size = 16, features = 64, dim1 = 256, dim2 = 256
    assert task.shapes == [{"batch_size": 16, "features": 64, "dim1": 256, "dim2": 256}]
    assert task.param_names == ("ln.weight", "ln.bias")
    assert len(task.check_shapes) >= 2
    sizes = {v for s in task.check_shapes for v in s.values()}
    assert 1 in sizes and 13 in sizes and any(v > 2 and (v - 1) & (v - 2) == 0 for v in sizes)  # 2^k + 1
    for shape in task.check_shapes:
        inputs = task.make_inputs(shape, torch.float32, 0, "cpu")
        assert max(t.numel() for t in inputs) <= CHECK_ELEMENTS
        x, w, b = inputs  # the weights follow the shape: LayerNorm over (features, dim1, dim2)
        assert w.shape == x.shape[1:] and b.shape == x.shape[1:]
        assert task.init_inputs(shape) == ((shape["features"], shape["dim1"], shape["dim2"]),)
        expected = torch.nn.functional.layer_norm(x.double(), x.shape[1:], w.double(), b.double())
        torch.testing.assert_close(task.reference(*(t.double() for t in inputs)), expected)


def test_shapes_do_not_leak_between_each_other() -> None:
    task = problem("95_CrossEntropyLoss")  # input_shape = (num_classes,) is recomputed per shape
    a, b = task.check_shapes[0], task.check_shapes[-1]
    logits_a, _ = task.make_inputs(a, torch.float32, 0, "cpu")
    logits_b, targets_b = task.make_inputs(b, torch.float32, 0, "cpu")
    logits_a2, _ = task.make_inputs(a, torch.float32, 0, "cpu")
    assert logits_a.shape == (a["batch_size"], a["num_classes"]) and torch.equal(logits_a, logits_a2)
    assert logits_b.shape == (b["batch_size"], b["num_classes"]) and int(targets_b.max()) < b["num_classes"]


def test_dimension_indices_and_small_sizes_stay_as_written() -> None:
    task = problem("47_Sum_reduction_over_a_dimension")  # reduce_dim = 1 is an index, not a size
    assert all(s["reduce_dim"] == 1 for s in task.check_shapes)


def test_adversarial_inputs_cover_signs_magnitudes_ties_and_rows_and_leave_integers_alone() -> None:
    task = problem("95_CrossEntropyLoss")
    shape = task.check_shapes[0]
    base = task.make_inputs(shape, torch.float32, 5, "cpu")
    sets = task.adversarial_inputs(shape, torch.float32, 5, "cpu")  # type: ignore[misc]
    assert {"negated", "signed", "large_magnitude", "tiny_magnitude", "ties", "constant_rows"} <= set(sets)
    assert bool((sets["negated"][0] < 0).any()) and bool((base[0] >= 0).all())  # torch.rand: never negative
    assert torch.equal(sets["negated"][0], -base[0])
    assert sets["ties"][0].unique().numel() < base[0].numel()
    assert bool((sets["constant_rows"][0] == sets["constant_rows"][0][:, :1]).all())
    for inputs in sets.values():
        assert torch.equal(inputs[1], base[1])  # integer targets untouched


COPY = """
import torch
import triton
import triton.language as tl

TASK = "19_ReLU"
SPACE = {"BLOCK": [1024]}


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, BODY, mask=mask)


def launch(x, BLOCK=1024):
    y = torch.empty_like(x)
    _k[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
    return y
"""


@pytest.mark.slow
@pytest.mark.parametrize(("body", "verdict"), [("x", Verdict.INCORRECT), ("tl.maximum(x, 0.0)", Verdict.OK)])
def test_a_copy_as_relu_is_refused_and_a_relu_passes(body: str, verdict: Verdict) -> None:
    task = problem("19_ReLU")
    x = task.make_inputs(task.check_shapes[0], torch.float32, 0, "cpu")[0]
    assert bool((x >= 0).all())  # get_inputs() alone cannot tell a copy from a ReLU
    variant = parse_variant(COPY.replace("BODY", body), name="relu_" + ("copy" if body == "x" else "max"))
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(Job(task, variant, {"BLOCK": 1024}))
    finally:
        backend.close()
    assert result.verdict is verdict, result.message
    if verdict is Verdict.OK:
        text = " ".join(result.unchecked)
        assert "batch_size=1,dim=257" in text and "negated" in text and "input kinds" in text
        assert "batch_size=4096,dim=393216" in text  # the benchmark shape, named as not run
    else:
        assert result.reason == "fails_adversarial_input"


def test_softmax_matmul_and_relu_problems_match_by_their_numbers() -> None:
    match, _ = find_match(problem("23_Softmax"))
    assert match is not None and match.task == "softmax" and match.keys == {"M": "batch_size", "N": "dim"}
    match, _ = find_match(problem("2_Standard_matrix_multiplication_"))
    assert match is not None and match.task == "matmul" and match.in_order
    match, tried = find_match(problem("19_ReLU"))
    assert match is not None and (match.task, match.member) == ("elementwise", "relu")
    # Tried before it (alphabetical): attention and cross_entropy take no one tensor; channel_norm does with its
    # other inputs filled (an InstanceNorm without affine), and its outputs differ.
    assert all("outputs differ" not in t for t in tried if not t.startswith("channel_norm"))


def test_a_softmax_over_the_other_dimension_or_with_another_name_is_judged_by_its_numbers(tmp_path: Path) -> None:
    src = (LEVEL1 / "23_Softmax.py").read_text()
    other = tmp_path / "my_softmax.py"
    other.write_text(src.replace("dim=1", "dim=0"))
    assert "dim=0" in other.read_text()
    assert find_match(load_task_file(other))[0] is None
    renamed = tmp_path / "anything.py"
    renamed.write_text(src)
    match = find_match(load_task_file(renamed))[0]
    assert match is not None and match.task == "softmax"


def test_an_rmsnorm_without_weight_over_dim_1_is_the_normalize_family_through_a_reshape() -> None:
    match, _ = find_match(problem("36_RMSNorm_"))
    assert match is not None and (match.task, match.member) == ("normalize", "rms(1e-05)")
    assert match.adapter is not None and match.adapter.groups == (((0, 1), (1, 2), (2, 4)),)
    assert match.keys == {"M": "batch_size", "R": "features", "N": ["dim1", "dim2"]}


@pytest.mark.parametrize(
    ("name", "member"),
    [
        ("89_cumsum", "cumsum"),
        ("90_cumprod", "cumprod"),
        ("91_cumsum_reverse", "cumsum_reverse"),
        ("92_cumsum_exclusive", "cumsum_exclusive"),
    ],
)
def test_scans_over_the_last_dim_are_the_scan_family_with_n_1(name: str, member: str) -> None:
    # 91 flips, scans and flips back; 92 concatenates zeros with the cumsum of all but the last input.
    match, _ = find_match(problem(name))
    assert match is not None and (match.task, match.member) == ("scan", member)
    assert match.adapter is not None and match.adapter.groups == (((0, 1), (1, 2), (2, 2)),)
    assert match.keys == {"M": "batch_size", "L": "input_shape[0]", "N": []}  # N: an empty product, 1
    assert dict(match.constants) == {
        "OP": member[3:].split("_")[0],
        "REVERSE": "reverse" in member,
        "EXCLUSIVE": "exclusive" in member,
    }


def test_both_tolerance_rules_on_the_same_outputs() -> None:
    torch.manual_seed(0)
    ref = torch.randn(64, 64) * 100.0  # RMS 100: warpforge's atol scales to 1e-4 x 100 = 1e-2
    out = ref + 5e-3  # within warpforge's rule, beyond allclose(1e-4) on elements near 0
    verdicts = tolerance_verdicts(out, ref.double(), ref)
    assert verdicts.warpforge and not verdicts.kernelbench and verdicts.kernelbench_v0
    assert "KernelBench atol=rtol=1e-4 fail" in verdicts.line()
    small = torch.randn(64, 64) * 1e-3  # RMS 1e-3: allclose's absolute 1e-4 is loose, ours is 1e-7
    verdicts = tolerance_verdicts(small + 5e-5, small.double(), small)
    assert not verdicts.warpforge and verdicts.kernelbench


def test_builtin_tasks_are_unchanged_by_the_by_path_loader() -> None:
    assert get_task("softmax").builtin and get_task("softmax").adversarial_inputs is not None
