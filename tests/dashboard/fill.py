"""Fill a test database the way users do: real campaigns through the campaign API, and stored plans.

- ``replay_campaign``: softmax through the ``replay`` backend on recordings written here for the shipped
  templates. No recording of a warpforge template exists (``recordings/`` is not shipped and
  ../shared/spaces holds other kernels' spaces), so the times are SYNTHETIC, derived from the H100's
  speed-of-light bound times a per-configuration factor of 1.3-5x, and the GPU is named
  "Synthetic H100 (test fixture)" on every page so no one mistakes them for measurements.
- an injected variant: a copy of the ``online`` template whose file name, source and rationale carry
  script-injection payloads, stored with the template as its parent (what a proposer would store), then
  searched by the replay campaign like any variant.
- ``interpret_campaign``: a real CPU campaign (Triton interpreter: correctness only, no times).
- ``store_plans``: a real planner search (llama3-8b on dgx-h100) stored through parallel/store.py.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

GPU = "Synthetic H100 (test fixture)"
XSS_NAME = "<img src=x onerror=alert(1)>"
XSS_SOURCE_LINE = '# </pre><script>alert("xss")</script><img src=x onerror=alert(2)>'
XSS_RATIONALE = '<script>document.body.dataset.pwned = "1"</script> rationale with <b>markup</b>'
REPLAY_CAMPAIGN = 'softmax-replay <i>"demo"</i>'  # a name with markup: rendered inert, routed verbatim
INTERPRET_CAMPAIGN = "softmax-cpu"


def xss_variant_file(folder: Path) -> Path:
    from warpforge.kernels.variant import TEMPLATES_DIR

    source = (TEMPLATES_DIR / "softmax" / "online.py").read_text()
    path = folder / f"{XSS_NAME}.py"
    path.write_text(source.rstrip("\n") + "\n\n" + XSS_SOURCE_LINE + "\n")
    return path


def _factor(variant: str, params: dict[str, object], dtype: str) -> float:
    digest = hashlib.sha256(f"{variant}{sorted(params.items())}{dtype}".encode()).digest()
    return 1.3 + 3.7 * digest[0] / 255.0


def record_synthetic(root: Path, variants: list[object]) -> None:
    """Synthetic recordings (clearly labelled) for every configuration of ``variants`` on softmax."""
    from warpforge.evaluator.gpus import peaks_for
    from warpforge.evaluator.kt_cache import write_cache
    from warpforge.evaluator.replay import recording_path
    from warpforge.kernels.task import dtype_name, get_task

    task = get_task("softmax")
    peaks = peaks_for(GPU)
    assert peaks is not None, "the fixture GPU name must match an H100 row of gpus.json"
    for v in variants:
        names = list(v.space)  # type: ignore[attr-defined]
        configs = [dict(zip(names, vals)) for vals in itertools.product(*(v.space[n] for n in names))]  # type: ignore[attr-defined]
        for dt in task.dtypes:
            for shape in task.shapes:
                sol = peaks.sol_ms(task.flops(shape, dt), task.bytes_moved(shape, dt), dt)
                records = []
                for p in configs:
                    t = sol * _factor(v.name, p, dtype_name(dt))  # type: ignore[attr-defined]
                    records.append((p, t, [t * 0.98, t, t * 1.03]))
                ref = sol * 4.0
                path = recording_path(root, GPU, task.name, v.name, v.source_hash, dtype_name(dt), shape)  # type: ignore[attr-defined]
                write_cache(path, GPU, "softmax", {"shape": shape, "dtype": dtype_name(dt),
                                                   "reference_ms": [ref * 0.99, ref, ref * 1.02],
                                                   "recorded_at": "synthetic test fixture"}, v.space, records)  # type: ignore[attr-defined]


def plant_lineage(url: str, variant_file: Path) -> None:
    """Store the injected variant with the ``online`` template as its parent, as a proposer would."""
    from warpforge.db import store
    from warpforge.db.session import Database
    from warpforge.kernels.variant import builtin_variants, load_variant

    parent = next(v for v in builtin_variants("softmax") if v.name == "online")
    child = load_variant(variant_file)
    db = Database(url)
    db.upgrade()
    with db.session() as s:
        store.ensure_variant(s, parent)
        store.ensure_variant(s, child, "llm", proposer="llm", parents=(parent.source_hash,),
                             proposal_id="fixture-1", rationale=XSS_RATIONALE)
    db.engine.dispose()


def replay_campaign(url: str, work: Path, trials: int = 24) -> None:
    from warpforge.kernels.variant import builtin_variants, load_variant
    from warpforge.search.campaign import CampaignSpec, run_campaign

    xss = xss_variant_file(work)
    rec = work / "recordings"
    record_synthetic(rec, [*builtin_variants("softmax"), load_variant(xss)])
    plant_lineage(url, xss)
    old = os.environ.get("WARPFORGE_RECORDINGS")
    os.environ["WARPFORGE_RECORDINGS"] = str(rec)
    try:
        run_campaign(CampaignSpec(name=REPLAY_CAMPAIGN, tasks=["softmax"], trials=trials, backend="replay",
                                  db_url=url, seed=7, variant_files=[str(xss)]))
    finally:
        if old is None:
            os.environ.pop("WARPFORGE_RECORDINGS", None)
        else:
            os.environ["WARPFORGE_RECORDINGS"] = old


def interpret_campaign(url: str, trials: int = 4) -> None:
    from warpforge.search.campaign import CampaignSpec, run_campaign

    run_campaign(CampaignSpec(name=INTERPRET_CAMPAIGN, tasks=["softmax"], trials=trials, backend="interpret",
                              db_url=url, seed=1))


def store_plans(url: str) -> None:
    from warpforge.parallel import load_cluster, load_model
    from warpforge.parallel.search import search_plans
    from warpforge.parallel.store import store_search

    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100")
    store_search(url, model, cluster, search_plans(model, cluster, trials=60, top=5), limit=6)
