"""A whole agent campaign on the CPU (interpreter backend, the tiny ``double`` task) against the scripted server:
good proposals become arms with lineage and are tuned, broken/hacking/prose/duplicate/truncated answers are
recorded with their outcomes, transcripts and costs are stored, the call budget stops the agent and the summary
says so, no key reaches the database or the logs; then ``--llm-replay`` reproduces it with the server gone."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_helpers import KEY, ROOT
from sqlalchemy import create_engine, text

from warpforge.agent.scripted import Reply, ScriptedServer, code_reply
from warpforge.search.engine.campaign import CampaignSpec, run_campaign

ANSWERS = Path(__file__).parent / "answers"
TASK = Path(__file__).parent / "task_double_small.py"
GOOD = (ANSWERS / "double_good_v2.py").read_text()
WRONG = (ANSWERS / "double_wrong.py").read_text()
HACK = (ANSWERS / "double_hack_dynamic.py").read_text()
STATIC_HACK = GOOD.replace("    y = torch.empty_like(x)\n", "    y = torch.empty_like(x.mul(1))\n")
# One answer per call, in order (in_flight 1): r0 good; r1 prose, re-asked -> wrong values; r2 a hack only the
# run time catches; r3 a torch call in launch (static reject), re-asked -> a reformatted duplicate of r0;
# r4 truncated, whose re-ask would be call 8: the budget (7 calls) stops the agent first.
SCRIPT = [
    code_reply(GOOD, prompt_tokens=1000, completion_tokens=200),
    Reply(content="I would vectorise the loads and use a larger block.", reasoning="thinking about BLOCK"),
    code_reply(WRONG),
    code_reply(HACK),
    code_reply(STATIC_HACK),
    code_reply("# the same kernel again\n" + GOOD.replace("    pid =", "    # program id\n    pid =")),
    Reply(content="```python\nimport torch\nTASK = 'double'\ndef launch(x", finish_reason="length"),
]
AGENT = {"in_flight": 1, "max_calls": 7, "seed": 0}


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        out = [tuple(r) for r in conn.execute(text(sql))]
    engine.dispose()
    return out


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Runs the campaign once for the module's tests (~1 min on 2 cores: every evaluation runs the interpreter)."""
    tmp = tmp_path_factory.mktemp("agent")
    db = tmp / "wf.db"
    server = ScriptedServer(SCRIPT).start()
    config = tmp / "models.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "models": [
                    {
                        "name": "scripted",
                        "model": "coder",
                        "base_url": server.url,
                        "api_key_env": "WF_TEST_KEY",
                        "max_retries": 0,
                        "price_in": 2.0,
                        "price_out": 8.0,
                    }
                ]
            }
        )
    )
    saved = {k: os.environ.get(k) for k in ("WARPFORGE_LLM_CONFIG", "WF_TEST_KEY")}
    os.environ.update({"WARPFORGE_LLM_CONFIG": str(config), "WF_TEST_KEY": KEY})
    records: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: records.append(handler.format(record))  # type: ignore[method-assign]
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # openai and httpx log requests at DEBUG: the key must not be in them either
    try:
        spec = CampaignSpec(
            name="agent-c",
            tasks=[str(TASK)],
            trials=10,
            proposer="llm",
            proposer_config=dict(AGENT),
            backend="interpret",
            sampler="random",
            seed=0,
            db_url=f"sqlite:///{db}",
            top_k=0,
            seeds=1,
        )
        summary = run_campaign(spec)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield {"db": db, "summary": summary, "server": server, "logs": "\n".join(records)}


@pytest.mark.slow
def test_good_proposals_are_tuned_with_lineage_and_bad_ones_get_verdicts(campaign: dict[str, Any]) -> None:
    db = campaign["db"]
    llm = rows(
        db, "select name, source_hash, origin, proposer, parents, proposal_id, rationale from wf_variants order by id"
    )
    assert [r[0] for r in llm] == ["llm_r0_s0", "llm_r1_s0", "llm_r2_s0"]
    assert all(r[2] == "llm" and r[3] == "llm" and r[5] for r in llm)
    good_hash = llm[0][1]
    assert json.loads(llm[1][4]) == [good_hash] and json.loads(llm[2][4]) == [good_hash]  # children of r0
    assert llm[0][6].startswith("Here is the variant")
    verdicts = dict(
        rows(
            db,
            "select v.name, group_concat(distinct e.verdict || ':' || e.reason) from wf_evaluations e "
            "join wf_variants v on v.id = e.variant_id group by v.name",
        )
    )
    assert verdicts["llm_r0_s0"] == "ok:"  # both configurations of its SPACE tuned and correct
    # 3x + 1 for 2x + 1: wrong values on every input (precision_downgrade needs the pattern of a precision loss,
    # evaluator/compare.precision_loss, so the reason no longer depends on the random inputs).
    assert verdicts["llm_r1_s0"] == "incorrect:wrong_values"
    assert verdicts["llm_r2_s0"] == "rejected:no_triton_kernel"
    assert rows(
        db,
        "select count(distinct params_key) from wf_evaluations e join wf_variants v on "
        "v.id = e.variant_id where v.name = 'llm_r0_s0'",
    ) == [(2,)]


@pytest.mark.slow
def test_every_call_is_stored_with_its_outcome_tokens_and_cost(campaign: dict[str, Any]) -> None:
    calls = rows(
        campaign["db"],
        "select call_key, outcome, finish_reason, prompt_tokens, completion_tokens, cost_usd,"
        " reasoning, variant_hash is not null from wf_agent_calls order by id",
    )
    assert [(c[0], c[1]) for c in calls] == [
        ("r0.s0.a0", "accepted"),
        ("r1.s0.a0", "no_code"),
        ("r1.s0.a1", "accepted"),
        ("r2.s0.a0", "accepted"),
        ("r3.s0.a0", "rejected"),
        ("r3.s0.a1", "duplicate"),
        ("r4.s0.a0", "truncated"),
    ]
    first = calls[0]
    # 1000 prompt tokens at $2/M + 200 completion tokens at $8/M = $0.0036 (by hand).
    assert first[2:6] == ("stop", 1000, 200, pytest.approx(0.0036))
    assert calls[1][6] == "thinking about BLOCK" and calls[6][2] == "length"
    assert len(campaign["server"].requests) == 7


@pytest.mark.slow
def test_the_call_budget_stops_the_agent_and_the_summary_says_so(campaign: dict[str, Any]) -> None:
    notes = campaign["summary"].tasks[0].notes
    assert any("llm agent: 7 calls" in n and "stopped by calls" in n for n in notes), notes
    run = rows(campaign["db"], "select stop_reason, calls, outcomes from wf_agent_runs")
    assert run[0][:2] == ("calls", 7)
    assert json.loads(run[0][2]) == {"accepted": 3, "no_code": 1, "rejected": 1, "duplicate": 1, "truncated": 1}


@pytest.mark.slow
def test_no_key_in_the_database_or_the_logs(campaign: dict[str, Any]) -> None:
    assert "scripted" in campaign["logs"]  # the logs were captured (the agent logs each call's outcome)
    assert KEY not in campaign["logs"]
    # grep in another process: opening and closing the file here would drop this process's SQLite locks
    # (POSIX locks are per process), which corrupts the view of connections still open on it.
    files = [str(f) for f in campaign["db"].parent.glob("wf.db*")]  # the database file and its WAL
    assert files
    found = subprocess.run(["grep", "-c", "-a", KEY, *files], capture_output=True, text=True)
    assert found.returncode == 1, found.stdout  # grep: 1 = no line matched in any file
    assert campaign["server"].auth_headers[0] == f"Bearer {KEY}"  # it was sent to the server, and only there


def wf(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("WARPFORGE_LLM", "OPENAI"))}
    full.pop("TRITON_INTERPRET", None)  # the CLI chooses the interpreter itself, per child
    full.update(env)
    full["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run(
        [sys.executable, "-m", "warpforge.cli", *args], capture_output=True, text=True, env=full, timeout=900
    )


@pytest.mark.slow
def test_transcripts_command(campaign: dict[str, Any]) -> None:
    proc = wf("agent", "transcripts", "agent-c", "--json", env={"WARPFORGE_DB": f"sqlite:///{campaign['db']}"})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [c["outcome"] for c in data["calls"]][:3] == ["accepted", "no_code", "accepted"]
    assert data["calls"][2]["verdicts"] == {"incorrect": 1} and data["runs"][0]["stop_reason"] == "calls"
    assert data["calls"][0]["messages"][0]["role"] == "system" and KEY not in proc.stdout
    table = wf("agent", "transcripts", "agent-c", env={"WARPFORGE_DB": f"sqlite:///{campaign['db']}"})
    assert "stopped by calls" in table.stdout
    missing = wf("agent", "transcripts", "nope", env={"WARPFORGE_DB": f"sqlite:///{campaign['db']}"})
    assert missing.returncode == 2 and "no campaign 'nope'" in missing.stderr  # an unknown name: usage


def test_no_llm_configured_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from warpforge.cli import app

    for var in ("WARPFORGE_LLM_CONFIG", "WARPFORGE_LLM_MODEL", "WARPFORGE_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(app, ["run", str(TASK), "--proposer", "llm", "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert result.exit_code == 2
    assert "set WARPFORGE_LLM_MODEL" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists()  # refused before anything started
    replay = CliRunner().invoke(app, ["run", str(TASK), "--llm-replay", "c"])
    assert replay.exit_code == 2 and "--llm-replay needs --proposer llm" in replay.output


@pytest.mark.slow
def test_replay_reaches_the_same_variants_with_no_network(campaign: dict[str, Any]) -> None:
    db = campaign["db"]
    # The scripted server is stopped and no LLM is configured: only the stored answers can be used.
    proc = wf(
        "run",
        str(TASK),
        "--proposer",
        "llm",
        "--llm-replay",
        "agent-c",
        "--campaign",
        "agent-r",
        "--backend",
        "interpret",
        "--sampler",
        "random",
        "--seed",
        "0",
        "--trials",
        "10",
        "--top-k",
        "0",
        "--json",
        env={"WARPFORGE_DB": f"sqlite:///{db}"},
    )
    assert proc.returncode == 0, proc.stderr

    def produced(name: str) -> list[tuple[Any, ...]]:
        return rows(
            db,
            "select c.call_key, c.outcome, c.variant_hash from wf_agent_calls c join wf_campaigns k on "
            f"k.id = c.campaign_id where k.name = '{name}' order by c.id",
        )

    assert produced("agent-r") == produced("agent-c")
    assert rows(
        db,
        "select count(*) from wf_agent_calls c join wf_campaigns k on k.id = c.campaign_id "
        "where k.name = 'agent-r' and not c.replayed",
    ) == [(0,)]
    searched = rows(
        db,
        "select k.name, count(distinct e.variant_hash) from wf_evaluations e join wf_campaigns k on "
        "k.id = e.campaign_id group by k.name order by k.name",
    )
    assert searched == [("agent-c", 3), ("agent-r", 3)]
    summary = json.loads(proc.stdout)
    assert any("stopped by calls" in n for n in summary["tasks"][0]["notes"])
