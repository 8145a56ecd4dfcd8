"""The LLM proposer solves a level-2 KernelBench problem with weights end to end: a campaign with
``--proposer llm`` on a by-path GEMM + bias + ReLU problem (KernelBench's 76_Gemm_Add_ReLU at small sizes),
where the scripted OpenAI-compatible server answers in KernelBench's own format (``class ModelNew``, no
TASK, no SPACE); the answer is built, given the reference's weights, judged ``ok`` and stored."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from agent_helpers import KEY, ROOT
from sqlalchemy import create_engine, text

from warpforge.agent.prompting import build_prompt
from warpforge.agent.scripted import ScriptedServer, code_reply
from warpforge.kernels.task import load_task_file
from warpforge.search.engine.campaign import CampaignSpec, run_campaign

PROBLEM = ROOT / "tests" / "kernels" / "kernelbench" / "gemm_add_relu.py"
HAND_WRITTEN = (ROOT / "tests" / "kernels" / "kernelbench" / "gemm_add_relu_modelnew.py").read_text()
# KernelBench's format with what a campaign tunes: SPACE, whose parameters come as forward's keywords
ANSWER = (
    HAND_WRITTEN.replace("class ModelNew", "SPACE = {'BM': [16, 32], 'num_warps': [4]}\n\n\nclass ModelNew")
    .replace("def forward(self, x):", "def forward(self, x, BM=16, num_warps=4):")
    .replace("triton.cdiv(M, 16)", "triton.cdiv(M, BM)")
    .replace("BM=16, BN=16, BK=16)", "BM=BM, BN=16, BK=16, num_warps=num_warps)")
)


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        out = [tuple(r) for r in conn.execute(text(sql))]
    engine.dispose()
    return out


def test_the_prompt_names_the_state_and_the_model_new_format() -> None:
    prompt = build_prompt(load_task_file(PROBLEM), SimpleNamespace(variants=[], gpu=None), None, budget_tokens=50_000)
    user = prompt.messages[-1]["content"]
    for needle in (
        "`bias`: [24] float32",
        "`gemm.weight`: [24, 40] float32",
        "class ModelNew(nn.Module)",
        "ModelNew(40, 24, (24,))",
        "never call a submodule (`self.gemm(x)`)",
    ):
        assert needle in user, needle


@pytest.mark.slow
def test_an_llm_campaign_solves_a_level2_gemm_problem_with_model_new(tmp_path: Path) -> None:
    db = tmp_path / "wf.db"
    server = ScriptedServer([code_reply(ANSWER)]).start()
    config = tmp_path / "models.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "models": [
                    {
                        "name": "scripted",
                        "model": "coder",
                        "base_url": server.url,
                        "api_key_env": "WF_TEST_KEY",
                        "max_retries": 0,
                    }
                ]
            }
        )
    )
    saved = {k: os.environ.get(k) for k in ("WARPFORGE_LLM_CONFIG", "WF_TEST_KEY")}
    os.environ.update({"WARPFORGE_LLM_CONFIG": str(config), "WF_TEST_KEY": KEY})
    try:
        spec = CampaignSpec(
            name="agent-kb",
            tasks=[str(PROBLEM)],
            trials=2,
            proposer="llm",
            proposer_config={"in_flight": 1, "max_calls": 1, "seed": 0},
            backend="interpret",
            sampler="random",
            seed=0,
            db_url=f"sqlite:///{db}",
            top_k=0,
            seeds=1,
        )
        run_campaign(spec)
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert len(server.requests) == 1
    found = rows(
        db, "select v.name, v.task, e.verdict, e.reason from wf_evaluations e join wf_variants v on v.id = e.variant_id"
    )
    assert found and all(r[1] == "gemm_add_relu" for r in found), found
    assert ("llm_r0_s0", "gemm_add_relu", "ok", "") in found, found
