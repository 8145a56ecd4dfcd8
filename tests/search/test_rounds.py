"""Proposers that iterate during a campaign: History feeds them results, new arms join mid-run, lineage is stored,
and a proposal in flight never stalls evaluation."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from sqlalchemy import create_engine, text

from warpforge.agent.proposers import PROPOSERS, Candidate, History, Origin, Proposer, get_proposer, register_proposer
from warpforge.evaluator.run.backend import register
from warpforge.evaluator.run.pool import PoolConfig
from warpforge.kernels.taskdef import Task
from warpforge.kernels.variant import parse_variant
from warpforge.search.engine.campaign import CampaignSpec, run_campaign
from warpforge.search.engine.summary import Event

ROOT = Path(__file__).parents[2]
TASK = str(ROOT / "tests" / "evaluator" / "planted" / "task_double.py")
GOOD = (ROOT / "tests" / "evaluator" / "planted" / "good.py").read_text()
PARENT = GOOD.replace(
    'SPACE = {"BLOCK": [128, 256, 1024], "num_warps": [2, 4]}', 'SPACE = {"BLOCK": [128, 256], "num_warps": [2]}'
)
CHILD = GOOD.replace(
    'SPACE = {"BLOCK": [128, 256, 1024], "num_warps": [2, 4]}', 'SPACE = {"BLOCK": [512], "num_warps": [4]}'
)
assert PARENT != GOOD and CHILD != GOOD


def _bench() -> Any:
    if "wf_bench_pipeline" not in sys.modules:
        spec = importlib.util.spec_from_file_location("wf_bench_pipeline", ROOT / "benchmarks" / "pipeline.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["wf_bench_pipeline"] = module
        spec.loader.exec_module(module)
    return sys.modules["wf_bench_pipeline"]


@register
class StandInRounds(_bench().StandInGpuBackend):  # type: ignore[misc,name-defined]
    name = "standin-rounds"
    uses_gpu = False


@register_proposer
class ChildProposer(Proposer):
    """Round 0: the parent. Once the parent has 2 results: a child derived from it (round 1), then nothing."""

    name = "test-child"
    seen: ClassVar[list[History]] = []

    async def propose(self, task: Task, history: History) -> list[Candidate]:
        if history.round == 0:
            return [Candidate(parse_variant(PARENT, "parent"), Origin("template", self.name))]
        type(self).seen.append(history)
        parent = history.variants[0]
        return [
            Candidate(
                parse_variant(CHILD, "child"),
                Origin(
                    "llm",
                    self.name,
                    parents=(parent.variant.source_hash,),
                    proposal_id="call-7",
                    rationale=f"parent {dict(parent.verdicts)} over {sorted(parent.variant.space)}",
                ),
            )
        ]

    def wants_more(self, history: History) -> bool:
        return history.round == 1 and any(v.evaluated >= 2 for v in history.variants)


def test_registry_passes_each_proposer_its_own_config() -> None:
    assert set(PROPOSERS) >= {"template", "test-child"}
    assert get_proposer("test-child", {"k": 1}).config == {"k": 1}
    template = get_proposer("template", {"files": []})
    assert asyncio.run(template.propose(_task(), History.empty("double", "interpret", 3, round=1))) == []
    assert not template.wants_more(History.empty("double", "interpret", 3, round=1))


def _task() -> Task:
    from warpforge.kernels.task import get_task

    return get_task(TASK)


@pytest.mark.slow  # ~15-50 s on 2 cores: the slow tier (`make test-slow`)
def test_a_proposer_sees_first_results_and_its_child_is_evaluated_with_lineage(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    ChildProposer.seen.clear()
    spec = CampaignSpec(
        name="rounds",
        tasks=[TASK],
        trials=3,
        backend="interpret",
        db_url=f"sqlite:///{db}",
        seed=0,
        sampler="random",
        proposer="test-child",
        top_k=0,
    )
    summary = run_campaign(spec, pool_config=PoolConfig(workers=1, use_ray=False))
    (seen,) = ChildProposer.seen
    assert seen.round == 1 and seen.backend == "interpret" and seen.evaluations_done == 2
    (parent,) = seen.variants
    assert parent.evaluated == 2 and parent.verdicts == {"ok": 2}  # the interpreter checked both configurations
    assert parent.best_ms is None  # the interpreter never times
    arms = {v.variant: v for v in summary.tasks[0].variants}
    assert arms["child"].evaluated == 1 and arms["child"].origin == "llm"
    assert arms["child"].parents == [parent.variant.source_hash]
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        stored = {
            r[0]: r[1:]
            for r in conn.execute(
                text("select name, origin, proposer, parents, proposal_id, rationale from wf_variants")
            )
        }
        evaluated = conn.execute(
            text(
                "select count(*) from wf_evaluations e join wf_variants v on e.variant_id = v.id where v.name = 'child'"
            )
        ).scalar()
    engine.dispose()
    assert evaluated == 1
    origin, proposer, parents, proposal_id, rationale = stored["child"]
    assert (origin, proposer, proposal_id) == ("llm", "test-child", "call-7")
    assert json.loads(parents) == [parent.variant.source_hash]
    assert rationale == "parent {'ok': 2} over ['BLOCK', 'num_warps']"
    assert stored["parent"][:2] == ("template", "test-child")


@register_proposer
class GatedProposer(Proposer):
    """Round 1 does not answer until the campaign has finished more evaluations: it would hang if it stalled them."""

    name = "test-gated"
    gate = threading.Event()
    timed_out = False

    async def propose(self, task: Task, history: History) -> list[Candidate]:
        if history.round == 0:
            return [Candidate(parse_variant(GOOD, "good"), Origin("template", self.name))]
        type(self).timed_out = not await asyncio.to_thread(self.gate.wait, 120)
        return [
            Candidate(
                parse_variant(CHILD, "child"),
                Origin("llm", self.name, parents=(history.variants[0].variant.source_hash,)),
            )
        ]

    def wants_more(self, history: History) -> bool:
        return history.round == 1


def test_a_slow_proposal_never_stalls_evaluation(tmp_path: Path) -> None:
    GatedProposer.gate.clear()
    events: list[Event] = []

    def on_event(event: Event) -> None:
        events.append(event)
        if event.done >= 4:  # evaluations went on while round 1 was waiting
            GatedProposer.gate.set()

    spec = CampaignSpec(
        name="gated",
        tasks=[TASK],
        trials=7,
        backend="standin-rounds",
        db_url=f"sqlite:///{tmp_path / 'wf.db'}",
        seed=0,
        sampler="random",
        proposer="test-gated",
        top_k=0,
    )
    summary = run_campaign(
        spec,
        on_event=on_event,
        pool_config=PoolConfig(workers=2, use_ray=False, backend_kwargs={"eval_s": 0.05, "compile_s": 0.0}),
    )
    assert not GatedProposer.timed_out
    variants = [e.variant for e in events]
    assert variants[:4] == ["good"] * 4 and "child" in variants[4:]  # the child joined after the gate opened
    assert summary.tasks[0].evaluations == 7


def test_resume_searches_arms_added_mid_run_again_with_their_lineage(tmp_path: Path) -> None:
    ChildProposer.seen.clear()
    db = f"sqlite:///{tmp_path / 'wf.db'}"
    config = PoolConfig(workers=1, use_ray=False, backend_kwargs={"eval_s": 0.0, "compile_s": 0.0})

    def spec(trials: int, resume: bool) -> CampaignSpec:
        return CampaignSpec(
            name="again",
            tasks=[TASK],
            trials=trials,
            backend=StandInRounds.name,
            db_url=db,
            seed=0,
            sampler="random",
            proposer="test-child",
            top_k=0,
            resume=resume,
        )

    first = run_campaign(spec(3, False), pool_config=config)
    assert [v.variant for v in first.tasks[0].variants] == ["parent", "child"]
    resumed = run_campaign(spec(3, True), pool_config=config)  # round 0 proposes only the parent
    child = next(v for v in resumed.tasks[0].variants if v.variant == "child")
    assert child.origin == "llm" and child.parents == [ChildProposer.seen[0].variants[0].variant.source_hash]
    assert child.evaluated == 1  # its stored evaluation is counted, not repeated
