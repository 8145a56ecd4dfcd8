"""KernelBench's answer format end to end: a hand-written ``ModelNew`` for a level-2 GEMM + bias + ReLU
problem (tests/kernels/kernelbench/gemm_add_relu.py, KernelBench's 76_Gemm_Add_ReLU at small odd sizes) is
built from the problem's init inputs, gets the reference's weights, and is judged like every variant.

The reference's truth is torch's own module (kernels/kernelbench.py runs it with the case's state); nothing
here restates the expected numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.sandbox.child.model_new import StateMismatch, load_reference_state
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.model_spec import case_init
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant, parse_variant

HERE = Path(__file__).parent / "kernelbench"
ANSWER = (HERE / "gemm_add_relu_modelnew.py").read_text()
BIAS_ADD = "acc = tl.maximum(acc + bias[None, :], 0.0)"


@pytest.fixture(scope="module")
def task():
    return load_task_file(HERE / "gemm_add_relu.py")


@pytest.fixture(scope="module")
def backend():
    engine = get_backend("interpret")
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def kernelbench() -> Path:
    root = Path(__file__).parents[2].parent / "shared" / "kernelbench"
    if not (root / "level2").is_dir():
        pytest.skip(f"KernelBench problems not found at {root} (../shared/kernelbench beside the repository)")
    return root


def evaluate(backend, task, source: str, name: str = "answer"):
    return backend.evaluate(Job(task, parse_variant(source, name).for_task(task.name), {}))


def _answer_class():
    namespace: dict = {}
    exec(compile(ANSWER, "gemm_add_relu_modelnew.py", "exec"), namespace)
    return namespace["ModelNew"]


def test_the_state_is_the_reference_s_whatever_model_new_initialised(task) -> None:
    inputs = task.make_inputs(task.shapes[0], torch.float32, 7, "cpu")
    state = inputs[1:]
    model = _answer_class()(*case_init(task, task.shapes[0]))
    load_reference_state(model, list(task.param_names), state)
    own = torch.nn.Module.state_dict(model)
    for name, tensor in zip(task.param_names, state):
        assert torch.equal(own[name], tensor)
        assert own[name].data_ptr() == tensor.data_ptr()  # shared: a kernel writing a weight is a mutated input
    assert not any(p.requires_grad for p in model.parameters())


def test_a_differently_named_state_is_refused_naming_the_reference_s_names(task) -> None:
    inputs = task.make_inputs(task.shapes[0], torch.float32, 7, "cpu")
    model = _answer_class()(*case_init(task, task.shapes[0]))
    with pytest.raises(StateMismatch, match=r"name your parameters like the reference's: bias, linear.weight"):
        load_reference_state(model, ["bias", "linear.weight"], inputs[1:])
    with pytest.raises(StateMismatch, match="other shapes"):
        load_reference_state(model, list(task.param_names), (inputs[1][:-1], inputs[2]))


@pytest.mark.slow
def test_a_hand_written_model_new_is_ok(backend, task) -> None:
    result = evaluate(backend, task, ANSWER)
    assert result.verdict is Verdict.OK, result.message
    assert result.checked


@pytest.mark.parametrize(
    "forward",
    [
        "        return x @ self.gemm.weight.t()\n",
        "        return torch.nn.functional.linear(x, self.gemm.weight)\n",
        "        return self.gemm(x)\n",
    ],
)
def test_torch_doing_the_gemm_is_rejected(backend, task, forward: str) -> None:
    result = evaluate(backend, task, ANSWER.replace("        return y\n", forward))
    assert result.verdict is Verdict.REJECTED and result.reason == "torch_compute_call", result.message


@pytest.mark.slow
def test_the_bias_dropped_is_incorrect(backend, task) -> None:
    source = ANSWER.replace(BIAS_ADD, "acc = tl.maximum(acc, 0.0)")
    assert source != ANSWER
    result = evaluate(backend, task, source)
    assert result.verdict is Verdict.INCORRECT, result.message


def test_a_model_new_ignoring_the_loaded_state_is_caught(backend, task) -> None:
    # Its own parameter (`my_bias`, zeros) instead of the reference's `bias`: the state cannot be loaded.
    source = ANSWER.replace("self.bias", "self.my_bias")  # where it is bound and where forward reads it
    assert source.count("self.my_bias") == 2
    result = evaluate(backend, task, source)
    assert result.verdict is Verdict.REJECTED and result.reason == "state_mismatch", result.message
    assert "gemm.weight" in result.message and "my_bias" in result.message


@pytest.mark.slow
def test_a_kernel_variant_gets_the_state_as_trailing_inputs(backend) -> None:
    task = load_task_file(HERE / "linear_relu.py")
    assert task.param_names == ("linear.weight", "linear.bias")
    result = backend.evaluate(Job(task, load_variant(HERE / "linear_relu_variant.py"), {"BM": 16, "num_warps": 4}))
    assert result.verdict is Verdict.OK, result.message


def test_the_real_kernelbench_problem_has_the_fixture_s_state(kernelbench: Path) -> None:
    """The fixture is KernelBench's level-2 problem at small sizes: same state names, init inputs as JSON."""
    source = (kernelbench / "level2" / "76_Gemm_Add_ReLU.py").read_text()
    small = source.replace("in_features = 8192", "in_features = 40").replace("out_features = 8192", "out_features = 24")
    namespace: dict = {}
    exec(compile(small, "76_Gemm_Add_ReLU.py", "exec"), namespace)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    assert tuple(model.state_dict()) == load_task_file(HERE / "gemm_add_relu.py").param_names
    assert check_module(ANSWER) is None


@pytest.mark.slow
def test_model_new_is_benchmarked_and_re_measured_with_the_reference_s_state(task) -> None:
    """The bench child builds ModelNew once per case on buffers refilled per timed call; every rechecked
    timed output must match the reference of that call's exact inputs (weights included)."""
    from warpforge.evaluator.run.timing import BenchSettings, ab_stage, bench_stage
    from warpforge.evaluator.sandbox.supervisor import ChildPool

    job = Job(task, parse_variant(ANSWER, "answer").for_task(task.name), {})
    zero_bias = Job(
        task, parse_variant(ANSWER.replace(BIAS_ADD, "acc = tl.maximum(acc, 0.0)"), "b").for_task(task.name), {}
    )
    with ChildPool() as pool:
        failure, shapes, _ = bench_stage(
            pool, job, "cpu", True, task.shapes, torch.float32, BenchSettings(warmup=1, reps=4, wall_calls=2, recheck=2)
        )
        assert failure is None and shapes and all(s.p50_ms for s in shapes), failure and failure.message
        failure, a, b = ab_stage(pool, job, job, "cpu", True, task.shapes, torch.float32, rounds=2)
        assert failure is None and len(a) == len(b) == 2, failure and failure.message
        failure, _, _ = ab_stage(pool, job, zero_bias, "cpu", True, task.shapes, torch.float32, rounds=2)
        assert failure is not None and failure.reason == "timed_output_incorrect"
