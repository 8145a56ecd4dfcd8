"""A KernelBench-style file (class Model, get_inputs, get_init_inputs) is accepted as a task by path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant

HERE = Path(__file__).parent / "kernelbench"


def test_kernelbench_file_follows_the_task_contract() -> None:
    task = load_task_file(HERE / "relu.py")
    assert task.name == "relu" and task.shapes == [{"batch_size": 16, "dim": 1031}]
    (x,) = task.make_inputs(task.shapes[0], torch.float32, 3, "cpu")
    (x2,) = task.make_inputs(task.shapes[0], torch.float32, 3, "cpu")
    assert torch.equal(x, x2) and x.shape == (16, 1031)
    assert torch.equal(task.reference(x), torch.relu(x))
    assert task.reference(x.double()).dtype == torch.float64
    assert task.bytes_moved(task.shapes[0], torch.float32) == 2 * 16 * 1031 * 4


@pytest.mark.slow
def test_kernelbench_task_evaluates_a_triton_variant() -> None:
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(
            Job(
                load_task_file(HERE / "relu.py"), load_variant(HERE / "relu_variant.py"), {"BLOCK": 256, "num_warps": 4}
            )
        )
    finally:
        backend.close()
    assert result.verdict is Verdict.OK, result.message


def test_inputs_drawn_from_threads_at_different_shapes_match_serial_draws() -> None:
    from concurrent.futures import ThreadPoolExecutor

    task = load_task_file(HERE / "relu.py")
    shapes = task.check_shapes
    assert len(shapes) >= 3 and task.shapes == [{"batch_size": 16, "dim": 1031}]
    jobs = [(shapes[i % len(shapes)], i) for i in range(24)]
    serial = [task.make_inputs(s, torch.float32, seed, "cpu")[0] for s, seed in jobs]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda job: task.make_inputs(job[0], torch.float32, job[1], "cpu")[0], jobs))
    for (shape, _), a, b in zip(jobs, serial, threaded):
        assert a.shape == (shape["batch_size"], shape["dim"]) and torch.equal(a, b)


BATCHNORM_DROPOUT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm2d(features)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.bn(x))


batch_size = 16
features = 12
dim = 20


def get_inputs():
    return [torch.randn(batch_size, features, dim, dim) * 3 + 1]


def get_init_inputs():
    return [features]
"""


def test_a_problem_runs_as_kernelbench_runs_it_batch_statistics_no_dropout_state_untouched(tmp_path: Path) -> None:
    """KernelBench calls Model as constructed (training mode): the BatchNorm normalizes with the batch's own
    statistics, not the running ones its state passes; the Dropout is off (a random mask is no function); and
    the running statistics the training BatchNorm updates are updated on copies, never on the case's tensors."""
    path = tmp_path / "bn_drop.py"
    path.write_text(BATCHNORM_DROPOUT)
    task = load_task_file(path)
    shape = task.check_shapes[0]
    inputs = task.make_inputs(shape, torch.float32, 0, "cpu")
    x, weight, bias, mean, var, tracked = inputs
    drawn = [t.clone() for t in inputs]
    out = task.reference(*inputs)
    want = torch.nn.functional.batch_norm(x.double(), None, None, weight.double(), bias.double(), training=True)
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)
    assert torch.equal(task.reference(*inputs), out)  # no random mask: the same output twice
    for before, after in zip(drawn, inputs):
        assert torch.equal(before, after)
