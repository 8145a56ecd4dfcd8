"""``warpforge plan``: predict one plan, search for the best plans, export a plan.

Mounted by the main CLI as ``app.add_typer(plan_app, name="plan")``. Every command takes ``--json``
(one JSON document on stdout); errors go through the CLI's one boundary (cli/boundary.py): one line on
stderr, exit code 2 (bad input: ``SpecError``) or 1 (failure: ``NoFeasiblePlanError``, a database error).

Example::

    $ warpforge plan predict --model llama3-70b --cluster dgx-h100 --tp 8 --pp 4 --dp 2 --json
    $ warpforge plan search --model llama3-70b --cluster dgx-h100 --nodes 8 --json
    $ warpforge plan search --model llama3-70b --cluster dgx-h100 --nodes 8 --proposer llm   # docs/agent.md
    $ warpforge plan export --model llama3-70b --cluster dgx-h100 --tp 8 --pp 4 --dp 2 --format megatron
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import typer
from pydantic import ValidationError

from warpforge.parallel.errors import SpecError
from warpforge.parallel.export import export_plan
from warpforge.parallel.frameworks import framework_for_plan
from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig, load_cluster, load_model, one_line

app = typer.Typer(
    help="Parallelism planner: simulate a training plan, search the fastest plans that fit, export them.",
    no_args_is_help=True,
)


class RecomputeOpt(str, Enum):
    none = "none"
    selective = "selective"
    full = "full"


class ExportFmt(str, Enum):
    megatron = "megatron"
    torchtitan = "torchtitan"
    deepspeed = "deepspeed"


class PrecisionOpt(str, Enum):
    bf16 = "bf16"
    fp8 = "fp8"


class FrameworkOpt(str, Enum):
    any = "any"
    megatron = "megatron"
    torchtitan = "torchtitan"
    deepspeed = "deepspeed"


class ProposerOpt(str, Enum):
    search = "search"
    llm = "llm"


class Method(str, Enum):
    auto = "auto"
    exhaustive = "exhaustive"
    optuna = "optuna"


MODEL = typer.Option(..., "--model", "-m", help="Model preset (e.g. llama3-70b) or YAML/JSON spec file.")
CLUSTER = typer.Option(..., "--cluster", "-c", help="Cluster preset (e.g. dgx-h100) or YAML/JSON spec file.")
NODES = typer.Option(None, "--nodes", "-n", help="Nodes (default: the spec's, or what the plan needs).")
GB = typer.Option(None, "--global-batch", help="Global batch in sequences (default: model's, ~4M tokens).")
SEQ = typer.Option(None, "--seq", help="Override the model's sequence length.")
JSON_OUT = typer.Option(False, "--json", help="Print one JSON document on stdout.")
PRECISION = typer.Option(
    PrecisionOpt.bf16, "--precision", help="GEMM precision of the linear layers: bf16, or fp8 (Transformer Engine)."
)
ETP = typer.Option(None, "--expert-tp", help="Expert TP (MoE; default = --tp; 1 folds EP over TP ranks).")
LOAD = typer.Option(1.0, "--moe-load-factor", help="Busiest expert rank's tokens / balanced share (>= 1).")
TPO = typer.Option(False, "--tp-overlap", help="Overlap TP communication with GEMMs (TE userbuffers).")


def _load(model: str, cluster: str, nodes: int | None, seq: int | None) -> tuple[ModelSpec, ClusterSpec]:
    if nodes is not None and nodes < 1:
        raise SpecError(f"--nodes must be at least 1, got {nodes}")
    return load_model(model, seq=seq), load_cluster(cluster, nodes=nodes)


def _plan_from_opts(
    model: ModelSpec, cluster: ClusterSpec, nodes: int | None, opts: dict[str, Any]
) -> tuple[PlanConfig, ClusterSpec]:
    """Build the plan; without --nodes, size the cluster to the plan (DP fills it when --dp is omitted)."""
    tp, pp, cp = opts["tp"], opts["pp"], opts["cp"]
    dp = opts.pop("dp")
    if dp is None:
        dp = max(1, cluster.total_gpus // (tp * pp * cp))
    try:
        plan = PlanConfig(dp=dp, **opts)
    except ValidationError as exc:
        raise SpecError(f"invalid plan: {one_line(exc)}") from None
    if nodes is None and plan.gpus > cluster.total_gpus:
        cluster = cluster.model_copy(update={"nodes": -(-plan.gpus // cluster.gpus_per_node)})
    return plan, cluster


@app.command()
def predict(
    model: str = MODEL,
    cluster: str = CLUSTER,
    nodes: int | None = NODES,
    tp: int = typer.Option(1, "--tp", min=1, help="Tensor-parallel size."),
    pp: int = typer.Option(1, "--pp", min=1, help="Pipeline-parallel size."),
    dp: int | None = typer.Option(None, "--dp", help="Data-parallel size (default: fill the cluster)."),
    cp: int = typer.Option(1, "--cp", min=1, help="Context-parallel size."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel size (MoE; carved out of DP x CP)."),
    micro_batch: int | None = typer.Option(
        None,
        "--micro-batch",
        help="Micro-batch size in sequences (not given: 1, and the prediction shows the range over 1/2/4/8).",
    ),
    global_batch: int | None = GB,
    seq: int | None = SEQ,
    recompute: RecomputeOpt | None = typer.Option(
        None, "--recompute", help="none, selective or full (not given: selective, with the range over all three)."
    ),
    zero: int = typer.Option(1, "--zero", help="0 none, 1 distributed optimizer, 2 +grads, 3 +weights."),
    interleave: int | None = typer.Option(
        None,
        "--interleave",
        help="Model chunks per pipeline rank (not given: 1, plain 1F1B, with the range over the valid counts).",
    ),
    no_sp: bool = typer.Option(False, "--no-sp", help="Disable sequence parallelism."),
    no_flash: bool = typer.Option(False, "--no-flash", help="Unfused attention instead of FlashAttention."),
    no_overlap: bool = typer.Option(False, "--no-overlap", help="Do not overlap gradient reduction."),
    precision: PrecisionOpt = PRECISION,
    expert_tp: int | None = ETP,
    moe_load_factor: float = LOAD,
    tp_overlap: bool = TPO,
    pp_first_layers: int | None = typer.Option(
        None, "--pp-first-layers", help="Layers on the first pipeline stage (uneven stages)."
    ),
    pp_last_layers: int | None = typer.Option(
        None, "--pp-last-layers", help="Layers on the last pipeline stage (uneven stages)."
    ),
    export: ExportFmt | None = typer.Option(
        None, "--export", metavar="FORMAT", help="Also export it: megatron, torchtitan or deepspeed."
    ),
    framework: FrameworkOpt = typer.Option(
        FrameworkOpt.megatron,
        "--framework",
        metavar="NAME",
        help="Whose memory accounting: megatron, torchtitan or deepspeed.",
    ),
    compiled: bool = typer.Option(False, "--compile", help="torch.compile per block (torchtitan)."),
    db: str | None = typer.Option(None, "--db", help="Store the prediction in this database URL."),
    json_out: bool = JSON_OUT,
) -> None:
    """Predict step time, MFU and peak memory of one plan."""
    from warpforge.cli.plan_render import print_prediction
    from warpforge.parallel.defaults import DEFAULTS, spread
    from warpforge.parallel.simulator import predict as simulate

    if db:  # a URL that names no database (bad scheme, unparseable) stops before anything runs: exit 2
        from warpforge.db.session import Database

        Database(db, create_dirs=False)
    m, c = _load(model, cluster, nodes, seq)
    sized_from = c.nodes
    given = {"micro_batch": micro_batch, "recompute": recompute.value if recompute else None, "interleave": interleave}
    unsaid = [k for k, v in given.items() if v is None]
    taken = {k: DEFAULTS[k][0] if v is None else v for k, v in given.items()}
    plan, c = _plan_from_opts(
        m,
        c,
        nodes,
        dict(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            ep=ep,
            global_batch=global_batch,
            **taken,
            zero=zero,
            sequence_parallel=not no_sp,
            flash_attention=not no_flash,
            overlap_grad_reduce=not no_overlap,
            precision=precision.value,
            expert_tp=expert_tp,
            moe_load_factor=moe_load_factor,
            overlap_tp_comm=tp_overlap,
            pp_first_layers=pp_first_layers,
            pp_last_layers=pp_last_layers,
            framework=framework_for_plan(framework.value),
            compiled=compiled,
        ),
    )
    pred = simulate(m, c, plan)
    if nodes is None and c.nodes != sized_from:
        pred = pred.model_copy(
            update={"notes": [*pred.notes, f"cluster sized to {c.nodes} nodes for the plan's {plan.gpus} GPUs"]}
        )
    uncertain = spread(m, c, plan, unsaid)
    said = [a.line() for a in uncertain.assumed] + ([uncertain.line()] if uncertain.plans else [])
    pred = pred.model_copy(update={"notes": [*said, *pred.notes]})
    ex = export_plan(m, plan, export.value) if export else None
    stored, store_error = 0, None
    if db:
        from warpforge.db.session import DatabaseError
        from warpforge.parallel.store import store_predictions

        try:  # a prediction that cannot be stored is still printed; the failure is said after it
            stored = store_predictions(db, m, c, [(pred, "predict", [])])
        except DatabaseError as exc:
            store_error = exc
    if json_out:
        doc: dict[str, Any] = {
            **pred.summary(),
            "hfu": pred.hfu,
            **uncertain.as_json(),
            "prediction": pred.model_dump(mode="json"),
        }
        if ex:
            doc["export"] = ex.model_dump()
        if db:
            doc["stored"] = stored
            doc["store_error"] = str(store_error) if store_error is not None else None
        print(json.dumps(doc, indent=2))
    else:
        print_prediction(pred, ex, c.gpus_per_node)
    if store_error is not None:  # same class, so the same exit code (a URL naming no database: 2)
        raise type(store_error)(f"the prediction above was not stored: {store_error}")


@app.command()
def search(
    model: str = MODEL,
    cluster: str = CLUSTER,
    nodes: int | None = NODES,
    global_batch: int | None = GB,
    seq: int | None = SEQ,
    trials: int = typer.Option(400, "--trials", help="Optuna trials when the space is too big to enumerate."),
    top: int = typer.Option(5, "--top", help="How many plans to show."),
    method: Method = typer.Option(
        Method.auto,
        "--method",
        metavar="METHOD",
        help="auto (exhaustive up to 20k candidates, else optuna), exhaustive or optuna.",
    ),
    memory_margin: float = typer.Option(0.05, "--memory-margin", help="Fraction of HBM kept free."),
    enqueue: list[str] = typer.Option([], "--enqueue", help='A plan to evaluate too, as JSON: {"tp":8}.'),
    seed: int = typer.Option(0, "--seed"),
    db: str | None = typer.Option(None, "--db", help="Database URL (default: WARPFORGE_DB, then SQLite)."),
    no_store: bool = typer.Option(False, "--no-store", help="Do not write the plans to the database."),
    export: ExportFmt | None = typer.Option(
        None, "--export", metavar="FORMAT", help="Also export the best plan: megatron, torchtitan or deepspeed."
    ),
    precision: PrecisionOpt = PRECISION,
    framework: FrameworkOpt = typer.Option(
        FrameworkOpt.any,
        "--framework",
        metavar="NAME",
        help="Keep only plans this framework runs: megatron, torchtitan, deepspeed, or any (all modelled).",
    ),
    proposer: ProposerOpt = typer.Option(
        ProposerOpt.search,
        "--proposer",
        help="search: the search alone; llm: an LLM proposes plans too (docs/agent.md).",
    ),
    campaign: str | None = typer.Option(None, "--campaign", help="--proposer llm: campaign name for its calls."),
    llm_replay: str | None = typer.Option(
        None,
        "--llm-replay",
        metavar="CAMPAIGN",
        help="--proposer llm: answer from CAMPAIGN's stored calls (no network).",
    ),
    max_calls: int | None = typer.Option(None, "--max-calls", help="--proposer llm: LLM call budget."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="--proposer llm: token budget."),
    max_cost: float | None = typer.Option(None, "--max-cost", help="--proposer llm: budget in USD."),
    max_rounds: int | None = typer.Option(None, "--max-rounds", help="--proposer llm: rounds of proposals."),
    json_out: bool = JSON_OUT,
) -> None:
    """Search the fastest plans that fit in memory, and say why they win."""
    from warpforge.cli.plan_render import print_search
    from warpforge.parallel.search import search_plans

    m, c = _load(model, cluster, nodes, seq)
    if top < 1 or trials < 1:
        raise SpecError("--top and --trials must be at least 1")
    if proposer is ProposerOpt.llm or llm_replay is not None:
        from warpforge.cli.plan_agent import llm_plan_search, search_options

        if proposer is not ProposerOpt.llm or no_store or enqueue or export:
            raise SpecError(
                "--llm-replay needs --proposer llm"
                if proposer is not ProposerOpt.llm
                else "--proposer llm stores its calls and plans: drop --no-store, --enqueue and --export"
            )
        opts = search_options(
            global_batch=global_batch,
            trials=trials,
            top=top,
            method=method.value,
            memory_margin=memory_margin,
            seed=seed,
            precision=precision.value,
            framework=framework.value,
        )
        llm_plan_search(
            m,
            c,
            opts,
            db_url=db,
            campaign=campaign,
            replay=llm_replay,
            json_out=json_out,
            overrides={
                "max_calls": max_calls,
                "max_tokens": max_tokens,
                "max_cost_usd": max_cost,
                "max_rounds": max_rounds,
            },
        )
        return
    proposals = []
    for text in enqueue:
        try:
            proposals.append(PlanConfig(**json.loads(text)))
        except ValidationError as exc:
            raise SpecError(f"bad --enqueue plan {text!r}: {one_line(exc)}") from None
        except (json.JSONDecodeError, TypeError) as exc:
            raise SpecError(f"bad --enqueue plan {text!r}: {str(exc).splitlines()[0]}") from None
    res = search_plans(
        m,
        c,
        global_batch=global_batch,
        trials=trials,
        top=top,
        enqueue=proposals,
        method=method.value,  # type: ignore[arg-type]
        memory_margin=memory_margin,
        seed=seed,
        precision=precision.value,  # type: ignore[arg-type]
        framework=framework.value,
    )
    stored, where = 0, None
    if not no_store:
        from warpforge.db.session import Database
        from warpforge.parallel.store import store_search

        stored = store_search(db, m, c, res)
        where = Database(db, create_dirs=False).safe_url
    fmt_ = export.value if export else (framework.value if framework.value != "any" else None)
    ex = export_plan(m, res.plans[0].prediction.plan, fmt_) if fmt_ else None
    if json_out:
        doc = res.to_json()
        doc["db"] = {"url": where, "stored": stored}
        if ex:
            doc["export"] = ex.model_dump()
        print(json.dumps(doc, indent=2))
    else:
        print_search(res, ex, where, stored)


@app.command("export")
def export_cmd(
    model: str = MODEL,
    cluster: str = CLUSTER,
    nodes: int | None = NODES,
    fmt: ExportFmt = typer.Option(..., "--format", "-f", metavar="FORMAT", help="megatron, torchtitan or deepspeed."),
    tp: int = typer.Option(1, "--tp", min=1),
    pp: int = typer.Option(1, "--pp", min=1),
    dp: int | None = typer.Option(None, "--dp"),
    cp: int = typer.Option(1, "--cp", min=1),
    ep: int = typer.Option(1, "--ep"),
    micro_batch: int = typer.Option(1, "--micro-batch"),
    global_batch: int | None = GB,
    seq: int | None = SEQ,
    recompute: RecomputeOpt = typer.Option(RecomputeOpt.selective, "--recompute"),
    zero: int = typer.Option(1, "--zero"),
    interleave: int = typer.Option(1, "--interleave"),
    precision: PrecisionOpt = PRECISION,
    expert_tp: int | None = ETP,
    json_out: bool = JSON_OUT,
) -> None:
    """Print a plan as Megatron-LM arguments, a torchtitan TOML section or a DeepSpeed config (checked
    like predict, and against what that framework runs)."""
    from warpforge.parallel.simulator import check_plan

    m, c = _load(model, cluster, nodes, seq)
    plan, c = _plan_from_opts(
        m,
        c,
        nodes,
        dict(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            ep=ep,
            micro_batch=micro_batch,
            global_batch=global_batch,
            recompute=recompute.value,
            zero=zero,
            interleave=interleave,
            precision=precision.value,
            expert_tp=expert_tp,
        ),
    )
    check_plan(m, c, plan)
    ex = export_plan(m, plan, fmt.value)
    if json_out:
        print(json.dumps({"plan": plan.model_dump(), **ex.model_dump()}, indent=2))
    else:
        typer.echo(ex.text)
        for note in ex.notes:
            typer.echo(f"# note: {note}", err=True)
