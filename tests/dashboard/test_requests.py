"""How the dashboard answers requests (issue 31): the 12-digit hashes its pages show work in its paths,
``/api/plans`` takes the ``limit`` the docs promise, and a usage error is a 400 while a bug is a 500."""

from __future__ import annotations

from typing import Any

import pytest


def test_paths_take_the_twelve_digit_hashes_the_pages_show(client: Any, seeded: dict[str, Any]) -> None:
    full, short = seeded["child"], seeded["child"][:12]
    assert f">{short}<" in client.get("/").text or short in client.get(f"/variants/{full}").text
    whole = client.get(f"/api/variants/{full}").json()
    assert client.get(f"/api/variants/{short}").json()["variant"] == whole["variant"]
    assert client.get(f"/variants/{short}").status_code == 200
    by_full = client.get("/api/evaluations", params={"variant_hash": full}).json()["total"]
    assert by_full > 0 and client.get("/api/evaluations", params={"variant_hash": short}).json()["total"] == by_full


@pytest.mark.parametrize("bad", ["abc", "zz" * 8, "0" * 65, "f" * 12])
def test_a_hash_that_names_no_variant_is_a_404_that_says_what_a_hash_is(client: Any, bad: str) -> None:
    r = client.get(f"/api/variants/{bad}")
    assert r.status_code == 404 and "12+ hex digits" in r.json()["detail"]


def test_api_plans_limit_goes_to_the_documented_thousand(client: Any) -> None:
    assert client.get("/api/plans", params={"limit": 1000}).status_code == 200  # docs/dashboard.md: at most 1,000
    assert client.get("/api/plans", params={"limit": 1001}).status_code == 422


def test_a_bug_is_a_500_not_the_users_fault(seeded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from warpforge.dashboard import views
    from warpforge.dashboard.app import create_app

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("an internal slip")  # a plain ValueError used to be answered as the user's 400

    monkeypatch.setattr(views, "leaderboard", broken)
    client = TestClient(create_app(seeded["url"]), raise_server_exceptions=False)
    r = client.get("/api/leaderboard")
    assert r.status_code == 500 and "warpforge bug" in r.json()["detail"]
    page = client.get("/leaderboard")
    assert page.status_code == 500 and "Traceback" not in page.text
    # A usage error from the read layer stays a 400.
    assert client.get("/api/evaluations", params={"sort": "bogus"}).status_code == 400


def test_optuna_dashboard_refuses_writes_with_a_reason_and_serves_reads(tmp_path: Any) -> None:
    """optuna-dashboard's own WSGI app on a study stored by Optuna: reads pass, writes answer 403 + reason."""
    import io
    import json

    import optuna
    import optuna_dashboard

    from warpforge.dashboard.optuna_link import READ_ONLY_REASON, _storage, read_only

    url = f"sqlite:///{tmp_path / 'o.db'}"
    optuna.create_study(study_name="c:t:v:0123456789ab", storage=url).optimize(
        lambda t: t.suggest_float("x", 0, 1), n_trials=2
    )
    app = read_only(optuna_dashboard.wsgi(_storage(url)))

    def call(method: str, path: str, body: bytes = b"") -> tuple[str, bytes]:
        got: list[str] = []
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "x",
            "SERVER_PORT": "1",
            "wsgi.input": io.BytesIO(body),
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": "application/json",
            "wsgi.url_scheme": "http",
            "wsgi.errors": io.StringIO(),
        }
        out = b"".join(app(environ, lambda status, headers, *a: got.append(status)))
        return got[0], out

    status, body = call("GET", "/api/studies")
    assert status.startswith("200") and b"c:t:v:0123456789ab" in body
    for method, path in (("POST", "/api/studies"), ("DELETE", "/api/studies/1"), ("PUT", "/api/studies/1/note")):
        status, body = call(method, path, b'{"study_name": "new", "directions": ["minimize"]}')
        assert status.startswith("403") and json.loads(body) == {"reason": READ_ONLY_REASON}
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["c:t:v:0123456789ab"]  # nothing created
