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
- ``agent_campaign``: a real ``--proposer llm`` campaign (interpreter backend, the agent tests' tiny ``double``
  task) against the scripted OpenAI-compatible server over real HTTP and the real openai client: a good
  answer (accepted, tuned), prose that echoes the API key and a script payload (no_code), its re-ask
  answered with wrong values (accepted, then ``incorrect``); stopped by its 3-call budget.
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
AGENT_CAMPAIGN = "double-agent"
AGENT_KEY = "sk-dash-browser-4b1d9e0c7a2f6e85"  # the scripted model echoes it; no page may show it
AGENT_PAYLOAD = '<img src=x onerror="document.body.dataset.pwned=1">'
AGENT_TESTS = Path(__file__).parents[1] / "agent"


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
    from warpforge.evaluator.run.recorded_spaces import write_cache
    from warpforge.evaluator.run.recordings import recording_path
    from warpforge.kernels.task import get_task
    from warpforge.kernels.taskdef import dtype_name

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
                write_cache(
                    path,
                    GPU,
                    "softmax",
                    {
                        "shape": shape,
                        "dtype": dtype_name(dt),
                        "reference_ms": [ref * 0.99, ref, ref * 1.02],
                        "recorded_at": "synthetic test fixture",
                    },
                    v.space,
                    records,
                )  # type: ignore[attr-defined]


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
        store.ensure_variant(
            s,
            child,
            "llm",
            proposer="llm",
            parents=(parent.source_hash,),
            proposal_id="fixture-1",
            rationale=XSS_RATIONALE,
        )
    db.engine.dispose()


def replay_campaign(url: str, work: Path, trials: int = 24) -> None:
    from warpforge.kernels.variant import builtin_variants, load_variant
    from warpforge.search.engine.campaign import CampaignSpec, run_campaign

    xss = xss_variant_file(work)
    rec = work / "recordings"
    record_synthetic(rec, [*builtin_variants("softmax"), load_variant(xss)])
    plant_lineage(url, xss)
    old = os.environ.get("WARPFORGE_RECORDINGS")
    os.environ["WARPFORGE_RECORDINGS"] = str(rec)
    try:
        run_campaign(
            CampaignSpec(
                name=REPLAY_CAMPAIGN,
                tasks=["softmax"],
                trials=trials,
                backend="replay",
                db_url=url,
                seed=7,
                variant_files=[str(xss)],
            )
        )
    finally:
        if old is None:
            os.environ.pop("WARPFORGE_RECORDINGS", None)
        else:
            os.environ["WARPFORGE_RECORDINGS"] = old


def interpret_campaign(url: str, trials: int = 4) -> None:
    from warpforge.search.engine.campaign import CampaignSpec, run_campaign

    run_campaign(
        CampaignSpec(name=INTERPRET_CAMPAIGN, tasks=["softmax"], trials=trials, backend="interpret", db_url=url, seed=1)
    )


def store_plans(url: str) -> None:
    from warpforge.parallel import load_cluster, load_model
    from warpforge.parallel.search import search_plans
    from warpforge.parallel.store import store_search

    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100")
    store_search(url, model, cluster, search_plans(model, cluster, trials=60, top=5), limit=6)


def agent_campaign(url: str, work: Path, trials: int = 6) -> None:
    import yaml

    from warpforge.agent.scripted import Reply, ScriptedServer, code_reply
    from warpforge.search.engine.campaign import CampaignSpec, run_campaign

    good = (AGENT_TESTS / "answers" / "double_good_v2.py").read_text()
    wrong = (AGENT_TESTS / "answers" / "double_wrong.py").read_text()
    script = [
        code_reply(good, prompt_tokens=1000, completion_tokens=200),
        Reply(
            content=f"I would use a bigger block. {AGENT_PAYLOAD} (my key is {AGENT_KEY})",
            reasoning=f"the key {AGENT_KEY} is in my context",
            prompt_tokens=1200,
            completion_tokens=40,
        ),
        code_reply(wrong, prompt_tokens=1500, completion_tokens=180),
    ]
    server = ScriptedServer(script).start()
    config = work / "models.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "models": [
                    {
                        "name": "scripted",
                        "model": "scripted-coder",
                        "base_url": server.url,
                        "api_key_env": "WF_DASH_KEY",
                        "max_retries": 0,
                        "price_in": 2.0,
                        "price_out": 8.0,
                    }
                ]
            }
        )
    )
    saved = {k: os.environ.get(k) for k in ("WARPFORGE_LLM_CONFIG", "WF_DASH_KEY")}
    os.environ.update({"WARPFORGE_LLM_CONFIG": str(config), "WF_DASH_KEY": AGENT_KEY})
    try:
        run_campaign(
            CampaignSpec(
                name=AGENT_CAMPAIGN,
                tasks=[str(AGENT_TESTS / "task_double_small.py")],
                trials=trials,
                proposer="llm",
                proposer_config={"in_flight": 1, "max_calls": 3, "seed": 0},
                backend="interpret",
                sampler="random",
                seed=0,
                db_url=url,
                top_k=0,
                seeds=1,
            )
        )
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
