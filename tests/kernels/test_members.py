"""A family's member as a task of its own (kernels/members.py): its name, its reference, its templates and the
file every loader reads, against torch computed here."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from warpforge.kernels.members import member_files, op_identifier, split_member, with_constants
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.taskdef import TaskError
from warpforge.kernels.variant import builtin_variants


def test_names_parse_to_one_canonical_form() -> None:
    assert (
        split_member("elementwise[gelu_tanh]") == split_member("elementwise:gelu_tanh") == ("elementwise", "gelu_tanh")
    )
    assert split_member("elementwise[leaky_relu(0.01)]") == ("elementwise", "leaky_relu(0.01)")
    assert split_member("softmax") is None and split_member("kb/19_ReLU.py") is None
    assert op_identifier("elementwise[hardtanh(0.0,6.0)]") == "elementwise_hardtanh_0_0_6_0"
    assert op_identifier("softmax") == "softmax"
    assert get_task("elementwise:gelu_tanh") is get_task("elementwise[gelu_tanh]")


def test_a_member_task_computes_the_member() -> None:
    task = get_task("elementwise[gelu_tanh]")
    assert (task.name, task.member, task.builtin) == ("elementwise[gelu_tanh]", "gelu_tanh", True)
    x = torch.linspace(-6, 6, 301, dtype=torch.float64).view(7, 43)
    torch.testing.assert_close(task.reference(x), F.gelu(x, approximate="tanh"), rtol=1e-12, atol=1e-12)
    assert (F.gelu(x) - task.reference(x)).abs().max() > 1e-4  # not the family's default, erf GELU
    # the file the sandboxed child, other hosts and export load says the same
    again = load_task_file(task.path)
    assert again.name == "elementwise[gelu_tanh]"
    torch.testing.assert_close(again.reference(x), F.gelu(x, approximate="tanh"), rtol=1e-12, atol=1e-12)
    assert task.path.read_text().startswith(get_task("elementwise").path.read_text())


def test_its_templates_carry_the_members_constants_and_name() -> None:
    variants = builtin_variants("elementwise[relu]")
    assert sorted(v.name for v in variants) == sorted(v.name for v in builtin_variants("elementwise"))
    for v in variants:
        assert v.task == "elementwise[relu]"
        assert "OP = 'relu'" in v.source and 'OP = "gelu"' not in v.source
        assert v.path is not None and v.path.read_text() == v.source


def test_a_template_without_a_constant_is_not_the_members(tmp_path: Path) -> None:
    assert with_constants("OP = 'a'\nX = 1\n", (("OP", "b"),)) == "OP = 'b'\nX = 1\n"
    assert with_constants("X = 1\n", (("OP", "b"),)) is None
    family = get_task("elementwise")
    row = next(m for m in family.members if m.name == "sigmoid")
    module, templates = member_files(family.path, "elementwise", row, root=tmp_path)
    assert module.is_relative_to(tmp_path) and len(templates) == 2
    assert member_files(family.path, "elementwise", row, root=tmp_path) == (module, templates)  # same hash, same files


def test_unknown_members_and_non_families_are_one_line_errors() -> None:
    with pytest.raises(TaskError, match=r"no member 'gelu_fast'.*elementwise\[MEMBER\].*relu, leaky_relu") as e:
        get_task("elementwise[gelu_fast]")
    assert "\n" not in str(e.value)
    with pytest.raises(TaskError, match="'softmax' is no family"):
        get_task("softmax[x]")
    with pytest.raises(TaskError, match="unknown task 'nope'.*elementwise"):
        get_task("nope:x")
    with pytest.raises(TaskError, match=r"FAMILY\[MEMBER\]"):
        get_task("elementwis")
