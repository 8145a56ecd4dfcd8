"""End-to-end in headless Debian chromium (Playwright) against a database filled by real campaigns.

Run alone: ``pytest -m browser tests/dashboard``. One campaign database and one server per session
(conftest.campaign_db: a replay campaign on labelled synthetic recordings, a real CPU interpreter
campaign, a planner search). Screenshots go to ``$WARPFORGE_SCREENSHOTS`` when set, else the test's tmp dir.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import fill
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.ci]


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("WARPFORGE_SCREENSHOTS") or tmp_path / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def watched(page: Any) -> Any:
    """The page, failing the test on any script dialog and recording console errors and page errors."""
    page.errors = []  # type: ignore[attr-defined]

    def on_dialog(dialog: Any) -> None:
        page.errors.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda exc: page.errors.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: page.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.set_viewport_size({"width": 1400, "height": 900})
    return page


def _plots_drawn(page: Any) -> int:
    """Plotly divs whose figure holds data traces (Plotly sets div.data once it has drawn)."""
    return int(
        page.evaluate("""() => Array.from(document.querySelectorAll('div.plot'))
        .filter(d => d.data && d.data.length > 0 && d.querySelector('.main-svg')).length""")
    )


def test_click_through_overview_campaign_leaderboard_variant_parent(watched: Any, live_url: str, shots: Path) -> None:
    page = watched
    page.goto(live_url + "/")
    assert page.locator("table#campaigns tbody tr").count() == 3
    page.screenshot(path=str(shots / "overview.png"), full_page=True)

    page.get_by_role("link", name=fill.REPLAY_CAMPAIGN).click()
    page.wait_for_url("**/campaigns/**")
    assert page.locator("h1 .name").inner_text() == fill.REPLAY_CAMPAIGN
    assert page.locator("section.decision").count() == 1
    page.screenshot(path=str(shots / "campaign.png"), full_page=True)

    page.locator("#charts-link").click()
    page.wait_for_function("() => document.querySelectorAll('div.plot .main-svg').length >= 4")
    assert _plots_drawn(page) >= 4  # best-so-far x2, time vs parameters, roofline, verdicts
    page.screenshot(path=str(shots / "charts.png"), full_page=True)

    page.get_by_role("link", name="Leaderboard").click()
    cell = page.locator("table#leaderboard td.cell.ok a.cell-link").first
    assert fill.GPU in page.locator("table#leaderboard thead").inner_text()
    page.screenshot(path=str(shots / "leaderboard.png"), full_page=True)
    cell.click()
    page.wait_for_url("**/variants/**")
    assert page.locator("#source").count() == 1 and page.locator("#lineage .node").count() >= 1
    page.screenshot(path=str(shots / "variant.png"), full_page=True)

    # The injected variant (the replay campaign searched it) has the online template as its parent.
    evals = page.request.get(f"{live_url}/api/evaluations?limit=1000").json()["items"]
    child = next(e["variant_hash"] for e in evals if e["variant_name"] == fill.XSS_NAME)
    page.goto(f"{live_url}/variants/{child}")
    assert page.locator("#variant-name").inner_text() == fill.XSS_NAME
    assert page.locator("#diff .d-add").count() >= 1
    page.screenshot(path=str(shots / "variant-llm-child.png"), full_page=True)
    page.locator("#parent-link").click()
    page.wait_for_url("**/variants/**")
    assert page.locator("#variant-name").inner_text() == "online"
    assert page.errors == []  # type: ignore[attr-defined]


def test_injected_script_payloads_render_inert(watched: Any, live_url: str, shots: Path) -> None:
    page = watched
    evals = page.request.get(f"{live_url}/api/evaluations?limit=1000").json()["items"]
    child = next(e["variant_hash"] for e in evals if e["variant_name"] == fill.XSS_NAME)
    for path in [
        "/",
        f"/campaigns/{fill.REPLAY_CAMPAIGN}",
        "/leaderboard",
        f"/variants/{child}",
        "/agent",
        f"/campaigns/{fill.REPLAY_CAMPAIGN}/charts",
    ]:
        page.goto(live_url + quote(path))
        page.wait_for_load_state("networkidle")
        injected = page.evaluate("""() => ({
            img: document.querySelectorAll('img[src="x"]').length,
            scripts: Array.from(document.scripts).filter(s => s.textContent.includes('alert')
                       && s.type !== 'application/json').length,
            italic: Array.from(document.querySelectorAll('i')).filter(i => i.textContent.includes('demo')).length,
            pwned: document.body.dataset.pwned || null})""")
        assert injected == {"img": 0, "scripts": 0, "italic": 0, "pwned": None}, path
    # The payloads are shown as text.
    page.goto(f"{live_url}/variants/{child}")
    assert fill.XSS_NAME in page.locator("#variant-name").inner_text()
    assert "<script>" in page.locator("pre.rationale").inner_text()
    assert "<script>alert" in page.locator("#source").inner_text()
    assert page.errors == []  # type: ignore[attr-defined]


def test_every_page_renders(watched: Any, live_url: str, shots: Path) -> None:
    page = watched
    page.goto(live_url + "/plans")
    page.wait_for_function("() => document.querySelectorAll('div.plot .main-svg').length >= 2")
    assert _plots_drawn(page) == 2 and page.locator("table.plans tbody tr").count() >= 1
    page.locator("table.plans details summary").first.click()
    assert "--tensor-model-parallel-size" in page.locator("pre.export").first.inner_text()
    page.screenshot(path=str(shots / "plans.png"), full_page=True)

    page.goto(f"{live_url}/campaigns/{fill.INTERPRET_CAMPAIGN}")
    assert page.locator("table.evaluations tbody tr").count() == 4
    page.locator("table.evaluations tbody tr a").first.click()
    page.wait_for_url("**/evaluations/**")
    meta = page.locator("p.meta").first.inner_text()
    assert "backend interpret" in meta and "not timed" in meta  # the interpreter checks, never times
    page.screenshot(path=str(shots / "evaluation.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]


def test_agent_page_and_the_transcript_of_an_llm_variant(watched: Any, live_url: str, shots: Path) -> None:
    """The agent campaign's calls (3: accepted, no_code echoing the key and a payload, accepted with wrong
    values), their totals by hand: 1000+1200+1500 prompt tokens, 200+40+180 completion tokens."""
    page = watched
    page.goto(live_url + "/agent")
    page.wait_for_function("() => document.querySelectorAll('div.plot .main-svg').length >= 1")
    assert _plots_drawn(page) == 1  # the outcome mix
    total = page.locator("#llm-total tbody tr").inner_text()
    assert "3700" in total and "420" in total and "accepted 2" in total and "no_code 1" in total
    assert "$0.0108" in total  # 3700 tokens at $2/M + 420 at $8/M = $0.01076
    assert "scripted" in page.locator("#llm-per-model").inner_text()  # the configured model's name
    assert fill.AGENT_CAMPAIGN in page.locator("#llm-per-campaign").inner_text()
    assert "calls" in page.locator("#agent-runs").inner_text()  # stopped by its call budget
    assert page.locator("#llm-calls tbody tr").count() == 3
    page.screenshot(path=str(shots / "agent.png"), full_page=True)

    page.select_option("select[name=outcome]", "no_code")  # the filter form submits itself
    page.wait_for_url("**outcome=no_code**")
    assert page.locator("#llm-calls tbody tr").count() == 1
    page.locator("#llm-calls a.call-link").first.click()
    page.wait_for_url("**/agent/calls/**")
    answer = page.locator("#transcript-answer").inner_text()
    assert fill.AGENT_PAYLOAD in answer and "[redacted]" in answer  # shown as text; the key was never stored
    assert fill.AGENT_KEY not in page.content()
    page.screenshot(path=str(shots / "llm-call.png"), full_page=True)

    page.goto(live_url + "/agent")
    page.locator("#llm-calls tr", has_text="r0.s0.a0").locator("a.call-link").click()
    page.wait_for_url("**/agent/calls/**")
    page.locator("#call-variant").click()
    page.wait_for_url("**/variants/**")
    assert page.locator("#variant-name").inner_text() == "llm_r0_s0"
    assert page.locator("#transcript .msg").count() >= 3  # system, user, answer
    assert "r0.s0.a0" in page.locator("#transcript p.meta").inner_text()
    page.screenshot(path=str(shots / "variant-llm-transcript.png"), full_page=True)
    for path in ["/agent", "/api/agent", "/api/agent/calls?limit=1000"]:
        assert fill.AGENT_KEY not in page.request.get(live_url + path).text(), path
    assert page.evaluate("() => document.body.dataset.pwned || null") is None
    assert page.errors == []  # type: ignore[attr-defined]


def test_missing_database_page(watched: Any, tmp_path: Path, shots: Path, serve: Any) -> None:
    from warpforge.dashboard.app import create_app

    with serve(create_app(f"sqlite:///{tmp_path / 'nothing.db'}")) as url:
        watched.goto(url + "/leaderboard")
        text = watched.locator("section.problem").inner_text()
        assert "no database at" in text and "warpforge run" in text
        watched.screenshot(path=str(shots / "missing-database.png"), full_page=True)
