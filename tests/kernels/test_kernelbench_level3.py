"""Whole-model KernelBench problems (level 3): list-valued sizes shrink, a missing package is named in one
line, and a problem that cannot be checked below its benchmark shape says why."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from warpforge.kernels.kernelbench import CHECK_ELEMENTS, NOTES, missing_import
from warpforge.kernels.task import load_task_file
from warpforge.kernels.taskdef import TaskError

ROOT = Path(__file__).resolve().parents[2]
LEVEL3 = ROOT.parent / "shared" / "kernelbench" / "level3"

MLP = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super().__init__()
        layers, current = [], input_size
        for hidden in hidden_layer_sizes:
            layers += [nn.Linear(current, hidden), nn.ReLU()]
            current = hidden
        self.network = nn.Sequential(*layers, nn.Linear(current, output_size))

    def forward(self, x):
        return self.network(x)


batch_size = 64
input_size = 4096
hidden_layer_sizes = HIDDEN
output_size = 2048


def get_inputs():
    return [torch.rand(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_layer_sizes, output_size]
"""


@pytest.mark.parametrize("hidden, n", [("[8192, 16384]", 2), ("(8192, 16384)", 2), ("[4096] * 3", 3)])
def test_list_and_tuple_sizes_are_scaled_down_like_scalar_sizes(tmp_path: Path, hidden: str, n: int) -> None:
    path = tmp_path / "wide_mlp.py"
    path.write_text(MLP.replace("HIDDEN", hidden))
    task = load_task_file(path)
    keys = [f"hidden_layer_sizes[{i}]" for i in range(n)]
    bench = task.shapes[0]
    assert [bench[k] for k in keys] == ([8192, 16384] if n == 2 else [4096] * 3)
    assert task.check_shapes and task.check_shapes != [bench]
    for shape in task.check_shapes:
        assert all(shape[k] < bench[k] for k in keys)  # every hidden size shrinks with the others
        inputs = task.make_inputs(shape, torch.float32, 0, "cpu")
        x, weights = inputs[0], inputs[1:]
        assert x.numel() <= CHECK_ELEMENTS
        # Linear(in, out).weight is (out, in): the hidden layers' weights follow the shape's hidden sizes.
        assert [w.shape[0] for w in weights[0 : 2 * n : 2]] == [shape[k] for k in keys]
        assert sum(w.numel() for w in weights) < 4096 * 8192  # under the first benchmark weight alone
    smallest = task.check_shapes[0]
    assert all(smallest[k] == 13 for k in keys)  # the first derived shape: every size at the prime 13


def test_a_missing_package_is_named_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "needs_pkg.py"
    path.write_text("import torch\nfrom wf_missing_pkg_xyz.ops import rearrange\n\n" + MLP.replace("HIDDEN", "[16]"))
    spec = importlib.util.spec_from_file_location("wf_needs_pkg", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(ModuleNotFoundError) as caught:
        spec.loader.exec_module(module)
    expected = "needs_pkg.py imports wf_missing_pkg_xyz, which is not installed: pip install wf_missing_pkg_xyz"
    assert missing_import(path, caught.value) == expected
    wrapped = TaskError("task file failed to import")  # a loader's error raised from the import's
    wrapped.__cause__ = caught.value
    assert missing_import(path, wrapped) == expected
    assert missing_import(path, ZeroDivisionError("division by zero")) is None  # only a missing module


def test_load_task_file_names_the_missing_package(tmp_path: Path) -> None:
    path = tmp_path / "needs_pkg.py"
    path.write_text("import torch\nimport wf_missing_pkg_xyz\n\n" + MLP.replace("HIDDEN", "[16]"))
    with pytest.raises(TaskError) as caught:
        load_task_file(path)
    assert str(caught.value) == (
        "needs_pkg.py imports wf_missing_pkg_xyz, which is not installed: pip install wf_missing_pkg_xyz"
    )


POOLED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AvgPool2d(IMAGE)  # the whole image: any smaller image has no output
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.conv(x)), 1))


batch_size = 16
image = IMAGE
num_classes = 100


def get_inputs():
    return [torch.rand(batch_size, 3, image, image)]


def get_init_inputs():
    return [num_classes]
"""


def test_a_size_the_code_refuses_to_halve_keeps_its_value_and_the_note_says_why(tmp_path: Path) -> None:
    path = tmp_path / "pooled.py"
    path.write_text(POOLED.replace("IMAGE", "224"))  # 3 x 224 x 224 = 150528 elements per image
    task = load_task_file(path)
    assert task.check_shapes == [{"batch_size": 1, "image": 224, "num_classes": 1}]
    note = NOTES[str(task.path)]
    assert "150528 elements" in note and "image stays 224: the code fails at 112" in note
    assert "checked there" in note


def test_inputs_too_large_even_at_the_smallest_sizes_get_a_reason_with_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "pooled.py"
    path.write_text(POOLED.replace("IMAGE", "640"))  # 3 x 640 x 640 = 1228800 elements: 4.9 MB in float32
    task = load_task_file(path)
    assert task.check_shapes == task.shapes  # nothing derived: only its own shape
    note = NOTES[str(task.path)]
    assert "none derived" in note and "1228800 elements" in note and "4.9 MB" in note
    assert "image stays 640" in note and "\n" not in note


ASSERTED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        assert channels % 64 == 0
        self.scale = nn.Parameter(torch.ones(channels))

    def forward(self, x):
        return x * self.scale


batch_size = 2
channels = 64


def get_inputs():
    return [torch.rand(batch_size, channels)]


def get_init_inputs():
    return [channels]
"""


def test_a_bare_assert_is_quoted_in_the_note(tmp_path: Path) -> None:
    path = tmp_path / "asserted.py"
    path.write_text(ASSERTED)
    task = load_task_file(path)
    # The assert admits no channels below the benchmark's 64 (the candidates 13 and 1 fail it): the file's own
    # 64 is kept, and the note quotes the assert (an AssertionError without a message says nothing).
    note = NOTES.get(str(task.path), "")
    assert "assert channels % 64 == 0" in note
    assert all(s["channels"] == 64 for s in task.check_shapes)


@pytest.mark.skipif(not LEVEL3.is_dir(), reason=f"KernelBench problems not found at {LEVEL3}")
def test_shallow_wide_mlp_check_inputs_are_small() -> None:
    task = load_task_file(LEVEL3 / "2_ShallowWideMLP.py")
    # the file: hidden_layer_sizes = [32768, 32768] (two 4.3 GB weights at the benchmark shape)
    assert task.shapes[0]["hidden_layer_sizes[0]"] == task.shapes[0]["hidden_layer_sizes[1]"] == 32768
    for shape in task.check_shapes:
        inputs = task.make_inputs(shape, torch.float32, 0, "cpu")
        assert sum(t.numel() for t in inputs) < 32768 * 32768 // 16


STACKED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, widths):
        super().__init__()
        width, depth = widths
        self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)


batch_size = 32
widths = [512, 12]  # (features, number of layers)


def get_inputs():
    return [torch.rand(batch_size, widths[0])]


def get_init_inputs():
    return [widths]
"""


def test_a_list_item_that_counts_layers_keeps_its_value(tmp_path: Path) -> None:
    path = tmp_path / "stacked.py"
    path.write_text(STACKED)
    task = load_task_file(path)
    assert len(task.param_names) == 2 * 12  # weight and bias of 12 layers
    assert task.check_shapes and all(s["widths[1]"] == 12 for s in task.check_shapes)
    # The width shrinks with batch_size (the first derived shape puts every size at 13); 32 x 512 inputs fit the
    # budget, so the benchmark shape itself may be among them.
    assert task.check_shapes[0] == {"batch_size": 13, "widths[0]": 13, "widths[1]": 12}
    assert "widths[1]" in task.fixed_keys and "widths[0]" not in task.fixed_keys  # hidden shapes keep the count
    for shape in task.check_shapes:
        inputs = task.make_inputs(shape, torch.float32, 0, "cpu")
        assert len(inputs) == 1 + 24 and inputs[1].shape == (shape["widths[0]"], shape["widths[0]"])
