"""The CLI's error rule (cli.handle_errors): only the project's own errors are usage (exit 2); a plain
ValueError, TypeError or KeyError is a bug (exit 1) said in one line, never a traceback and never "usage"."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from warpforge.cli import handle_errors
from warpforge.errors import UsageError, WarpforgeError
from warpforge.kernels.taskdef import TaskError
from warpforge.kernels.variant import VariantError

ERRORS: dict[str, Exception] = {
    "usage": UsageError("unknown sampler 'x'; choose from random, tpe"),
    "task": TaskError("no task 'nope': warpforge tasks lists them"),
    "variant": VariantError("v.py has no SPACE"),
    "failure": WarpforgeError("the worker pool cannot start"),
    "bug": ValueError("math domain error"),
    "typebug": TypeError("unsupported operand type(s) for +: 'int' and 'str'"),
    "keybug": KeyError("block_m"),
}


def _app() -> typer.Typer:
    app = typer.Typer()

    def boom(kind: str) -> None:
        raise ERRORS[kind]

    app.command()(handle_errors(boom))
    return app


@pytest.mark.parametrize(
    ("kind", "code"),
    [("usage", 2), ("task", 2), ("variant", 2), ("failure", 1), ("bug", 1), ("typebug", 1), ("keybug", 1)],
)
def test_exit_codes_follow_whose_error_it_is(kind: str, code: int) -> None:
    res = CliRunner().invoke(_app(), [kind])
    assert res.exit_code == code, res.output
    assert str(ERRORS[kind]).strip("'") in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1  # one line, never wrapped mid-sentence


def test_a_plain_value_error_says_it_is_a_bug_not_bad_input() -> None:
    res = CliRunner().invoke(_app(), ["bug"])
    assert res.exit_code == 1
    assert "internal error (ValueError: math domain error)" in res.output and "bug in warpforge" in res.output
    res = CliRunner().invoke(_app(), ["keybug"])
    assert res.exit_code == 1 and "internal error (KeyError: 'block_m')" in res.output, res.output


def test_llm_and_dashboard_option_errors_are_usage_errors() -> None:
    # They were plain ValueErrors that needed a wrapper to keep exit 2; now they say what they are.
    from warpforge.agent.config import LLMConfigError
    from warpforge.cli.agent import proposer_config_for_run

    assert issubclass(LLMConfigError, UsageError)
    with pytest.raises(UsageError, match="--llm-replay needs --proposer llm"):
        proposer_config_for_run("template", "old", None, "sm_90", None)
