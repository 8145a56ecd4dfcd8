"""Matching by-path problems to task families through adapters (no KernelBench files needed: the problems are
written here): the member found by its numbers, reshaped layouts, the adapted template run end to end, probes
that task generators accept, group divisibility kept, and a true reason when no size can be derived."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from warpforge.evaluator.judge.matching import find_match, key_positions, matched_files
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.kernelbench import NOTES
from warpforge.kernels.task import get_task, load_task_file

PROBLEM = """
import pytest
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self{init}):
        super().__init__()
{body}

    def forward(self, x):
        return {expr}


{globals}


def get_inputs():
    return [torch.rand({dims})]


def get_init_inputs():
    return [{init_inputs}]
"""


def write(
    tmp_path: Path,
    name: str,
    expr: str,
    dims: str,
    globals_: str,
    init: str = "",
    body: str = "        pass",
    init_inputs: str = "",
) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(
        PROBLEM.format(expr=expr, dims=dims, globals=globals_, init=init, body=body, init_inputs=init_inputs)
    )
    return path


def test_a_leaky_relu_is_the_member_with_its_slope_whatever_the_file_is_called(tmp_path: Path) -> None:
    path = write(
        tmp_path, "softmax_fast", "torch.nn.functional.leaky_relu(x, 0.2)", "rows, cols", "rows = 64\ncols = 1000"
    )
    match, _ = find_match(load_task_file(path))
    assert match is not None and (match.task, match.member) == ("elementwise", "leaky_relu(0.2)")
    assert dict(match.constants) == {"OP": "leaky_relu", "OP_A": 0.2, "OP_B": 0.0}


def test_a_slope_not_in_the_table_matches_no_member(tmp_path: Path) -> None:
    path = write(tmp_path, "leaky", "torch.nn.functional.leaky_relu(x, 0.15)", "rows, cols", "rows = 64\ncols = 1000")
    match, tried = find_match(load_task_file(path))
    assert match is None and any(t.startswith("elementwise: outputs differ") for t in tried)


def test_a_row_l2_norm_runs_through_the_adapted_template(tmp_path: Path) -> None:
    path = write(
        tmp_path, "rownorm", "x / torch.norm(x, p=2, dim=1, keepdim=True)", "batch, dim", "batch = 256\ndim = 4096"
    )
    problem = load_task_file(path)
    match, _ = find_match(problem)
    assert match is not None and (match.task, match.member) == ("normalize", "l2")
    assert match.adapter is not None and match.keys == {"M": "batch", "R": "dim", "N": []}
    copy, variants = matched_files(problem, match, tmp_path / "matched")
    assert {v.stem for v in variants} == {"looped", "single_pass"}
    task = load_task_file(copy)
    shape = task.check_shapes[1]
    (x,) = task.make_inputs(shape, torch.float32, 0, "cpu")
    for variant in variants:
        text = variant.read_text()
        assert check_module(text) is None  # the adapted launch stays within the variant grammar
        assert "OP = 'l2'" in text and "wf_shape0 = x.shape" in text
        spec = importlib.util.spec_from_file_location(f"wf_adapted_{variant.stem}", variant)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        params = {k: v[len(v) // 2] for k, v in module.SPACE.items()}
        out = module.launch(x, **params)
        want = x.double() / x.double().norm(dim=1, keepdim=True)
        assert out.shape == x.shape
        torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-6)


def test_a_sum_over_dim_1_of_a_2d_input_is_the_reduce_family_with_n_1(tmp_path: Path) -> None:
    path = write(tmp_path, "rowsum", "torch.sum(x, dim=1)", "batch, dim", "batch = 256\ndim = 4096")
    match, _ = find_match(load_task_file(path))
    assert match is not None and (match.task, match.member) == ("reduce", "sum")
    assert match.adapter is not None and match.adapter.groups == (((0, 1), (1, 2), (2, 2)),)


def test_attention_and_rotary_find_their_keys_with_sizes_their_generators_accept() -> None:
    # Distinct primes give HQ=13 with HKV=17 (not a multiple) and an odd head dim: both generators refuse.
    for name, keys in (("attention", {"B", "HQ", "HKV", "S", "D"}), ("rotary", {"B", "H", "S", "D"})):
        located = key_positions(get_task(name))
        assert located is not None, name
        where, _ = located
        assert {k for k, spots in where.items() if spots} == keys


GROUPED = """
import pytest
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.norm(x)


batch = 16
channels = 64
groups = 8
length = 512


def get_inputs():
    return [torch.rand(batch, channels, length)]


def get_init_inputs():
    return [channels, groups]
"""


def test_a_grouped_problem_is_probed_at_sizes_where_its_groups_divide(tmp_path: Path) -> None:
    path = tmp_path / "grouped.py"
    path.write_text(GROUPED)
    match, tried = find_match(load_task_file(path))
    # The probe found sizes where the groups divide (no TaskError on the way), and the group count decides:
    # channel_norm's group norm of 8 groups, the 1-D input as [N, C, 1, L].
    assert not any("TaskError" in t for t in tried), tried
    assert match is not None and match.label == "channel_norm[group_norm(8,eps=1e-05)]", tried


IMAGE = """
import pytest
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, kernel_size=3)

    def forward(self, x):
        return self.conv(x)


batch_size = 64


def get_inputs():
    return [torch.rand(batch_size, 2, 240, 240)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_literal_image_sizes_over_the_budget_are_checked_at_batch_1_and_the_note_says_why(tmp_path: Path) -> None:
    path = tmp_path / "conv.py"
    path.write_text(IMAGE)
    task = load_task_file(path)
    assert task.check_shapes == [{"batch_size": 1}]
    note = NOTES[str(task.path)]
    assert "115200 elements" in note and "literals" in note  # 2 x 240 x 240 at batch 1
    _, tried = find_match(task)
    assert not any("reads no size" in t for t in tried)  # it reads one: batch_size


MATMUL = """
import pytest
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


M = 4096
N = 4096
K = 4096


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_split_k_configurations_that_pass_constraints_compile_in_fp32(tmp_path: Path) -> None:
    """Compile facts, not the formula: the split_k configuration with the most shared memory among those its
    constraints accept for an fp32 problem compiles for sm_90 within its limit (with 2-byte tiles assumed by the
    constraints, the largest one they accepted needed 409600 bytes: out_of_resources)."""
    from warpforge.evaluator.run.stages import compile_stage, space_stage
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.evaluator.sandbox.supervisor import ChildPool
    from warpforge.kernels.variant import load_variant

    path = tmp_path / "mm.py"
    path.write_text(MATMUL)
    problem = load_task_file(path)
    match, _ = find_match(problem)
    assert match is not None and match.task == "matmul"
    copy, variants = matched_files(problem, match, tmp_path / "matched")
    task = load_task_file(copy)
    assert task.shapes[0]["ELEM_BYTES"] == 4
    variant = load_variant(next(v for v in variants if v.stem == "split_k"))

    def tiles(c: dict) -> int:
        return c["num_stages"] * (c["BLOCK_M"] * c["BLOCK_K"] + c["BLOCK_K"] * c["BLOCK_N"])

    with ChildPool() as pool:
        failure, configs = space_stage(pool, Job(task, variant, {}))
        assert failure is None and configs
        biggest = max(configs, key=tiles)
        failure, resources = compile_stage(pool, Job(task, variant, biggest))
    assert failure is None, failure.message
    assert all(r.shared_bytes is not None and r.shared_bytes <= 232448 for r in resources)


def test_hidden_shapes_keep_the_reduced_dimension_and_the_matched_element_width(tmp_path: Path) -> None:
    # `dim` reaches the constructor and sizes no input: perturbed like a size (to 2, 3 or 4) it made the
    # argmin another function, or an IndexError ("got 4") that crashed the worker. ELEM_BYTES is the matched
    # copy's alias: its value is the element width of float32, 4.
    import random

    from warpforge.evaluator.judge.judge import hidden_shapes
    from warpforge.kernels.kernelbench import ALIAS_ATTR

    path = write(
        tmp_path,
        "argmin_dim",
        "torch.argmin(x, dim=self.dim)",
        "batch, dim1, dim2",
        "batch = 64\ndim1 = 256\ndim2 = 255\ndim = 1",
        init=", dim",
        body="        self.dim = dim",
        init_inputs="dim",
    )
    aliases = {"M": "batch", "R": "dim1", "N": "dim2", "ELEM_BYTES": 4}
    path.write_text(path.read_text() + f"\n{ALIAS_ATTR} = {aliases!r}\n")
    task = load_task_file(path)
    assert task.fixed_keys == {"dim", "ELEM_BYTES"}
    shapes = [s for seed in range(40) for s in hidden_shapes(task, random.Random(seed))]
    assert shapes and all(s["dim"] == 1 and s["ELEM_BYTES"] == 4 for s in shapes)
    assert {s["M"] for s in shapes} - {c["M"] for c in task.check_shapes}  # the sizes still move
    (x,) = task.make_inputs(shapes[0], torch.float32, 0, "cpu")
    assert torch.equal(task.reference(x), torch.argmin(x, dim=1))


@pytest.mark.parametrize(
    ("forward", "inputs", "flags"),
    [
        ("torch.matmul(a.T, b)", "torch.rand(K, M), torch.rand(K, N)", (True, False)),
        ("torch.matmul(a, b.T)", "torch.rand(M, K), torch.rand(N, K)", (False, True)),
        ("torch.matmul(a.T, b.T)", "torch.rand(K, M), torch.rand(N, K)", (True, True)),
    ],
)
def test_a_transposed_operand_is_matmul_on_a_strided_view(
    tmp_path: Path, forward: str, inputs: str, flags: tuple[bool, bool]
) -> None:
    path = tmp_path / "mm_t.py"
    path.write_text(
        MATMUL.replace("torch.matmul(a, b)", forward)
        .replace("torch.rand(M, K), torch.rand(K, N)", inputs)
        .replace("N = 4096", "N = 2048")
    )
    problem = load_task_file(path)
    match, _ = find_match(problem)
    assert match is not None and match.task == "matmul" and match.in_order
    assert match.adapter is not None and match.adapter.transposed == flags and not match.adapter.reshapes
    assert match.keys == {"M": "M", "N": "N", "K": "K"}
    _, variants = matched_files(problem, match, tmp_path / "matched")
    assert {v.stem for v in variants} == {"persistent", "split_k", "tiled_grouped"}
    for variant in variants:
        text = variant.read_text()
        assert check_module(text) is None  # the adapted launch stays within the variant grammar
        assert text.count(".transpose(-2, -1)") == sum(flags) and ".contiguous()" not in text  # a view, no copy


@pytest.mark.slow
def test_an_fp32_transposed_gemm_is_judged_ok_at_fp32_accuracy(tmp_path: Path) -> None:
    """The judge's faithful tl.dot (TF32 for fp32 inputs unless told otherwise) on the adapted template: the
    templates multiply fp32 as tf32x3, within KernelBench's 1e-4 (TF32 alone is ~1e-3 off and is incorrect)."""
    from warpforge.evaluator.run.backend import get_backend
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.kernels.variant import load_variant

    path = tmp_path / "mm_bt.py"
    path.write_text(
        MATMUL.replace("torch.matmul(a, b)", "torch.matmul(a, b.T)").replace(
            "torch.rand(M, K), torch.rand(K, N)", "torch.rand(M, K), torch.rand(N, K)"
        )
    )
    problem = load_task_file(path)
    match, _ = find_match(problem)
    assert match is not None
    copy, variants = matched_files(problem, match, tmp_path / "matched")
    task = load_task_file(copy)
    variant = load_variant(next(v for v in variants if v.stem == "tiled_grouped"))
    params = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 4, "num_warps": 4, "num_stages": 2}
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(Job(task, variant, params))
    finally:
        backend.close()
    assert result.verdict.value == "ok", result.message


@pytest.mark.slow
def test_a_layernorm_without_affine_is_layernorm_with_its_weights_filled_and_judged_ok(tmp_path: Path) -> None:
    """``FILL_INPUTS``: the problem passes x alone, the task takes (x, w, b); the adapted launch makes w = 1 and
    b = 0 from x's last dimension, and the judge runs it on the problem's own reference."""
    from warpforge.evaluator.run.backend import get_backend
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.kernels.variant import load_variant

    path = write(
        tmp_path, "ln_plain", "torch.nn.functional.layer_norm(x, (dim,))", "batch, dim", "batch = 64\ndim = 1000"
    )
    problem = load_task_file(path)
    match, _ = find_match(problem)
    assert match is not None and match.task == "layernorm" and match.adapter is not None
    assert [(f.index, f.value) for f in match.adapter.filled] == [(1, 1.0), (2, 0.0)]
    assert "input 1 filled with 1, input 2 filled with 0" in match.describe()
    copy, variants = matched_files(problem, match, tmp_path / "matched")
    assert variants
    for path_ in variants:
        text = path_.read_text()
        assert check_module(text) is None and "def launch(x, **" in text  # w and b leave the signature
        assert "torch.full((x.shape[1], ), 1.0" in text and "torch.full((x.shape[1], ), 0.0" in text
    task = load_task_file(copy)
    backend = get_backend("interpret")
    try:
        for path_ in variants:  # each judged on the constant rows too, where a raw-sum mean is ~6e-5 off 0
            variant = load_variant(path_)
            # a generous wall: the sm_90 compile shares two cores with the rest of the suite
            result = backend.evaluate(Job(task, variant, next(iter(variant.configs())), timeout_s=600))
            assert result.verdict.value == "ok", (path_.stem, result.message)
    finally:
        backend.close()


def test_a_bias_free_problem_matches_nothing_where_the_task_fills_no_input(tmp_path: Path) -> None:
    """A problem with fewer tensors than a task that declares no ``FILL_INPUTS`` is refused by the count."""
    path = write(
        tmp_path, "half_ln", "torch.nn.functional.layer_norm(x, (dim,)) * 0.5", "batch, dim", "batch = 64\ndim = 1000"
    )
    match, tried = find_match(load_task_file(path))
    assert match is None
    assert any(t.startswith("layernorm: outputs differ") for t in tried)
    assert any(t.startswith("swiglu: takes 2 tensors, the problem 1") for t in tried)
