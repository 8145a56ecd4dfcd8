"""Stored names are the user's or a candidate's text: `results` and `best` print them literally.

A variant file named ``[/red].py`` is stored as the variant ``[/red]``; printed into a Rich table unescaped it
raised MarkupError (a closing tag with nothing open), which the CLI's boundary reported as "internal error". A
task named ``[red]dbl`` lost its ``[red]`` to styling.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.db.models import Campaign, Decision, Evaluation, VariantRecord
from warpforge.db.session import Database

T0 = datetime(2026, 11, 30, 17, 0, tzinfo=timezone.utc)
H100 = "NVIDIA H100 80GB HBM3"
PARAMS = {"BLOCK": "[/x]", "num_warps": 4}  # a SPACE string: the candidate's text too

VARIANT, TASK, CAMPAIGN = "[/red]", "[red]dbl", "[/bold]camp"


@pytest.fixture(scope="module")
def markup_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('markup')) / 'wf.db'}"
    db = Database(url)
    db.upgrade()
    with db.session() as s:
        camp = Campaign(
            name=CAMPAIGN, status="finished", spec={"tasks": [TASK], "backend": "replay"}, created_at=T0, updated_at=T0
        )
        variant = VariantRecord(source_hash="m" * 64, task=TASK, name=VARIANT, source="#", space={})
        s.add_all([camp, variant])
        facts = [
            {
                "kernel": "_k",
                "target": "sm_90",
                "registers": 16,
                "spill_bytes": 0,
                "shared_bytes": 0,
                "compile_s": 0.5,
                "shape": {"N": 4096},
                "dtype": "float32",
                "num_warps": 4,
            }
        ]
        timed = Evaluation(
            campaign=camp,
            task=TASK,
            variant=variant,
            variant_hash=variant.source_hash,
            params=PARAMS,
            params_key='{"BLOCK": "[/x]", "num_warps": 4}',
            result={"resources": facts},
            created_at=T0 + timedelta(minutes=1),
            backend="replay",
            verdict="ok",
            device=H100,
            timing_source="recorded",
            timing_gpu=H100,
            objective_ms=0.02,
            speedup=2.5,
        )
        s.add(timed)
        s.flush()
        s.add(
            Decision(
                campaign=camp,
                task=TASK,
                backend="replay",
                timing_source="recorded",
                timing_gpu=H100,
                fingerprint="h100",
                accepted=True,
                variant_hash=variant.source_hash,
                variant_name=VARIANT,
                params=PARAMS,
                objective_ms=0.02,
                speedup=2.5,
                speedup_low=2.4,
                speedup_high=2.6,
                interval="bootstrap 95%",
                note="",
                top_k=[],
                shapes=[],
                evaluation_id=timed.id,
                evaluations=1,
                measured=1,
                created_at=T0 + timedelta(minutes=2),
            )
        )
    return url


@pytest.mark.parametrize("columns", ["80", "160"])  # below 120 columns results groups rows under a header line
@pytest.mark.parametrize("argv", [["results"], ["results", "--campaign", CAMPAIGN], ["best", TASK]])
def test_stored_names_are_printed_literally(
    markup_db: str, argv: list[str], columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    import warpforge.cli.results as results

    monkeypatch.setattr(results, "out", Console(width=int(columns)))
    res = CliRunner().invoke(app, [*argv, "--db", markup_db])
    assert res.exit_code == 0, res.output
    assert "internal error" not in res.output
    assert VARIANT in res.stdout and '"[/x]"' in res.stdout, res.stdout
    if argv[0] == "results":
        assert TASK in res.stdout and CAMPAIGN in res.stdout, res.stdout
    else:
        assert f"best {TASK}" in res.stdout, res.stdout
