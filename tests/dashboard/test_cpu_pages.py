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
    return TestClient(create_app(f"sqlite:///{path}")), rows


def _expected_first(rows: Any) -> tuple[str, dict[str, int], int]:
    """(variant, params, worst registers) of the README's rule applied to CPU_DEMO by hand: every kernel is
    spill-free, so the highest worst-case occupancy wins; sm_90 has 64 warp slots per SM and 65,536 registers,
    so registers * 32 * warps per block bound the blocks; ties go to fewer registers."""
    def occupancy(k: dict[str, Any]) -> float:
        warps = k["num_warps"]
        regs_per_warp = -(-k["registers"] * 32 // 256) * 256  # allocated per warp in units of 256
        blocks = min(65536 // (regs_per_warp * warps), 64 // warps, 32)
        return blocks * warps / 64

    scored = [(-min(occupancy(k) for k in facts), max(k["registers"] for k in facts), i, variant, params)
              for i, (variant, params, facts) in enumerate(rows.CPU_DEMO)]
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
    assert all(f'&#34;{k}&#34;: {v}' in best for k, v in params.items()), best  # JSON, HTML-escaped
