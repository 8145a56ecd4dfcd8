"""Server time of every dashboard route on a database holding N evaluations (target: < 300 ms at 100,000).

Fills a fresh database directly (bulk inserts through the models: campaigns, variants, evaluations with
two per-shape measurements each, stored decisions, plans, optimize runs), then requests each page and API route through
the app in-process and reports the app's own ``Server-Timing`` (median and max of ``--repeats`` after one
warm-up request; a route passes when its median is under the target). SQLite always; PostgreSQL too when
its server binaries exist (a throwaway server).

    python benchmarks/dashboard_routes.py                      # 10,000 evaluations, quick
    python benchmarks/dashboard_routes.py --evaluations 100000 # the issue's target size
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

TARGET_MS = 300.0
CLI_TARGET_MS = 1000.0  # best --static, a whole command
GPU = "Synthetic H100 (benchmark fill)"
VERDICTS = ["ok"] * 7 + ["incorrect", "compile_error", "invalid_config"]


def fill(url: str, n: int, campaigns: int = 10, seed: int = 0, cpu: int = 0) -> dict[str, Any]:
    from sqlalchemy import insert

    from warpforge.db.models import AgentCall, AgentRun, Campaign, Decision, Evaluation, Measurement, VariantRecord
    from warpforge.db.session import Database

    rng = random.Random(seed)
    db = Database(url)
    db.upgrade()
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    per = n // campaigns
    variants_per = 8
    with db.session() as s:
        for c in range(campaigns):
            s.add(
                Campaign(
                    id=c + 1,
                    name=f"bench-{c}",
                    status="finished" if c else "running",
                    created_at=t0,
                    updated_at=t0,
                    spec={"tasks": ["softmax"], "backend": "replay", "proposer": "template", "sampler": "wf-default"},
                )
            )
        vrows = []
        for v in range(campaigns * variants_per):
            parent = [f"{v - 1:064x}"] if v % variants_per else []
            vrows.append(
                {
                    "id": v + 1,
                    "source_hash": f"{v:064x}",
                    "task": "softmax",
                    "name": f"variant_{v}",
                    "origin": "template" if not parent else "llm",
                    "proposer": "bench",
                    "parents": parent,
                    "proposal_id": str(v * 20 + 1) if parent else None,
                    "rationale": "",
                    "source": f"TASK = 'softmax'\n# variant {v}\n" + "x = 1\n" * 40,
                    "space": {"BLOCK": [128, 256, 512, 1024], "num_warps": [2, 4, 8]},
                    "created_at": t0,
                }
            )
        s.execute(insert(VariantRecord), vrows)
    eid = 0
    batch = 20_000
    with db.session() as s:
        evals: list[dict[str, Any]] = []
        meas: list[dict[str, Any]] = []
        for c in range(campaigns):
            for i in range(per):
                eid += 1
                v = c * variants_per + rng.randrange(variants_per)
                verdict = rng.choice(VERDICTS)
                ms = rng.uniform(0.05, 2.0) if verdict == "ok" else None
                params = {"BLOCK": rng.choice([128, 256, 512, 1024]), "num_warps": rng.choice([2, 4, 8])}
                evals.append(
                    {
                        "id": eid,
                        "campaign_id": c + 1,
                        "task": "softmax",
                        "task_hash": "t",
                        "variant_id": v + 1,
                        "variant_hash": f"{v:064x}",
                        "params": params,
                        "params_key": json.dumps(params, sort_keys=True),
                        "backend": "replay",
                        "verdict": verdict,
                        "reason": "" if verdict == "ok" else "bench",
                        "message": "",
                        "device": GPU,
                        "fingerprint": "fp",
                        "timing_source": "recorded" if ms else None,
                        "timing_gpu": GPU if ms else None,
                        "objective_ms": ms,
                        "speedup": 0.5 / ms if ms else None,
                        "compile_s": 0.5,
                        "wall_s": 0.01,
                        "study_name": f"bench-{c}:softmax",
                        "trial_number": i,
                        "final": False,
                        "result": {"verdict": verdict},
                        "created_at": t0 + timedelta(seconds=eid),
                    }
                )
                if ms:
                    for shape in ({"M": 4096, "N": 4096}, {"M": 8192, "N": 8192}):
                        meas.append(
                            {
                                "evaluation_id": eid,
                                "shape_key": f"M={shape['M']},N={shape['N']}",
                                "shape": shape,
                                "dtype": "float32",
                                "p20_ms": ms * 0.98,
                                "p50_ms": ms,
                                "p80_ms": ms * 1.02,
                                "ref_p50_ms": 0.5,
                                "speedup": 0.5 / ms,
                                "roofline_pct": 40.0,
                            }
                        )
                if len(evals) >= batch:
                    s.execute(insert(Evaluation), evals)
                    s.execute(insert(Measurement), meas)
                    evals, meas = [], []
        if evals:
            s.execute(insert(Evaluation), evals)
            s.execute(insert(Measurement), meas)
        for c in range(campaigns):
            v = c * variants_per + variants_per - 1
            s.add(
                Decision(
                    campaign_id=c + 1,
                    task="softmax",
                    backend="replay",
                    timing_source="recorded",
                    timing_gpu=f"{GPU} {c % 3}",
                    fingerprint=f"fp{c % 3}",
                    accepted=True,
                    variant_hash=f"{v:064x}",
                    variant_name=f"variant_{v}",
                    params={"BLOCK": 256},
                    objective_ms=0.1 + c / 100,
                    speedup=5 - c / 10,
                    speedup_low=4.5 - c / 10,
                    speedup_high=5.5 - c / 10,
                    interval="bench",
                    evaluations=per,
                    measured=per,
                    top_k=[],
                    shapes=[
                        {
                            "shape": {"M": 4096, "N": 4096},
                            "shape_key": "M=4096,N=4096",
                            "dtype": "float32",
                            "p50_ms": 0.1,
                            "speedup": 5.0,
                            "roofline_pct": 40.0,
                        }
                    ],
                    note="bench",
                    created_at=t0,
                )
            )
    _agent_calls(db, campaigns, variants_per, t0, AgentCall, AgentRun)
    _cpu_campaigns(db, cpu, campaigns, variants_per, eid, t0, rng)
    _plans(url)
    run = _optimize_runs(url)
    if db.engine.dialect.name == "postgresql":
        # A live server's autovacuum has analysed the tables and set the visibility map (index-only scans);
        # a bulk fill seconds old has neither, so do what autovacuum would before timing.
        from sqlalchemy import text

        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
    db.engine.dispose()
    return {
        "busiest_variant": f"{0:064x}",
        "evaluation": eid // 2,
        "campaign": "bench-0",
        "llm_variant": f"{variants_per - 1:064x}",
        "call": 20 * (variants_per - 1) + 1,
        "cpu_campaign": "cpu-0" if cpu else None,
        "cpu_variant": f"{campaigns * variants_per:064x}",
        "optimize_run": run,
    }


def _cpu_campaigns(db: Any, n: int, after: int, variants_per: int, eid: int, t0: datetime, rng: random.Random) -> None:
    """``n`` evaluations of rmsnorm over ten CPU campaigns (interpret backend): compile facts per kernel and
    shape for sm_90, nothing timed, no accepted decision; what a CPU user's database holds."""
    from sqlalchemy import insert

    from warpforge.compile_facts import static_columns
    from warpforge.db.models import Campaign, Decision, Evaluation, VariantRecord

    if n <= 0:
        return
    campaigns, base = 10, after * variants_per
    with db.session() as s:
        for c in range(campaigns):
            s.add(
                Campaign(
                    id=after + c + 1,
                    name=f"cpu-{c}",
                    status="finished",
                    created_at=t0,
                    updated_at=t0,
                    spec={
                        "tasks": ["rmsnorm"],
                        "backend": "interpret",
                        "proposer": "template",
                        "sampler": "wf-default",
                    },
                )
            )
        s.execute(
            insert(VariantRecord),
            [
                {
                    "id": base + v + 1,
                    "source_hash": f"{base + v:064x}",
                    "task": "rmsnorm",
                    "name": f"cpu_variant_{v}",
                    "origin": "template",
                    "proposer": "bench",
                    "parents": [],
                    "rationale": "",
                    "source": "TASK = 'rmsnorm'\n",
                    "space": {"BLOCK_N": [256, 512, 1024, 2048, 4096]},
                    "created_at": t0,
                }
                for v in range(campaigns * variants_per)
            ],
        )
        rows: list[dict[str, Any]] = []
        for i in range(n):
            eid += 1
            c, v = i % campaigns, base + rng.randrange(campaigns * variants_per)
            verdict = rng.choice(VERDICTS)
            params = {
                "BLOCK_N": rng.choice([256, 512, 1024, 2048, 4096]),
                "num_warps": rng.choice([1, 2, 4, 8, 16]),
                "ROWS": rng.randrange(1, 65),
            }
            resources = (
                [
                    {
                        "kernel": "_rmsnorm",
                        "target": "sm_90",
                        "shape": {"M": m, "N": m},
                        "dtype": "float16",
                        "registers": rng.choice([24, 32, 40, 64, 96, 128, 168]),
                        "spill_bytes": rng.choice([0] * 9 + [64]),
                        "shared_bytes": rng.choice([0, 16, 1024]),
                        "num_warps": params["num_warps"],
                        "compile_s": 0.4,
                    }
                    for m in (4096, 8192)
                ]
                if verdict in ("ok", "incorrect")
                else []
            )
            rows.append(
                {
                    "id": eid,
                    "campaign_id": after + c + 1,
                    "task": "rmsnorm",
                    "task_hash": "t",
                    "variant_id": v + 1,
                    "variant_hash": f"{v:064x}",
                    "params": params,
                    "params_key": json.dumps(params, sort_keys=True),
                    "backend": "interpret",
                    "verdict": verdict,
                    "reason": "" if verdict == "ok" else "bench",
                    "message": "",
                    "device": "cpu",
                    "fingerprint": "cpu",
                    "timing_source": None,
                    "timing_gpu": None,
                    "objective_ms": None,
                    "speedup": None,
                    "compile_s": 0.8,
                    "wall_s": 40.0,
                    "study_name": f"cpu-{c}:rmsnorm",
                    "trial_number": i // campaigns,
                    "final": False,
                    "result": {"verdict": verdict, "resources": resources},
                    "created_at": t0 + timedelta(seconds=eid),
                    **static_columns(resources),
                }
            )
            if len(rows) >= 20_000:
                s.execute(insert(Evaluation), rows)
                rows = []
        if rows:
            s.execute(insert(Evaluation), rows)
        for c in range(campaigns):
            s.add(
                Decision(
                    campaign_id=after + c + 1,
                    task="rmsnorm",
                    backend="interpret",
                    accepted=False,
                    note="nothing timed (interpret backend)",
                    evaluations=n // campaigns,
                    measured=0,
                    top_k=[],
                    shapes=[],
                    created_at=t0,
                )
            )


def _agent_calls(db: Any, campaigns: int, variants_per: int, t0: datetime, call_model: Any, run_model: Any) -> None:
    """20 LLM calls per LLM variant (the 20*v+1-th produced it: its proposal_id), a transcript of ~6 kB each."""
    from sqlalchemy import insert

    outcomes = ["accepted", "rejected", "no_code", "duplicate", "truncated"]
    rows, call_id = [], 0
    for v in range(campaigns * variants_per):
        if v % variants_per == 0:
            continue
        for k in range(20):
            call_id += 1
            rows.append(
                {
                    "id": v * 20 + 1 + k,
                    "campaign_id": v // variants_per + 1,
                    "task": "softmax",
                    "call_key": f"r{v}.s0.a{k}",
                    "parents": [f"{v - 1:064x}"],
                    "model": f"model-{k % 3}",
                    "params": {"temperature": 0.7},
                    "messages": [
                        {"role": "system", "content": "You write Triton kernels. " * 20},
                        {"role": "user", "content": "The parent, its times and failures. " * 100},
                    ],
                    "prompt_cut": [],
                    "content": "Here is the variant.\n```python\n" + "x = 1\n" * 100 + "```",
                    "reasoning": "",
                    "finish_reason": "stop",
                    "prompt_tokens": 1500,
                    "completion_tokens": 300,
                    "latency_s": 4.0,
                    "cost_usd": 0.0054,
                    "outcome": "accepted" if k == 0 else outcomes[k % 5],
                    "message": "",
                    "variant_hash": f"{v:064x}" if k == 0 else None,
                    "ast_hash": None,
                    "replayed": False,
                    "created_at": t0,
                }
            )
    with db.session() as s:
        s.execute(insert(call_model), rows)
        s.execute(
            insert(run_model),
            [
                {
                    "campaign_id": c + 1,
                    "task": "softmax",
                    "stop_reason": "calls",
                    "calls": 20 * (variants_per - 1),
                    "outcomes": {"accepted": 7},
                    "settings": {},
                    "updated_at": t0,
                }
                for c in range(campaigns)
            ],
        )
    if db.engine.dialect.name == "postgresql":
        from sqlalchemy import text

        with db.session() as s:
            s.execute(
                text(
                    "SELECT setval(pg_get_serial_sequence('wf_agent_calls', 'id'), "
                    "(SELECT max(id) FROM wf_agent_calls))"
                )
            )


def _plans(url: str) -> None:
    from warpforge.parallel import load_cluster, load_model
    from warpforge.parallel.search import search_plans
    from warpforge.parallel.store import store_search

    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100")
    store_search(url, model, cluster, search_plans(model, cluster, trials=200, top=5), limit=200)


def _optimize_runs(url: str, runs: int = 50, regions: int = 200) -> int:
    """``runs`` stored ``warpforge optimize`` reports of ``regions`` regions each (a deep model's report); the
    id of the newest."""
    from dataclasses import asdict

    from warpforge.db.models import OptimizeRun
    from warpforge.db.session import Database
    from warpforge.optimize.report import Checks, OptimizeReport, RegionRow, SpeedupEstimate
    from warpforge.optimize.store import run_record

    rows = [
        RegionRow(
            name=f"model.layers.{i // 4}.{('input_layernorm', 'self_attn', 'mlp.act_fn', 'rest')[i % 4]}",
            kind=("rmsnorm", "attention", "swiglu", "loose")[i % 4],
            share=1 / regions,
            task="rmsnorm (M=128,N=64)" if i % 4 == 0 else None,
            status="patched" if i % 4 == 0 else "no task: loose tensor ops of its module",
            patched=i % 4 == 0,
            estimated_us=1.0,
        )
        for i in range(regions)
    ]
    checks = Checks(
        max_abs_diff=1e-3,
        output_tolerance=1e-2,
        outputs_match=True,
        losses_before=[10.0] * 3,
        losses_after=[10.0] * 3,
        loss_tolerance=0.05,
        losses_match=True,
        grad_max_rel_diff=1e-3,
        grad_tolerance=0.02,
        grads_match=True,
        kernel_calls={r.name: 2 for r in rows if r.patched},
    )
    report = OptimizeReport(
        target="./bench-model",
        kind="transformers",
        train=True,
        dtype="float16",
        batch=2,
        seq=64,
        gpu="H100 SXM",
        regions=rows,
        coverage=0.25,
        checks=checks,
        speedup=SpeedupEstimate(estimated=1.1, basis="bench fill", before_us=200.0, after_us=180.0, ceiling=1.3),
        campaigns={},
        trials={},
        untimed=True,
        package="",
        patches="patches.json",
    )
    record = asdict(run_record(report))
    db = Database(url)
    with db.session() as s:
        added = [OptimizeRun(**record) for _ in range(runs)]
        s.add_all(added)
        s.flush()
        newest = max(int(r.id) for r in added)
    db.engine.dispose()
    return newest


def routes(info: dict[str, Any]) -> list[str]:
    c, v, e = info["campaign"], info["busiest_variant"], info["evaluation"]
    return [
        "/",
        "/?partial=rows",
        f"/campaigns/{c}",
        f"/campaigns/{c}?verdict=ok&offset=5000",
        f"/campaigns/{c}/charts",
        "/leaderboard",
        "/leaderboard?shape=M%3D4096%2CN%3D4096&sort=speedup",
        f"/variants/{v}",
        f"/variants/{v}?offset=2000",
        f"/evaluations/{e}",
        "/plans",
        "/agent",
        "/api/campaigns",
        f"/api/campaigns/{c}",
        "/api/evaluations?limit=1000",
        "/api/evaluations?sort=objective_ms&verdict=ok&limit=100",
        "/api/evaluations?offset=90000&limit=50",
        f"/api/evaluations?variant_hash={v}&limit=100",
        f"/api/evaluations/{e}",
        f"/api/variants/{v}",
        "/api/decisions",
        "/api/leaderboard",
        f"/api/charts/{c}",
        "/api/plans",
        "/api/agent",
        f"/variants/{info['llm_variant']}",
        f"/agent?campaign={c}",
        f"/agent/calls/{info['call']}",
        "/api/agent/calls?limit=1000",
        f"/api/agent/calls/{info['call']}",
        "/optimize",
        f"/optimize/{info['optimize_run']}",
        "/api/optimize",
        f"/api/optimize/{info['optimize_run']}",
        *(
            [
                f"/campaigns/{info['cpu_campaign']}",
                f"/variants/{info['cpu_variant']}",
                f"/api/campaigns/{info['cpu_campaign']}",
            ]
            if info.get("cpu_campaign")
            else []
        ),
    ]


def time_best_static(url: str, repeats: int) -> Row:
    """``warpforge best rmsnorm --static`` in-process (CliRunner), wall time per call in ms."""
    from typer.testing import CliRunner

    from warpforge.cli import app

    runner, args = CliRunner(), ["best", "rmsnorm", "--static", "--db", url]
    t = time.perf_counter()
    code = runner.invoke(app, args).exit_code
    first = (time.perf_counter() - t) * 1e3
    times, cpus = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        code = runner.invoke(app, args).exit_code
        times.append((time.perf_counter() - t) * 1e3)
        cpus.append((time.process_time() - c) * 1e3)
    return (
        "CLI: warpforge best rmsnorm --static",
        200 if code == 0 else 500,
        statistics.median(times),
        max(times),
        first,
        statistics.median(cpus),
    )


Row = tuple[str, int, float, float, float, float]  # path, status, median, max, first request, CPU ms


def _server_cpu_ms(postmaster: int | None) -> float:
    """CPU time of the PostgreSQL server's processes (postmaster and its backends), from /proc/PID/schedstat."""
    if postmaster is None:
        return 0.0
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)
            if pid == postmaster or int(fields[1]) == postmaster:
                total += int((stat.parent / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e6


def time_routes(url: str, info: dict[str, Any], repeats: int, postmaster: int | None = None) -> list[Row]:
    from fastapi.testclient import TestClient

    from warpforge.dashboard.app import create_app

    client = TestClient(create_app(url))
    out = []
    for path in routes(info):
        # warm-up: first-import costs (plotly path, parallel export) and cold caches are not per request
        first = float(client.get(path).headers.get("server-timing", "dur=0").split("dur=")[1])
        times, cpus = [], []
        status = 0
        for _ in range(repeats):
            c, srv = time.process_time(), _server_cpu_ms(postmaster)
            r = client.get(path)
            cpus.append((time.process_time() - c) * 1e3 + _server_cpu_ms(postmaster) - srv)
            status = r.status_code
            times.append(float(r.headers["server-timing"].split("dur=")[1]))
        out.append((path, status, statistics.median(times), max(times), first, statistics.median(cpus)))
    return out


def _postgres() -> tuple[str, Any, int] | None:
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        return None
    bindir = Path(bins[-1]).parent
    root = Path(tempfile.mkdtemp(prefix="wf-bench-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    as_pg: list[str] = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(
        [*as_pg, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_pg,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            f"-k {sock} -c listen_addresses=127.0.0.1 -p {port} -c fsync=off",
            "-w",
            "-l",
            str(root / "log.txt"),
            "start",
        ],
        check=True,
        capture_output=True,
    )

    def stop() -> None:
        subprocess.run(
            [*as_pg, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)

    pid = int((data / "postmaster.pid").read_text().split()[0])
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", stop, pid


def report(name: str, n: int, fill_s: float, rows: list[Row], load_before: tuple[float, ...]) -> bool:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    before = " / ".join(f"{x:.1f}" for x in load_before)
    print(
        f"\n{name}: {n:,} timed evaluations and as many CPU ones with compile facts only (filled in "
        f"{fill_s:.0f} s); server time per route, ms (the CLI row: wall time, target < {CLI_TARGET_MS:.0f}) "
        f"(load average {before} before timing, {load} after, on {os.cpu_count()} CPUs)"
    )
    print(f"{'route':70} {'status':>6} {'median':>8} {'max':>8} {'first':>8} {'CPU':>8}  target < {TARGET_MS:.0f}")
    ok = True
    for path, status, med, worst, first, cpu in rows:
        # Judged on the median: the max carries the shared machine's noise (other jobs on 2 cores).
        target = CLI_TARGET_MS if path.startswith("CLI:") else TARGET_MS
        flag = "ok" if status == 200 and med < target else "SLOW" if status == 200 else "ERROR"
        ok &= flag == "ok"
        print(f"{path[:70]:70} {status:>6} {med:>8.1f} {worst:>8.1f} {first:>8.1f} {cpu:>8.1f}  {flag}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluations", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    args = ap.parse_args()
    import logging

    logging.getLogger("warpforge").setLevel(logging.WARNING)
    all_ok = True
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_sqlite:
            url = f"sqlite:///{tmp}/bench.db"
            t = time.monotonic()
            info = fill(url, args.evaluations, cpu=args.evaluations)
            fill_s, load = time.monotonic() - t, os.getloadavg()
            rows = [*time_routes(url, info, args.repeats), time_best_static(url, args.repeats)]
            all_ok &= report("SQLite", args.evaluations, fill_s, rows, load)
    pg = None if args.no_postgres else _postgres()
    if pg is not None:
        url, stop, postmaster = pg
        try:
            t = time.monotonic()
            info = fill(url, args.evaluations, cpu=args.evaluations)
            fill_s, load = time.monotonic() - t, os.getloadavg()
            rows = [*time_routes(url, info, args.repeats, postmaster), time_best_static(url, args.repeats)]
            all_ok &= report("PostgreSQL 15", args.evaluations, fill_s, rows, load)
        finally:
            stop()
    elif not args.no_postgres:
        print("\nPostgreSQL: server binaries not found, not measured")
    print("\nall routes under target" if all_ok else "\nSOME ROUTES MISSED THE TARGET")
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
