"""What the dashboard shows a CPU user (issue 31): no times, so the static ranking by compile facts that
``best --static`` prints, and each evaluation's compile facts, on the leaderboard, campaign and variant pages.

The database is tests/cli/conftest.py's: ``cpu-demo`` copies a real CPU campaign (rmsnorm, six configurations
with the compile facts sm_90 compilation reported); the expected first is computed here from those facts by
the rule the README states (fewest spills, highest occupancy, fewest registers, least shared memory), not
read from warpforge's ranking code.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

CLI_CONFTEST = Path(__file__).resolve().parents[1] / "cli" / "conftest.py"


def _stored() -> Any:
    spec = importlib.util.spec_from_file_location("cli_stored_rows", CLI_CONFTEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    from fastapi.testclient import TestClient

    from warpforge.dashboard.app import create_app

    rows = _stored()
    path = rows.build_stored_db(tmp_path_factory.mktemp("cpu") / "wf.db")
    _store_plans(f"sqlite:///{path}")
    return TestClient(create_app(f"sqlite:///{path}")), rows


def _store_plans(url: str) -> None:
    """Plans of two models: llama3-8b's without a campaign, then llama3-70b's as the plan-llm search's."""
    from warpforge.db import store
    from warpforge.db.session import Database
    from warpforge.parallel import load_cluster, load_model
    from warpforge.parallel.search import search_plans
    from warpforge.parallel.store import store_search

    with Database(url).session() as s:
        row = store.get_campaign(s, "plan-llm")
        assert row is not None
        campaign_id = row.id
    for name, cid, nodes in (("llama3-8b", None, 1), ("llama3-70b", campaign_id, 8)):
        model, cluster = load_model(name), load_cluster("dgx-h100", nodes=nodes)
        store_search(url, model, cluster, search_plans(model, cluster, trials=20, top=3), limit=3, campaign_id=cid)


def _expected_first(rows: Any) -> tuple[str, dict[str, int], int]:
    """(variant, params, worst registers) of the README's rule applied to CPU_DEMO by hand: every kernel is
    spill-free, so the highest worst-case occupancy wins; sm_90 has 64 warp slots per SM and 65,536 registers,
    so registers * 32 * warps per block bound the blocks; ties go to fewer registers."""

    def occupancy(k: dict[str, Any]) -> float:
        warps = k["num_warps"]
        regs_per_warp = -(-k["registers"] * 32 // 256) * 256  # allocated per warp in units of 256
        blocks = min(65536 // (regs_per_warp * warps), 64 // warps, 32)
        return blocks * warps / 64

    scored = [
        (-min(occupancy(k) for k in facts), max(k["registers"] for k in facts), i, variant, params)
        for i, (variant, params, facts) in enumerate(rows.CPU_DEMO)
    ]
    _, regs, _, variant, params = min(scored)
    return variant, params, regs


def test_leaderboard_shows_the_static_first_with_its_compile_facts(cpu: tuple[Any, Any]) -> None:
    client, rows = cpu
    variant, params, regs = _expected_first(rows)
    page = client.get("/leaderboard").text
    assert "static rank 1 of sm_90: " + variant in page
    assert f"regs {regs} · spill 0 B" in page and "not a time" in page


def test_campaign_page_ranks_statically_and_lists_compile_facts(cpu: tuple[Any, Any]) -> None:
    client, rows = cpu
    variant, params, regs = _expected_first(rows)
    page = client.get("/campaigns/cpu-demo").text
    assert 'id="static-ranking"' in page and "rmsnorm for sm_90: top 5 of 6" in page
    first_row = page.split('class="static-ranking"')[1].split("<tbody>")[1].split("</tr>")[0]
    assert f">{variant}</a>" in first_row and f'<td class="num">{regs}</td>' in first_row
    # Every evaluation row carries its facts instead of a bare "-".
    assert page.count('<td class="facts">regs ') == 6
    # A timed campaign has no static section.
    assert 'id="static-ranking"' not in client.get("/campaigns/h100-rec").text


def test_variant_page_best_result_is_best_static_first(cpu: tuple[Any, Any]) -> None:
    client, rows = cpu
    variant, params, regs = _expected_first(rows)
    page = client.get(f"/variants/{variant[0] * 64}").text
    assert 'id="static-best"' in page and "rank 1 of the task for sm_90" in page
    best = page.split("<h2>Best result</h2>")[1].split("</p>")[1]
    assert all(f"&#34;{k}&#34;: {v}" in best for k, v in params.items()), best  # JSON, HTML-escaped


def test_replayed_calls_are_calls_but_not_tokens_spent(cpu: tuple[Any, Any]) -> None:
    client, _ = cpu
    # plan-llm (tests/cli/conftest.py): two calls of 1380+270 tokens and $0.0012 each, the second replayed.
    total = client.get("/api/agent", params={"campaign": "plan-llm"}).json()["total"]
    assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (2, 1380, 270)
    assert total["cost_usd"] == pytest.approx(0.0012)


def test_plans_page_shows_one_model_as_people_write_plans(cpu: tuple[Any, Any]) -> None:
    client, _ = cpu
    page = client.get("/plans").text
    table = page.split('<table class="plans">')[1]
    # The newest plan's model only: step times of two models on one list compare nothing.
    assert "llama3-70b" in table and "llama3-8b" not in table
    assert '<option value="llama3-8b" >llama3-8b</option>' in page.replace("  ", " ") or "llama3-8b</option>" in page
    assert "&#34;tp&#34;" not in table and "tp=" in table  # tp=8 · pp=1 ..., not JSON
    assert "older" not in page and "newer" not in page
    both = client.get("/plans", params={"model": ""}).text.split('<table class="plans">')[1]
    assert "llama3-70b" in both and "llama3-8b" in both


def test_a_finished_plan_search_shows_its_decision_and_count(cpu: tuple[Any, Any]) -> None:
    client, _ = cpu
    plans = client.get("/api/plans", params={"model": "llama3-70b"}).json()["plans"]
    fastest = plans["items"][0]
    row = client.get("/").text.split('href="/campaigns/plan-llm"')[1].split("</tr>")[0]
    assert "no decision yet" not in row and "fastest plan" in row and f"{plans['total']} plans" in row
    assert f"tp={fastest['plan']['tp']}" in row
    page = client.get("/campaigns/plan-llm").text
    assert 'id="plan-search"' in page and 'id="agent-run"' in page and "/agent?campaign=plan-llm" in page


def test_cpu_charts_draw_compile_facts_and_say_why_the_rest_is_empty(cpu: tuple[Any, Any]) -> None:
    client, rows = cpu
    charts = client.get("/api/charts/cpu-demo").json()
    figs = {f["id"]: f for f in charts["figures"]}
    assert set(figs) == {"compile-facts", "verdicts"}  # no time anywhere: no time chart drawn
    # One point per configuration verified ok, at its worst kernel's registers (CPU_DEMO, by hand).
    xs = sorted(x for t in figs["compile-facts"]["spec"]["data"] for x in t["x"])
    assert xs == sorted(max(k["registers"] for k in facts) for _, _, facts in rows.CPU_DEMO)
    # Six evaluations: one bar per verdict with its count, not six bars of height one.
    (bar,) = figs["verdicts"]["spec"]["data"]
    assert (bar["x"], bar["y"]) == (["ok"], [6])
    why = " ".join(charts["not_drawn"])
    assert "Best so far vs evaluations: no measured time" in why and "Time against each parameter" in why
    assert 'id="not-drawn"' in client.get("/campaigns/cpu-demo/charts").text
