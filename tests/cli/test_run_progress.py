"""``warpforge run`` prints one progress line per evaluation when stderr is not a terminal (issue 31: piped,
``make run`` printed nothing for minutes)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner


def test_piped_run_prints_a_line_per_evaluation(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import warpforge.search.engine.campaign as campaign
    from warpforge.cli import app
    from warpforge.search.engine.summary import Event

    class Result:
        def summary(self) -> str:
            return "ok"

    def fake_run(spec: Any, on_event: Any, on_start: Any) -> Any:
        on_start("softmax", 2)
        for done in (1, 2):
            on_event(Event("softmax", "online", done, 2, Result(), False, None, None))  # type: ignore[arg-type]
        raise SystemExit(0)  # the summary printing is not what this test is about

    monkeypatch.setattr(campaign, "run_campaign", fake_run)
    out = CliRunner().invoke(
        app, ["run", "softmax", "--trials", "2", "--backend", "interpret", "--db", f"sqlite:///{tmp_path / 'wf.db'}"]
    )
    assert "softmax 1/2: ok | best: not measured" in out.output
    assert "softmax 2/2: ok | best: not measured" in out.output
