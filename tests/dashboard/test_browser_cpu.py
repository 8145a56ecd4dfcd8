"""The dashboard a CPU user sees, in headless Debian chromium (issue 31): a database holding only what a
machine without a GPU produces (a real interpreter campaign of rmsnorm, compiled for sm_90, and a planner
search), where every page must show the static ranking by compile facts instead of empty time columns.

``WARPFORGE_SCREENSHOTS=docs/screenshots`` rewrites the documentation's screenshots from this database.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fill
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.ci]
CPU_CAMPAIGN = "cpu-rmsnorm"


@pytest.fixture(scope="module")
def cpu_url(tmp_path_factory: pytest.TempPathFactory, serve: Any) -> Iterator[str]:
    from warpforge.dashboard.app import create_app
    from warpforge.search.engine.campaign import CampaignSpec, run_campaign

    url = f"sqlite:///{tmp_path_factory.mktemp('cpu-only') / 'wf.db'}"
    run_campaign(CampaignSpec(name=CPU_CAMPAIGN, tasks=["rmsnorm"], trials=3, backend="interpret", db_url=url, seed=3))
    fill.store_plans(url)
    with serve(create_app(url)) as live:
        yield live


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("WARPFORGE_SCREENSHOTS") or tmp_path / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_cpu_pages_show_the_static_ranking_and_compile_facts(page: Any, cpu_url: str, shots: Path) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(cpu_url + "/")
    page.screenshot(path=str(shots / "overview.png"), full_page=True)

    page.goto(cpu_url + "/leaderboard")
    cell = page.locator("#leaderboard td.cell").first
    assert "static rank 1 of sm_90" in cell.inner_text() and "regs " in cell.inner_text()
    page.screenshot(path=str(shots / "leaderboard.png"), full_page=True)

    page.goto(f"{cpu_url}/campaigns/{CPU_CAMPAIGN}")
    assert page.locator("table.static-ranking tbody tr").count() >= 1
    facts = page.locator("table.evaluations td.facts").all_inner_texts()
    assert facts and sum(f.startswith("regs ") for f in facts) >= 1
    page.screenshot(path=str(shots / "campaign.png"), full_page=True)

    first = page.locator("table.static-ranking tbody tr a").first
    first.click()
    page.wait_for_url("**/variants/**")
    assert page.locator("#static-best").is_visible()
    assert page.locator("nav a.active").inner_text() == "Overview"
    page.screenshot(path=str(shots / "variant.png"), full_page=True)

    page.goto(f"{cpu_url}/campaigns/{CPU_CAMPAIGN}/charts")
    page.wait_for_function("() => document.querySelectorAll('div.plot .main-svg').length >= 2")
    assert page.locator("#fig-compile-facts .main-svg").count() >= 1 and page.locator("#not-drawn li").count() >= 2
    page.screenshot(path=str(shots / "charts.png"), full_page=True)

    page.goto(cpu_url + "/plans")
    page.wait_for_function("() => document.querySelectorAll('div.plot .main-svg').length >= 2")
    assert "older" not in page.locator("main").inner_text()
    page.screenshot(path=str(shots / "plans.png"), full_page=True)
    assert errors == []
