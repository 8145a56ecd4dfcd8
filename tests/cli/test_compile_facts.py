"""A CPU campaign is useful (issue 19, items 1 and 7): ``results`` and ``best`` show each configuration's compile
facts, ``best`` ranks the configurations verified ok by them (static, never a time) with the same function
``export --allow-untimed`` uses, and an unknown task or campaign is a usage error that names what is known.

Old behaviour each test guards against: results/best showed no registers, spills or shared memory; best on a
CPU campaign only said "no measured correct result"; ``results --task nosuch`` printed an empty table (exit 0)
and ``best nosuch`` the same message as a known task without results; ``best --json`` exited 0 with ``[]``
where the table exited 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.compile_facts import occupancy, static_rank
from warpforge.db.models import Campaign, Evaluation, VariantRecord
from warpforge.db.queries import Reader
from warpforge.db.session import Database
from warpforge.export.plan import plan_task
from warpforge.kernels.task import get_task


def cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


# --- occupancy, by hand ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("regs", "warps", "smem", "target", "expected"),
    [
        # 32 regs: 1024 per warp, 64 warps fit; 16 blocks of 4 warps = 64 of 64 warp slots
        (32, 4, 0, "sm_90", 1.0),
        # 128 regs: 4096 per warp, 16 warps fit: 4 blocks of 4 = 16 of 64
        (128, 4, 0, "sm_90", 0.25),
        # 94 regs round up to 96: 3072 per warp, 21 warps fit: 5 blocks of 4 = 20 of 64
        (94, 4, 16, "sm_90", 20 / 64),
        # shared memory binds: 233472 // (100000 + 1024) = 2 blocks of 8 warps = 16 of 64
        (64, 8, 100_000, "sm_90", 0.25),
        # sm_86 has 48 warp slots: 32 regs, 16 warps per block -> 3 blocks = 48 of 48
        (32, 16, 0, "cuda:86", 1.0),
        (32, 4, 0, "sm_61", None),  # limits not known: no guess
        (None, 4, 0, "sm_90", None),
    ],
)
def test_occupancy_by_hand(regs: int | None, warps: int, smem: int, target: str, expected: float | None) -> None:
    assert occupancy(regs, warps, smem, target) == (pytest.approx(expected) if expected is not None else None)


# --- a database whose static order is known by construction ----------------------------------------------------
FACTS: dict[str, dict[str, Any] | None] = {
    "spills": {"registers": 32, "spill_bytes": 8, "shared_bytes": 0, "num_warps": 4},  # spills: after all others
    "full": {"registers": 32, "spill_bytes": 0, "shared_bytes": 0, "num_warps": 4},  # 100% occupancy: first
    "regs128": {"registers": 128, "spill_bytes": 0, "shared_bytes": 0, "num_warps": 4},  # 25%, 128 registers
    "smem": {"registers": 64, "spill_bytes": 0, "shared_bytes": 100_000, "num_warps": 8},  # 25%, 64 registers
    "unknown": None,  # stored before facts: last
}
EXPECTED = ["full", "smem", "regs128", "spills", "unknown"]


@pytest.fixture
def ranked_db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    db = Database(url)
    db.upgrade()
    with db.session() as s:
        old, new = Campaign(name="old", status="finished", spec={}), Campaign(name="new", status="finished", spec={})
        v = VariantRecord(source_hash="v" * 64, task="double", name="v", source="#", space={})
        s.add_all([old, new, v])

        def add(campaign: Campaign, name: str, facts: dict[str, Any] | None, verdict: str = "ok") -> None:
            params = {"name": name}
            resources = (
                [{"kernel": "k", "target": "sm_90", "compile_s": 0.1, "shape": {"N": 64}, "dtype": "float32", **facts}]
                if facts is not None
                else []
            )
            s.add(
                Evaluation(
                    campaign=campaign,
                    task="double",
                    variant=v,
                    variant_hash=v.source_hash,
                    params=params,
                    params_key=json.dumps(params),
                    backend="interpret",
                    verdict=verdict,
                    result={"resources": resources},
                )
            )

        add(old, "full", {"registers": 255, "spill_bytes": 4096, "shared_bytes": 0, "num_warps": 4})  # superseded
        add(new, "wrong", FACTS["full"], verdict="incorrect")  # never ranked: not verified ok
        for name in ("unknown", "spills", "regs128", "smem", "full"):
            add(new, name, FACTS[name])
    return url


def test_best_static_ranks_by_compile_facts(ranked_db: str) -> None:
    code, out, _ = cli("best", "double", "--static", "--json", "--db", ranked_db, "--limit", "10")
    rows = json.loads(out)
    assert code == 0 and [r["params"]["name"] for r in rows] == EXPECTED
    assert [r["static_rank"] for r in rows] == [1, 2, 3, 4, 5]
    assert all(r["timing_source"] == "static (compile facts; not a time)" and "time_ms" not in r for r in rows)
    assert rows[0]["worst"] == {"spill_bytes": 0.0, "registers": 32.0, "shared_bytes": 0.0, "occupancy": 1.0}
    assert rows[1]["worst"]["occupancy"] == 0.25 and rows[2]["worst"]["occupancy"] == 0.25
    assert rows[4]["worst"]["occupancy"] is None and rows[4]["resources"] == []
    # The same ranking export --allow-untimed picks from (one function): its first is ours.
    plan = plan_task(
        Reader(ranked_db),
        get_task(str(Path(__file__).parents[1] / "evaluator" / "planted" / "task_double.py")),
        allow_untimed=True,
    )
    assert plan.info["params"] == {"name": "full"} and "occupancy 100%" in plan.info["speedup_note"]


def test_static_rank_key_is_spills_occupancy_registers_shared() -> None:
    keys = {name: static_rank([{"target": "sm_90", **f}] if f else None) for name, f in FACTS.items()}
    assert sorted(keys, key=lambda n: keys[n]) == EXPECTED


def test_best_on_a_cpu_campaign_shows_the_static_ranking_and_exits_1(stored_db: Path) -> None:
    url = f"sqlite:///{stored_db}"
    code, out, err = cli("best", "rmsnorm", "--db", url)
    assert code == 1 and "no measured correct result for 'rmsnorm'" in err and "measured 0 of 6" in err
    assert "static ranking for sm_90 by compile facts (not a time)" in out
    assert "ms" not in out.split() and "speedup" not in out  # never a time
    code, out, _ = cli("best", "rmsnorm", "--db", url, "--json")
    assert code == 1 and json.loads(out) == []  # old: exit 0 here, 1 for the same answer as a table


def test_results_json_has_facts_per_kernel_and_shape(stored_db: Path) -> None:
    code, out, _ = cli("results", "--campaign", "cpu-demo", "--json", "--db", f"sqlite:///{stored_db}")
    rows = {r["id"]: r for r in json.loads(out)}
    assert code == 0 and len(rows) == 6
    three = rows[3]  # single_pass, ROWS_PER_PROGRAM=2, 4 warps: its 8192-wide fp16 kernel needs 163 registers
    assert [(f["shape"], f["dtype"], f["registers"]) for f in three["resources"]] == [
        ("M=4096,N=4096", "float16", 94),
        ("M=8192,N=8192", "float16", 163),
        ("M=4096,N=4096", "bfloat16", 95),
        ("M=4096,N=4096", "float32", 94),
    ]
    # 163 registers -> 168 per thread, 5376 per warp: 12 warps fit, 3 blocks of 4 = 12 of 64 slots
    assert three["resources"][1]["occupancy"] == pytest.approx(12 / 64)
    assert three["compile"] == {
        "spill_bytes": 0.0,
        "registers": 163.0,
        "shared_bytes": 16.0,
        "occupancy": pytest.approx(12 / 64),
    }


def test_best_with_a_timed_winner_carries_its_facts(stored_db: Path) -> None:
    code, out, _ = cli("best", "double", "--json", "--db", f"sqlite:///{stored_db}")
    (row,) = json.loads(out)
    assert code == 0 and row["time_ms"] == 0.0187 and row["params"] == {"BLOCK": 1024, "num_warps": 4}
    assert [(f["registers"], f["num_warps"]) for f in row["resources"]] == [(24, 4)]


# --- unknown tasks and campaigns -------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [("results", "--task", "nosuch"), ("best", "nosuch"), ("best", "nosuch", "--json")])
def test_an_unknown_task_is_a_usage_error_naming_the_known_ones(stored_db: Path, args: tuple[str, ...]) -> None:
    code, out, err = cli(*args, "--db", f"sqlite:///{stored_db}")
    assert code == 2 and out == ""
    assert "unknown task 'nosuch'" in err and "rmsnorm" in err and "warpforge tasks" in err
    assert "double" in err  # a task known only from this database (a task file) is listed too


def test_a_known_task_without_results_is_not_unknown(stored_db: Path) -> None:
    url = f"sqlite:///{stored_db}"
    code, out, _ = cli("results", "--task", "softmax", "--db", url, "--json")
    assert code == 0 and json.loads(out) == []
    code, _, err = cli("best", "softmax", "--db", url)
    assert code == 1 and "no measured correct result for 'softmax'" in err and "unknown" not in err


def test_an_unknown_campaign_is_a_usage_error(stored_db: Path) -> None:
    code, _, err = cli("results", "--campaign", "nosuch", "--db", f"sqlite:///{stored_db}")
    assert code == 2 and "unknown campaign 'nosuch'" in err and "h100-rec" in err and "cpu-demo" in err


def test_static_with_gpu_or_shape_is_a_usage_error(stored_db: Path) -> None:
    code, _, err = cli("best", "rmsnorm", "--static", "--gpu", "H100", "--db", f"sqlite:///{stored_db}")
    assert code == 2 and "--static ranks by compile facts" in err
