"""The ``/optimize`` pages and ``/api/optimize`` routes on reports stored through optimize/store.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

SCRIPT_REGION = '<script>alert("region")</script>'


@pytest.fixture
def stored(tmp_path: Path, optimize_report: Any) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from warpforge.dashboard.app import create_app
    from warpforge.optimize.store import store_report

    url = f"sqlite:///{tmp_path / 'wf.db'}"
    trained = store_report(url, optimize_report)
    inference = optimize_report.model_copy(
        update={
            "target": "kb/<b>1_Conv2D</b>.py",
            "kind": "kernelbench",
            "train": False,
            "speedup": optimize_report.speedup.model_copy(update={"measured": 1.07}),
        }
    )
    measured = store_report(url, inference)
    return {"client": TestClient(create_app(url)), "trained": trained, "measured": measured}


def test_the_list_shows_each_run_with_its_speedup_labelled(stored: dict[str, Any]) -> None:
    page = stored["client"].get("/optimize")
    assert page.status_code == 200
    html = page.text
    assert 'href="/optimize"' in html and ">Optimize<" in html  # the nav link
    assert "./qwen3-tiny" in html and "40.6%" in html and "2 of 4" in html
    assert '1.19x <span class="meta">estimated</span>' in html
    assert '1.07x <span class="meta">measured</span>' in html
    assert html.index(f'href="/optimize/{stored["measured"]}"') < html.index(f'href="/optimize/{stored["trained"]}"')
    assert "<b>1_Conv2D</b>" not in html and "kb/&lt;b&gt;1_Conv2D&lt;/b&gt;.py" in html  # a target is text


def test_a_run_page_shows_regions_checks_patches_and_plans(stored: dict[str, Any]) -> None:
    html = stored["client"].get(f"/optimize/{stored['trained']}").text
    for name in (
        "model.layers.0.input_layernorm",
        "model.layers.0.mlp.act_fn",
        "rmsnorm (M=128,N=64)",
        "no task: loose tensor ops of its module",
    ):
        assert name in html
    assert '<b id="coverage">40.6%</b>' in html and "12.3%" in html  # coverage and a region's share
    assert "<b>1.19x</b> (estimated, not measured" in html and "ceiling: 1.3x (estimated" in html
    assert "max abs diff 0.000977 (tolerance 0.01)" in html and "losses over 3 steps" in html
    assert "10.37/10.37" in html and "gradients: worst relative error 0.0042 (tolerance 0.02)" in html
    assert html.count("<b>match</b>") == 3 and "Triton's interpreter" in html
    assert "warpforge-optimize/patches.json" in html and "tp1 pp1 dp8 mb2" in html and "dgx-h100" in html
    assert 'href="/campaigns/optimize-20261206-rmsnorm"' in html
    # The estimated step (before_us / after_us) is an estimate: never shown as a time.
    assert "101.1" not in html and "85.15" not in html and re.search(r"\d\s*us\b", html) is None
    # A region name from the user's model is text, never markup.
    assert SCRIPT_REGION not in html and "&lt;script&gt;alert(&#34;region&#34;)&lt;/script&gt;" in html


def test_the_api_returns_the_runs_and_a_whole_report(stored: dict[str, Any], optimize_report: Any) -> None:
    client = stored["client"]
    page = client.get("/api/optimize").json()
    assert page["total"] == 2 and [r["id"] for r in page["items"]] == [stored["measured"], stored["trained"]]
    row = page["items"][1]
    assert (row["coverage"], row["speedup"], row["measured"], row["patched"], row["mode"]) == (
        0.4062,
        1.1873,
        False,
        2,
        "train",
    )
    assert client.get("/api/optimize", params={"limit": 1, "offset": 1}).json()["items"][0]["id"] == stored["trained"]
    run = client.get(f"/api/optimize/{stored['trained']}").json()
    assert run["row"]["target"] == "./qwen3-tiny"
    assert [r["name"] for r in run["report"]["regions"]] == [r.name for r in optimize_report.regions]
    assert run["report"]["speedup"]["estimated"] == 1.1873 and run["report"]["speedup"]["measured"] is None
    assert run["report"]["checks"]["grads_match"] is True and run["report"]["plans"]["cluster"] == "dgx-h100"
    paths = set(client.get("/api/openapi.json").json()["paths"])
    assert {"/api/optimize", "/api/optimize/{id}"} <= paths


def test_an_unknown_run_is_a_404(stored: dict[str, Any]) -> None:
    client = stored["client"]
    page = client.get("/optimize/999")
    assert page.status_code == 404 and "no optimize run 999" in page.text
    assert client.get("/api/optimize/999").status_code == 404
    assert client.get("/optimize/nope").status_code == 422  # not an id at all, as /evaluations/{id}


def test_an_empty_database_says_how_to_store_a_run(seeded: dict[str, Any], client: Any) -> None:
    html = client.get("/optimize").text
    assert "No stored optimize runs" in html and "warpforge optimize TARGET" in html
    assert client.get("/api/optimize").json() == {
        "items": [],
        "total": 0,
        "offset": 0,
        "limit": 50,
        "next_cursor": None,
    }
