"""`warpforge eval` prints the candidate's own text (an exception's message, SPACE strings) as text: Rich markup
in it ("[/red]") once raised MarkupError, which the CLI's boundary reported as "internal error"."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.kernels.variant import TEMPLATES_DIR

TEMPLATE = TEMPLATES_DIR / "softmax" / "single_pass.py"
PARAMS = '{"ROWS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 1}'


class _Engine:
    pool = None
    message = "ValueError: [/red] [bold]not markup\ufffd"

    def evaluate(self, job: Any) -> EvalResult:
        return job.result(Verdict.RUNTIME_ERROR, "exception", self.message)

    def close(self) -> None:
        pass


def test_the_candidates_message_is_printed_verbatim(monkeypatch: pytest.MonkeyPatch) -> None:
    import warpforge.evaluator.run.backend as backends

    monkeypatch.setattr(backends, "usable_backend", lambda *a, **k: "interpret")
    monkeypatch.setattr(backends, "get_backend", lambda *a, **k: _Engine())
    res = CliRunner().invoke(app, ["eval", "softmax", str(TEMPLATE), "--params", PARAMS])
    assert res.exit_code == 1, res.output
    assert "ValueError: [/red] [bold]not markup" in res.stdout and "internal error" not in res.output


def test_escape_sequences_in_the_candidates_message_are_printed_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import warpforge.evaluator.run.backend as backends

    engine = _Engine()
    # erase the verdict line, return the cursor and print a green "ok" over it
    engine.message = "ValueError: boom\x1b[2K\r\x1b[32mok\x1b[0m"
    monkeypatch.setattr(backends, "usable_backend", lambda *a, **k: "interpret")
    monkeypatch.setattr(backends, "get_backend", lambda *a, **k: engine)
    res = CliRunner().invoke(app, ["eval", "softmax", str(TEMPLATE), "--params", PARAMS])
    assert res.exit_code == 1, res.output
    assert "\x1b" not in res.output and "\r" not in res.output
    assert "ValueError: boom\\x1b[2K\\x0d\\x1b[32mok\\x1b[0m" in res.stdout


def test_params_text_is_escaped_for_rich() -> None:
    from rich.console import Console

    from warpforge.cli.results import params_text

    console = Console(record=True, width=200)
    console.print(params_text({"MODE": "[/red]"}))
    assert '"[/red]"' in console.export_text()
