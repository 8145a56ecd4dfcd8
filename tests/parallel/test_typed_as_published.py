"""The validation types each published row from the page's own words: every setting a page states is the
plan's, and nothing the page does not state is typed in (torchtitan's cluster gives only the power limit)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from warpforge.parallel.nemo import NemoCase, nemo_cases
from warpforge.parallel.torchtitan_runs import _raw, load_runs


def _cell(r: dict[str, str], k: str, default: int) -> int:
    return int(float(r[k])) if r[k].strip() else default


def _stated(c: NemoCase, r: dict[str, str]) -> bool:
    """Whether case ``c`` carries every setting row ``r`` of the page states."""
    pp, vp = _cell(r, "pp", 1), _cell(r, "vp", 1)
    p = c.plan
    ok = (p.tp, p.pp, p.cp, p.micro_batch, p.global_batch, p.gpus, c.model.seq) == (
        _cell(r, "tp", 1),
        pp,
        _cell(r, "cp", 1),
        _cell(r, "mbs", 1),
        _cell(r, "gbs", 0),
        _cell(r, "gpus", 0),
        _cell(r, "seq", 0),
    )
    ok &= p.interleave == (vp if vp > 1 and pp > 1 else 1)
    ok &= not r["ep"].strip() or p.ep == _cell(r, "ep", 1)
    ok &= _cell(r, "fsdp", 0) == 0 or p.zero == 3
    label = r["precision"].upper()
    ok &= not label or (p.precision == "fp8") == label.startswith("FP8")
    return ok


def test_nemo_rows_are_typed_with_the_pages_settings(shared_parallel: Path) -> None:
    path = shared_parallel / "nemo_h100_pretrain.csv"
    if not path.is_file():
        pytest.skip(f"NeMo H100 tables not found in {shared_parallel}")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    by_label: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by_label.setdefault(f"{r['release']} {r['model_key']} {r['precision'] or '?'} {r['gpus']}g", []).append(r)
    cases, _ = nemo_cases(shared_parallel)
    assert len(cases) >= 40
    for c in cases:
        assert any(_stated(c, r) for r in by_label[c.label]), f"{c.label}: {c.plan.short()} is not the page's row"


def test_torchtitan_runs_are_typed_with_the_pages_settings() -> None:
    """The page (benchmarks/llama3_h100_202412_torchtitan.md): 'H100 SXM ... 96GB HBM2e ... 500W power
    limit', 8 GPUs per host, 400 Gb/s per GPU; a TDP is not on the page, so the cluster has none."""
    cluster = _raw()["cluster"]
    assert cluster["power_limit_w"] == 500 and "tdp_w" not in cluster
    assert cluster["gpus_per_node"] == 8 and cluster["inter_gbps"] == 50 and cluster["hbm_tbps"] == 2.4
    for run in load_runs():
        p = run.plan
        assert p.gpus == {"t1": 8, "t2": 8, "t3": 128, "t4": 256, "t5": 512, "t6": 512}[run.id[:2]]
        assert run.cluster.compute_scale() == pytest.approx((500 / 700) ** 0.30)  # the SXM part's 700 W
        assert p.framework == "torchtitan" and p.zero == 3
