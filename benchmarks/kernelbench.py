"""KernelBench problems through warpforge: per problem, correct or not and why, the built-in task matched, the
shapes checked, speedups where a GPU timed them, LLM tokens and cost per correct kernel, and KernelBench's
tolerance next to warpforge's on the same outputs.

    python benchmarks/kernelbench.py src/warpforge/data/problems/level1 --problems 19_ReLU,23_Softmax  # shipped
    python benchmarks/kernelbench.py ../shared/kernelbench/level1 --problems 23 --proposer llm --json  # the full set

Each problem runs as ``warpforge run PROBLEM.py`` does (a campaign of --trials evaluations): with the
templates proposer a problem is searched only when a built-in task computes the same function
(evaluator/judge/matching.py); the others say what was tried. Speedup vs eager is the campaign's best (the
reference is the problem's own ``Model``); vs torch.compile, ``torch.compile(Model)`` timed on the same
GPU; fast_p (p = 1.0 and 1.2) is the share of problems correct and faster than eager by p. Without a GPU
every timing column says "needs a GPU": the interpreter's wall time is never a measurement.

The tolerance columns take the best ok configuration of a template (shipped code, so it runs here, in the
Triton interpreter without a GPU) on the problem's smallest check shape and compare its output with both
rules (kernels/kernelbench.py ``tolerance_verdicts``); an LLM's kernel runs only in the sandbox, so its
row says "sandboxed only".

Under the table, per level: problems, how many load, run their reference (at a check shape, on the CPU),
match a built-in task, end with a configuration verified ok; and the families that matched.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

NEEDS_GPU = "needs a GPU"


@dataclass
class Row:
    problem: str
    level: str = ""  # the folder it came from (level1, level2, ...)
    loaded: bool = False  # the file imported and its Model was built
    reference_runs: bool = False  # the reference ran on a check shape here
    correct: bool = False
    why: str = ""
    matched: str = "-"
    checked: list[str] = field(default_factory=list)
    input_kinds: list[str] = field(default_factory=list)
    evaluations: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    speedup_eager: float | str | None = NEEDS_GPU
    speedup_compile: float | str | None = NEEDS_GPU
    tokens_per_correct: float | str | None = "-"
    cost_per_correct: float | str | None = "-"
    warpforge_tolerance: str = "-"
    kernelbench_tolerance: str = "-"
    wall_s: float = 0.0


def _pick(level_dir: Path, wanted: str | None) -> list[Path]:
    """The problems of one level's folder, or of every ``level*`` folder under a benchmark root, in order."""
    levels = sorted((d for d in level_dir.glob("level*") if d.is_dir()), key=lambda d: (len(d.name), d.name))
    files = [
        p
        for folder in (levels or [level_dir])
        for p in sorted(
            folder.glob("*.py"), key=lambda p: (int(p.stem.split("_")[0]) if p.stem[0].isdigit() else 0, p.stem)
        )
    ]
    if not wanted:
        return files
    out = []
    for w in wanted.split(","):
        hits = [p for p in files if p.stem == w or p.stem.split("_")[0] == w or p.stem.startswith(w)]
        if not hits:
            raise SystemExit(f"error: no problem {w!r} in {level_dir} (e.g. {files[0].stem if files else 'none'})")
        out.append(hits[0])
    return out


def _kinds(checked: list[str]) -> list[str]:
    kinds = ["random"]
    for label in checked:
        if "(adversarial inputs: " in label:
            kind = label.split("(adversarial inputs: ", 1)[1].split(")", 1)[0]
            if kind not in kinds:
                kinds.append(kind)
    return kinds


def _tolerances(task: Any, variant_path: Path, params: dict[str, Any]) -> tuple[str, str]:
    """Both rules on one output of a shipped template (run here, never an LLM's code)."""
    from warpforge.evaluator.judge.compare import references
    from warpforge.evaluator.judge.tolerances import tolerance_verdicts

    device = "cuda" if torch.cuda.is_available() else "cpu"
    spec = importlib.util.spec_from_file_location(f"wf_kb_{variant_path.stem}", variant_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shape = max(task.check_shapes, key=lambda s: sum(s.values()))
    inputs = task.make_inputs(shape, torch.float32, 1234, device)
    out = module.launch(*inputs, **params)
    ref64, ref = references(task.reference, [x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs], "cpu")
    v = tolerance_verdicts(out.cpu(), ref64[0], ref[0], task)
    word = {True: "pass", False: "fail"}
    return (
        f"{word[v.warpforge]} ({v.warpforge_rule})",
        f"{word[v.kernelbench]} at 1e-4, {word[v.kernelbench_v0]} at 1e-2 (max err {v.max_abs_err:.2g})",
    )


def _compile_speedup(task: Any, best_ms: float | None) -> float | str | None:
    """torch.compile(Model)'s time over the best kernel's, on the benchmark shape (GPU only)."""
    if not torch.cuda.is_available() or best_ms is None:
        return NEEDS_GPU if not torch.cuda.is_available() else None
    inputs = task.make_inputs(task.shapes[0], torch.float32, 0, "cuda")

    def eager(*args: Any) -> Any:
        return task.reference(*args)

    compiled = torch.compile(eager)
    for _ in range(3):
        compiled(*inputs)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(20):
        start.record()
        compiled(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2] / best_ms


def _load_and_run_reference(path: Path, row: Row) -> None:
    """The first two counts of the summary: the file loads as a task, and its reference runs at a check shape."""
    from warpforge.kernels.task import get_task

    try:
        task = get_task(str(path))
    except Exception:  # noqa: BLE001 - a problem that does not load is counted, its reason is in "why"
        return
    row.loaded = True
    try:
        shape = task.check_shapes[0] if task.check_shapes else task.shapes[0]
        inputs = task.make_inputs(shape, torch.float32, 0, "cpu")
        with torch.no_grad():
            task.reference(*inputs)
    except Exception:  # noqa: BLE001 - counted; the campaign's own reason follows in "why"
        return
    row.reference_runs = True


def summaries(rows: list[Row]) -> list[dict[str, Any]]:
    """Per level: problems, how many load, run their reference, match a built-in task, end ok; the families."""
    out = []
    for level in sorted({r.level for r in rows}, key=lambda name: (len(name), name)):
        mine = [r for r in rows if r.level == level]
        families = Counter(r.matched.split(" ")[0].split("[")[0] for r in mine if r.matched != "-")
        out.append(
            {
                "level": level,
                "problems": len(mine),
                "loads": sum(r.loaded for r in mine),
                "reference_runs": sum(r.reference_runs for r in mine),
                "matched": sum(r.matched != "-" for r in mine),
                "ok": sum(r.correct for r in mine),
                "families": dict(families.most_common()),
            }
        )
    return out


def run_problem(path: Path, args: argparse.Namespace, db_url: str) -> Row:
    from warpforge.errors import UsageError
    from warpforge.kernels.kernelbench import NOTES
    from warpforge.kernels.task import get_task
    from warpforge.preflight import check_run
    from warpforge.search.engine.campaign import CampaignSpec, Event, run_campaign

    row = Row(path.stem, path.parent.name)
    started = time.monotonic()
    _load_and_run_reference(path, row)
    proposer = "template" if args.proposer == "templates" else "llm"
    spec = CampaignSpec(
        name=f"kb-{path.stem}-{int(time.time() * 1000)}",
        tasks=[str(path)],
        trials=args.trials,
        proposer=proposer,
        backend=args.backend,
        db_url=db_url,
        top_k=0,
        seed=0,
        proposer_config={"max_calls": args.max_calls, "seed": 0} if proposer == "llm" else {},
    )
    try:
        spec = check_run(spec)
    except UsageError as exc:
        text = str(exc)  # "... (tried a: why; b: why (2 members), so ...": the list ends at the last "), so"
        row.why = "not searched: " + (text.split("(tried ", 1)[1].rsplit("), so", 1)[0] if "(tried " in text else text)
        row.wall_s = time.monotonic() - started
        return row
    except Exception as exc:  # noqa: BLE001 - the problem's own code while matching: its row, not the run's end
        row.why = f"matching failed: {type(exc).__name__}: {str(exc)[:200]}"
        row.wall_s = time.monotonic() - started
        return row
    task = get_task(spec.tasks[0])
    note = NOTES.get(str(task.path), "")
    if "built-in task " in note:
        row.matched = note.split("built-in task ", 1)[1].split(", judged", 1)[0]
    results: list[Event] = []
    try:
        summary = run_campaign(spec, on_event=results.append)
    except Exception as exc:  # noqa: BLE001 - one problem's failure is its row, not the benchmark's end
        row.why = f"campaign failed: {type(exc).__name__}: {exc}"
        row.wall_s = time.monotonic() - started
        return row
    t = summary.tasks[0]
    row.evaluations = t.evaluations
    row.verdicts = dict(Counter(e.result.verdict.value for e in results))
    oks = [e for e in results if e.result.verdict.value == "ok"]
    row.correct = bool(oks)
    if oks:
        checked = oks[0].result.checked
        row.checked = list(dict.fromkeys(label.split(" ", 1)[0] for label in checked))
        row.input_kinds = _kinds(checked)
        row.why = f"{len(oks)}/{len(results)} ok"
    else:
        reasons = Counter(f"{e.result.verdict.value}: {e.result.reason}" for e in results)
        row.why = "; ".join(f"{r} x{n}" for r, n in reasons.most_common(2)) or "nothing evaluated"
    if torch.cuda.is_available():
        row.speedup_eager = t.best_speedup
        row.speedup_compile = _compile_speedup(task, t.best_ms) if oks else None
    if proposer == "llm":
        from sqlalchemy import create_engine, text

        engine = create_engine(db_url)
        with engine.connect() as conn:
            cid = conn.execute(text("select id from wf_campaigns where name = :n"), {"n": spec.name}).scalar()
            usage = conn.execute(
                text(
                    "select coalesce(sum(prompt_tokens + completion_tokens), 0), "
                    "coalesce(sum(cost_usd), 0) from wf_agent_calls where campaign_id = :c"
                ),
                {"c": cid},
            ).one()
        engine.dispose()
        n_ok = len({e.result.variant_hash for e in oks})
        row.tokens_per_correct = usage[0] / n_ok if n_ok else f"{usage[0]} (none correct)"
        row.cost_per_correct = usage[1] / n_ok if n_ok else f"{usage[1]:.4f} (none correct)"
        row.warpforge_tolerance = row.kernelbench_tolerance = "sandboxed only"
    elif oks:
        best = oks[0]
        paths = {Path(f).stem: Path(f) for f in spec.variant_files}
        if best.variant in paths:
            try:
                row.warpforge_tolerance, row.kernelbench_tolerance = _tolerances(
                    task, paths[best.variant], best.result.params
                )
            except Exception as exc:  # noqa: BLE001 - reported, the row stays
                row.warpforge_tolerance = f"could not run here: {type(exc).__name__}"
    row.wall_s = time.monotonic() - started
    return row


class _Answers:
    """The scripted server's script: the answer file whose problem the prompt names (longest name first)."""

    def __init__(self, folder: Path) -> None:
        self.files = {p.stem: p.read_text() for p in sorted(folder.glob("*.py"))}
        self.answered: set[str] = set()

    def __call__(self, body: dict[str, Any]) -> Any:
        from warpforge.agent.scripted import Reply, code_reply

        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        for stem in sorted(self.files, key=len, reverse=True):
            if f"`{stem}`" in prompt or f'"{stem}"' in prompt:
                self.answered.add(stem)
                return code_reply(self.files[stem])
        return Reply(content="I have no kernel for this problem.")


@contextlib.contextmanager
def _scripted_llm(folder: str | None) -> Iterator[_Answers | None]:
    """With --scripted: the scripted server on 127.0.0.1 as the proposer's only model, for the whole run."""
    if folder is None:
        yield None
        return
    import yaml

    from warpforge.agent.scripted import ScriptedServer

    answers = _Answers(Path(folder))
    if not answers.files:
        raise SystemExit(f"error: --scripted {folder}: no answer files (<problem>.py) there")
    server = ScriptedServer(answers).start()
    config = Path(tempfile.mkdtemp(prefix="wf-scripted-")) / "models.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "models": [
                    {
                        "name": "scripted",
                        "model": "scripted",
                        "base_url": server.url,
                        "api_key_env": "WF_SCRIPTED_KEY",
                        "max_retries": 0,
                    }
                ]
            }
        )
    )
    saved = {k: os.environ.get(k) for k in ("WARPFORGE_LLM_CONFIG", "WF_SCRIPTED_KEY")}
    os.environ.update({"WARPFORGE_LLM_CONFIG": str(config), "WF_SCRIPTED_KEY": "sk-scripted"})
    try:
        yield answers
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _progress(done: int, total: int, row: Row) -> None:
    """One line per finished problem on stderr: a long run (a level takes an hour here) shows where it is."""
    verdict = "ok" if row.correct else _short(row.why)
    print(f"[{done}/{total}] {row.level}/{row.problem}: {verdict} ({row.wall_s:.0f} s)", file=sys.stderr, flush=True)


def run_all(problems: list[Path], args: argparse.Namespace, db_url: str) -> list[Row]:
    """Every problem's row, in the problems' order; ``args.jobs`` at a time, each in a forked process (the
    problems share nothing but the database, whose SQLite file takes concurrent writers through WAL and a
    busy timeout)."""
    if args.jobs == 1 or len(problems) < 2:
        rows = []
        for i, path in enumerate(problems, 1):
            rows.append(run_problem(path, args, db_url))
            _progress(i, len(problems), rows[-1])
        return rows
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from warpforge.db.session import Database

    db = Database(db_url)
    db.upgrade()  # once, here: two campaigns migrating a fresh file at once collide on alembic_version
    db.engine.dispose()  # no pooled connection is inherited by the forked children
    # fork, not spawn: this file is run as a script (spawn would re-import it by a name no child can import);
    # nothing here has touched a GPU (--jobs > 1 is refused where one exists)
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {pool.submit(run_problem, path, args, db_url): i for i, path in enumerate(problems)}
        found: dict[int, Row] = {}
        for future in as_completed(futures):
            found[futures[future]] = future.result()
            _progress(len(found), len(problems), found[futures[future]])
    return [found[i] for i in range(len(problems))]


def fast_p(rows: list[Row], p: float) -> float | str:
    if not torch.cuda.is_available():
        return NEEDS_GPU
    good = [r for r in rows if r.correct and isinstance(r.speedup_eager, float) and r.speedup_eager > p]
    return len(good) / len(rows) if rows else 0.0


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}x"
    return "-" if v is None else str(v)


def _short(why: str) -> str:
    """The table's reason: for an unsearched problem, the tasks whose outputs were compared (--json: all)."""
    if not why.startswith("not searched: "):
        return why
    compared = [t.split(":")[0] for t in why.removeprefix("not searched: ").split("; ") if "outputs differ" in t]
    return "no built-in task computes it" + (
        f" (outputs differ: {', '.join(compared)})" if compared else " (none takes its arguments)"
    )


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=80)
    table = Table(
        title=f"KernelBench {Path(args.level_dir).name} ({args.proposer}, {args.backend})",
        show_lines=True,
        caption="details, every shape and the reasons: --json",
    )
    table.add_column("problem", overflow="fold", max_width=16)
    table.add_column("correct: why", overflow="fold", max_width=18)
    table.add_column("checked", overflow="fold", max_width=10)
    table.add_column(
        "vs eager / compile" + (" / tok, $ per ok" if args.proposer == "llm" else ""), overflow="fold", max_width=13
    )
    table.add_column("tolerance: warpforge / KB 1e-4 / KB 1e-2", overflow="fold", max_width=13)
    word = {"pass": "pass", "fail": "FAIL"}
    for r in rows:
        why = f"{'yes' if r.correct else 'no'}: {_short(r.why)}" + (
            f"; as {r.matched.split(' ')[0]}" if r.matched != "-" else ""
        )
        checked = f"{len(r.checked)} shapes, {len(r.input_kinds)} input kinds" if r.checked else "-"
        speed = (
            NEEDS_GPU
            if r.speedup_eager == r.speedup_compile == NEEDS_GPU
            else f"{_fmt(r.speedup_eager)} / {_fmt(r.speedup_compile)}"
        )
        if args.proposer == "llm":  # tokens and dollars per correct kernel, not speedups
            tok, usd = r.tokens_per_correct, r.cost_per_correct
            speed += (
                f" / {tok:.0f} tok, ${usd:.4f}"
                if isinstance(tok, float) and isinstance(usd, float)
                else f" / {tok} tok, ${usd}"
                if tok is not None
                else " / -"
            )
        if r.kernelbench_tolerance.startswith(("pass", "fail")):
            kb = r.kernelbench_tolerance.split(" ")
            tol = f"{word[r.warpforge_tolerance.split(' ')[0]]} / {word[kb[0]]} / {word[kb[3]]}"
        else:
            tol = r.warpforge_tolerance
        table.add_row(r.problem, why, checked, speed, tol)
    console.print(table)
    console.print(
        f"correct {sum(r.correct for r in rows)}/{len(rows)}; fast_1.0 {_fmt(fast_p(rows, 1.0))}, "
        f"fast_1.2 {_fmt(fast_p(rows, 1.2))}; {sum(r.wall_s for r in rows):.0f} s",
        highlight=False,
    )
    summary = Table(title=f"per level ({args.proposer})", caption="ok: a searched configuration verified ok")
    for col in ("level", "problems", "load", "ref runs", "matched", "ok"):
        summary.add_column(col, justify="left" if col == "level" else "right", no_wrap=True)
    summary.add_column("families matched", overflow="fold")
    for level in summaries(rows):
        summary.add_row(
            level["level"],
            *(str(level[k]) for k in ("problems", "loads", "reference_runs", "matched", "ok")),
            ", ".join(f"{name} {n}" for name, n in level["families"].items()) or "-",
        )
    console.print(summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "level_dir",
        help="a folder of KernelBench problems or of level folders, e.g. "
        "src/warpforge/data/problems (shipped) or the full set (`warpforge problems` says where)",
    )
    parser.add_argument("--problems", help="comma-separated problem names or numbers (default: all)")
    parser.add_argument("--proposer", choices=("templates", "llm"), default="templates")
    parser.add_argument("--trials", type=int, default=3, help="evaluations per problem")
    parser.add_argument("--max-calls", type=int, default=4, help="LLM calls per problem (--proposer llm)")
    parser.add_argument("--backend", default="auto", help="auto | cuda | interpret")
    parser.add_argument("--db", help="database URL (default: a fresh SQLite file)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="problems judged at once, each in its own process (CPU only: a GPU times one at a "
        "time; the judge scales its time budgets by the measured load)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--save", help="also write the JSON to this file")
    parser.add_argument(
        "--scripted",
        metavar="DIR",
        help="with --proposer llm: answer from DIR/<problem>.py through the scripted OpenAI-compatible "
        "server on 127.0.0.1 (no model, no network; e.g. benchmarks/kernelbench_answers)",
    )
    args = parser.parse_args(argv)
    if args.scripted and args.proposer != "llm":
        print("error: --scripted answers the LLM proposer: add --proposer llm", file=sys.stderr)
        return 2
    level = Path(args.level_dir)
    if not level.is_dir():
        print(
            f"error: {level} is not a folder of KernelBench problems (`warpforge problems` lists the shipped "
            "ones and says where the full benchmark is)",
            file=sys.stderr,
        )
        return 2
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # one INFO line per study drowned the table
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # the tolerance columns run a template here
    if args.jobs < 1 or (args.jobs > 1 and torch.cuda.is_available()):
        print(
            "error: --jobs must be >= 1, and 1 on a GPU machine (two problems timed on one GPU at once would "
            "time each other)",
            file=sys.stderr,
        )
        return 2
    db_url = args.db or f"sqlite:///{Path(tempfile.mkdtemp(prefix='wf-kernelbench-')) / 'wf.db'}"
    problems = _pick(level, args.problems)
    with _scripted_llm(args.scripted) as server:
        started = time.monotonic()
        rows = run_all(problems, args, db_url)
        elapsed = time.monotonic() - started
    if server is not None:
        for row in rows:  # the server's token counts are characters / 4, not a model's
            row.why += "" if row.problem in server.answered else " (no scripted answer)"
    payload = json.dumps(
        {
            "rows": [asdict(r) for r in rows],
            "levels": summaries(rows),
            "fast_1.0": fast_p(rows, 1.0),
            "fast_1.2": fast_p(rows, 1.2),
            "db": db_url,
            "jobs": args.jobs,
            "elapsed_s": round(elapsed, 1),
        },
        indent=2,
        default=str,
    )
    if args.save:
        Path(args.save).write_text(payload + "\n")
    if args.json:
        print(payload)
    else:
        print_table(rows, args)
        print(f"{len(rows)} problems in {elapsed:.0f} s elapsed ({args.jobs} at a time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
