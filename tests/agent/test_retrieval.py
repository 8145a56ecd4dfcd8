"""Past winners reach the prompt through the read layer: the same task on other GPUs and other tasks on this GPU,
accepted decisions only, one line each; a KernelBench-style task file becomes a prompt too."""

from __future__ import annotations

from pathlib import Path

from warpforge.agent.prompting import build_prompt
from warpforge.agent.proposers import History
from warpforge.agent.retrieval import past_winners
from warpforge.db import store
from warpforge.db.session import Database
from warpforge.kernels.task import get_task

KERNELBENCH = Path(__file__).parents[1] / "kernels" / "kernelbench" / "relu.py"


def test_past_winners_other_gpus_and_other_tasks(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    db = Database(url)
    db.upgrade()
    decided = [
        ("a", "softmax", "NVIDIA A100", True, 0.2),
        ("b", "softmax", "NVIDIA H200", True, 0.1),
        ("c", "rmsnorm", "NVIDIA H200", True, 0.05),
        ("d", "layernorm", "NVIDIA H200", False, 0.01),
    ]
    with db.session() as s:
        for name, task, gpu, accepted, ms in decided:
            c = store.create_campaign(s, name, {})
            store.save_decision(
                s,
                c,
                task,
                backend="cuda",
                accepted=accepted,
                note="",
                timing_source="live",
                timing_gpu=gpu,
                fingerprint=gpu,
                variant_hash="h" * 64,
                variant_name=f"{task}_v",
                params={"BLOCK": 1024},
                objective_ms=ms,
                speedup=1.5,
            )
    lines = past_winners(url, "softmax", "NVIDIA H200")
    assert lines == [
        'softmax on NVIDIA A100: softmax_v {"BLOCK": 1024} 0.2 ms (1.5x)',
        'rmsnorm on NVIDIA H200: rmsnorm_v {"BLOCK": 1024} 0.05 ms (1.5x)',
    ]
    assert past_winners(None, "softmax", None) == []
    assert past_winners(f"sqlite:///{tmp_path / 'missing' / 'x.db'}", "softmax", None) == []  # a hint, never an error


def test_kernelbench_task_becomes_a_prompt() -> None:
    task = get_task(str(KERNELBENCH))
    prompt = build_prompt(task, History.empty(task.name, "interpret", 10), None)
    user = prompt.messages[1]["content"]
    assert "class Model" in user and f"`{task.name}`" in user
