"""The JSON API and the pages through FastAPI's TestClient, on the seeded database (expected numbers: seed.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import seed

CHILD_NAME = seed.PAYLOAD_NAME


def test_overview_lists_campaigns_with_their_verdict_counts(client: Any) -> None:
    page = client.get("/api/campaigns").json()
    assert page["total"] == 2
    by_name = {c["name"]: c for c in page["items"]}
    assert by_name["seeded"]["verdicts"] == {"ok": 4, "incorrect": 1}
    assert by_name["seeded"]["status"] == "finished" and by_name["live-one"]["status"] == "running"
    html = client.get("/").text
    assert "ok 4" in html and "incorrect 1" in html and "1.8x [1.6-2]" in html


def test_leaderboard_shows_the_stored_decision_not_the_fastest_raw_time(client: Any) -> None:
    board = client.get("/api/leaderboard").json()
    (cell,) = board["cells"]
    assert (cell["task"], cell["gpu"]) == ("softmax", seed.GPU)
    # The parent's raw evaluation is faster (2.5x) but the campaign accepted the child at 1.8x.
    assert cell["speedup"] == 1.8 and (cell["speedup_low"], cell["speedup_high"]) == (1.6, 2.0)
    assert cell["variant_name"] == CHILD_NAME and cell["sol_pct"] == 63.0  # best shape's %-of-SOL
    assert cell["speedup_compile"] is None  # not measured by the evaluator: shown as such, never invented
    assert set(board["shapes"]) == {"M=4096,N=4096", "M=8192,N=8192"}


def test_leaderboard_shape_selection_uses_that_shapes_stored_numbers(client: Any) -> None:
    (cell,) = client.get("/api/leaderboard", params={"shape": "M=8192,N=8192"}).json()["cells"]
    assert cell["speedup"] == 1.9 and cell["sol_pct"] == 63.0 and cell["objective_ms"] == 1.65
    (cell,) = client.get("/api/leaderboard", params={"shape": "M=4096,N=4096"}).json()["cells"]
    assert cell["speedup"] == 1.7 and cell["sol_pct"] == 21.0
    assert client.get("/api/leaderboard", params={"task": "rmsnorm"}).json()["cells"] == []
    html = client.get("/leaderboard", params={"shape": "M=8192,N=8192"}).text
    assert "1.9x" in html and "not measured" in html


def test_variant_has_lineage_diff_best_result_and_evaluations(client: Any, seeded: dict[str, Any]) -> None:
    v = client.get(f"/api/variants/{seeded['child']}").json()
    assert [a["source_hash"] for a in v["lineage"]] == [seeded["parent"], seeded["child"]]  # root first
    assert v["parent"]["name"] == "parent_tpl"
    added = [d["text"] for d in v["diff"] if d["kind"] == "add"]
    assert any("16" in t for t in added) and any("alert" in t for t in added)
    assert v["best"]["row"]["objective_ms"] == 0.55  # the child's fastest ok evaluation
    assert v["best"]["resources"]["softmax_kernel"]["registers"] == 40
    assert [s["shape_key"] for s in v["best"]["shapes"]] == ["M=4096,N=4096", "M=8192,N=8192"]
    assert v["evaluations"]["total"] == 3 and v["variant"]["origin"] == "llm"
    html = client.get(f"/variants/{seeded['child']}").text
    assert 'id="parent-link"' in html and "fewer warps" in html and "softmax_kernel" in html


def test_user_text_is_escaped_on_every_page(client: Any, seeded: dict[str, Any]) -> None:
    pages = [
        "/",
        "/campaigns/seeded",
        "/leaderboard",
        f"/variants/{seeded['child']}",
        f"/variants/{seeded['parent']}",
        "/campaigns/seeded/charts",
    ]
    for path in pages:
        html = client.get(path).text
        assert "<img src=x" not in html, path
        assert "<script>alert" not in html, path
    child = client.get(f"/variants/{seeded['child']}").text
    assert "&lt;img src=x onerror=alert(1)&gt;" in child
    assert "&lt;script&gt;alert(&#34;r&#34;)&lt;/script&gt;" in child  # the rationale, inert


def test_pages_and_api_are_paginated(client: Any) -> None:
    first = client.get("/api/evaluations", params={"limit": 2, "sort": "id"}).json()
    second = client.get("/api/evaluations", params={"limit": 2, "offset": 2, "sort": "id"}).json()
    assert first["total"] == 5 and len(first["items"]) == 2 and len(second["items"]) == 2
    assert {e["id"] for e in first["items"]}.isdisjoint({e["id"] for e in second["items"]})
    by_cursor = client.get("/api/evaluations", params={"limit": 2, "sort": "id", "cursor": first["next_cursor"]})
    assert [e["id"] for e in by_cursor.json()["items"]] == [e["id"] for e in second["items"]]
    assert client.get("/api/evaluations", params={"limit": 5000}).status_code == 422
    assert client.get("/api/evaluations", params={"sort": "bogus"}).status_code == 400


def test_openapi_describes_every_api_route(client: Any) -> None:
    paths = set(client.get("/api/openapi.json").json()["paths"])
    for p in (
        "/api/campaigns",
        "/api/campaigns/{name}",
        "/api/evaluations",
        "/api/evaluations/{id}",
        "/api/variants/{source_hash}",
        "/api/decisions",
        "/api/leaderboard",
        "/api/plans",
        "/api/agent",
        "/api/charts/{name}",
        "/api/studies/{name}",
        "/api/agent/calls",
        "/api/agent/calls/{id}",
        "/api/optimize",
        "/api/optimize/{id}",
    ):
        assert p in paths, p


def test_charts_are_built_from_the_campaigns_evaluations(client: Any) -> None:
    charts = client.get("/api/charts/seeded").json()
    figs = {f["id"]: f for f in charts["figures"]}
    best = figs["best-evals"]["spec"]["data"]
    # best-so-far over the 5 evaluations in order: 0.40 from the first on (the 2.5x raw time)
    assert best[0]["y"] == [0.40, 0.40, 0.40, 0.40, 0.40]
    assert sum(sum(t["y"]) for t in figs["verdicts"]["spec"]["data"]) == 5
    assert {"param-softmax-BLOCK", "param-softmax-num_warps", "roofline"} <= set(figs)
    roof = figs["roofline"]["spec"]["data"]
    assert any("ceiling" in t["name"] for t in roof) and figs["roofline"]["points"] == 2
    html = client.get("/campaigns/seeded/charts").text
    assert 'src="/static-lib/plotly.min.js"' in html and 'id="spec-best-evals"' in html


def test_plans_show_breakdown_and_exported_arguments(client: Any) -> None:
    view = client.get("/api/plans").json()
    assert view["plans"]["total"] == 3
    (time_fig, mem_fig) = view["figures"]
    assert {t["name"] for t in time_fig["spec"]["data"]} >= {"compute", "dp_comm"}
    assert {t["name"] for t in mem_fig["spec"]["data"]} >= {"weights", "activations"}
    texts = {e["plan_id"]: e["megatron"] for e in view["exports"]}
    assert any("--tensor-model-parallel-size 2" in t for t in texts.values())
    assert "--tensor-model-parallel-size" in client.get("/plans").text


def test_plans_page_shows_an_llm_plans_rationale_escaped(client: Any) -> None:
    from markupsafe import escape  # Jinja2's own escaping

    html = client.get("/plans").text
    assert str(escape(seed.PLAN_RATIONALE)) in html  # shown, as text
    assert '<img src=x onerror="alert(2)">' not in html


def test_agent_page_says_no_llm_calls_on_a_database_without_any(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from warpforge.dashboard.app import create_app
    from warpforge.db.session import Database

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    db = Database(url)
    db.upgrade()
    db.engine.dispose()
    c = TestClient(create_app(url))
    view = c.get("/api/agent").json()
    assert view["calls"]["items"] == [] and view["total"]["calls"] == 0
    assert "no LLM calls" in c.get("/agent").text


def test_running_campaign_pages_poll_and_the_fragment_renders(client: Any) -> None:
    html = client.get("/").text
    assert re.search(r'data-refresh="[1-9]\d*"', html)  # live-one is running
    rows = client.get("/", params={"partial": "rows"}).text
    assert "live-one" in rows and "<html" not in rows
    assert 'data-refresh="0"' in client.get("/campaigns/seeded").text


def test_unknown_things_are_clear_404s(client: Any) -> None:
    r = client.get("/campaigns/nope")
    assert r.status_code == 404 and "no campaign &#39;nope&#39;" in r.text
    assert client.get("/api/variants/abc").status_code == 404
    assert client.get("/api/evaluations/999999").json() == {"detail": "no evaluation 999999"}


def test_assets_come_from_the_package_with_a_strict_csp(client: Any) -> None:
    import plotly

    r = client.get("/static-lib/plotly.min.js")
    assert r.content == (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    page = client.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "cdn" not in page.text.lower() and "https://" not in page.text
    assert client.get("/static/app.js").status_code == 200 and client.get("/static/style.css").status_code == 200


def test_the_apps_database_session_cannot_write(client: Any) -> None:
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    engine = client.app.state.reader.db.engine
    with engine.connect() as conn:
        with pytest.raises(OperationalError, match="readonly"):
            conn.execute(text("UPDATE wf_campaigns SET status = 'hacked'"))
    assert {c["status"] for c in client.get("/api/campaigns").json()["items"]} == {"finished", "running"}


@pytest.mark.postgres
def test_postgres_read_only_url_refuses_writes(fresh_postgres: str) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import DBAPIError

    from warpforge.db.health import check_database, readonly_url
    from warpforge.db.session import Database

    Database(fresh_postgres).upgrade()
    assert check_database(fresh_postgres).ok
    engine = create_engine(readonly_url(fresh_postgres))
    with engine.connect() as conn:
        with pytest.raises(DBAPIError, match="read-only transaction"):
            conn.execute(
                text(
                    "INSERT INTO wf_campaigns (name, status, spec, created_at, updated_at) "
                    "VALUES ('x', 'running', '{}', now(), now())"
                )
            )
    engine.dispose()


def test_no_secret_appears_in_pages_or_api(seeded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from warpforge.dashboard.app import create_app

    secret = "sk-test-9f8e7d6c5b4a"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    c = TestClient(create_app(seeded["url"]))
    paths = [
        "/",
        "/leaderboard",
        "/plans",
        "/agent",
        "/optimize",
        "/api/optimize",
        "/campaigns/seeded",
        "/campaigns/seeded/charts",
        f"/variants/{seeded['child']}",
        "/api/campaigns",
        "/api/leaderboard",
        "/api/plans",
        "/api/evaluations",
        "/api/openapi.json",
        "/api/charts/seeded",
    ]
    for p in paths:
        assert secret not in c.get(p).text, p
    # A database password is never shown either (the page names the database without it).
    bad = TestClient(create_app("postgresql+psycopg://wf:hunter2pw@127.0.0.1:9/wf"))
    page = bad.get("/")
    assert page.status_code == 503 and "hunter2pw" not in page.text and "***" in page.text


def test_json_encoding_writes_nan_as_null_and_keeps_dataclass_fields() -> None:
    import json
    from dataclasses import dataclass
    from datetime import datetime, timezone

    from warpforge.dashboard.api import _json

    @dataclass(frozen=True)
    class Row:
        ms: float
        when: datetime
        params: dict[str, int]

    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert json.loads(_json((Row(1.5, t, {"B": 2}),)).body) == [
        {"ms": 1.5, "when": "2026-01-02T03:04:05+00:00", "params": {"B": 2}}
    ]
    assert json.loads(_json({"x": Row(float("nan"), t, {})}).body)["x"]["ms"] is None
