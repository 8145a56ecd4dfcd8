"""Plans stored in and read back from the results database (SQLite)."""

from __future__ import annotations

from pathlib import Path

from warpforge.db.queries import Reader
from warpforge.parallel import PlanConfig, load_cluster, load_model, predict
from warpforge.parallel.search import search_plans
from warpforge.parallel.store import store_predictions, store_search


def test_store_search_and_prediction(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plans.db'}"
    m, c = load_model("llama3-8b"), load_cluster("dgx-a100")
    res = search_plans(m, c, top=3, enqueue=[PlanConfig(tp=2, dp=4, recompute="full")])
    n = store_search(url, m, c, res, limit=10)
    top10 = {p.plan.key() for p in res.feasible_predictions[:10]}
    assert n == 10 + (res.enqueued[0].plan.key() not in top10)  # the enqueued plan is stored exactly once
    pred = predict(m, c, PlanConfig(tp=4, dp=2))
    assert store_predictions(url, m, c, [(pred, "predict", ["why"])]) == 1
    rows = Reader(url).plans(model="llama3-8b", cluster="dgx-a100", limit=100).items  # the read layer's plans
    assert len(rows) == n + 1 and {r.nodes for r in rows} == {1}
    assert rows[0].step_time_s == min(r.step_time_s for r in rows if r.step_time_s is not None)
    assert {r.source for r in rows} == {"search", "enqueued", "predict"}
    assert rows[0].plan["tp"] >= 1 and rows[0].fits is True


def test_default_database_is_the_environment_one(_private_db: str) -> None:
    m, c = load_model("llama3-8b"), load_cluster("dgx-a100")
    store_predictions(None, m, c, [(predict(m, c, PlanConfig(dp=8)), "predict", [])])
    assert Reader(_private_db).plans().total == 1
