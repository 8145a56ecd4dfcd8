"""A training search proposes only templates with a backward: the set is read off the template files."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import warpforge.kernels.templates as templates
from warpforge.agent.proposers import History, get_proposer
from warpforge.kernels.task import get_task


@pytest.mark.parametrize("task_name", ["layernorm", "softmax"])
def test_training_proposes_exactly_the_templates_defining_a_backward(task_name: str) -> None:
    folder = Path(templates.__file__).parent / task_name
    with_backward = {
        f.stem
        for f in folder.glob("*.py")
        if re.search(r"^def launch_backward\(", f.read_text(), re.M) and f.stem != "__init__"
    }
    everything = {f.stem for f in folder.glob("*.py") if f.stem != "__init__"}
    assert with_backward and with_backward != everything  # both kinds exist for these tasks
    history = History.empty(task_name, "interpret", budget_left=8)
    task = get_task(task_name)
    names = {c.variant.name for c in asyncio.run(get_proposer("template", {"training": True}).propose(task, history))}
    assert names == with_backward
    names = {c.variant.name for c in asyncio.run(get_proposer("template", {}).propose(task, history))}
    assert names == everything
