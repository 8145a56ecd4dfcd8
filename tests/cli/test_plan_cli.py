"""``warpforge plan`` through Typer's CliRunner: JSON fields, Rich tables, exit codes, DB storage."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from warpforge.cli.plan import app

runner = CliRunner()
PREDICT = ["predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--tp", "8", "--pp", "4", "--dp", "2"]


def test_predict_json_fields() -> None:
    res = runner.invoke(app, [*PREDICT, "--json"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    for key in ("step_time_s", "mfu", "peak_mem_gb", "fits", "tokens_per_s", "hfu", "prediction"):
        assert key in doc
    assert doc["fits"] is True and 0 < doc["mfu"] < 1 and doc["step_time_s"] > 0
    assert doc["prediction"]["plan"]["tp"] == 8 and doc["prediction"]["gpus"] == 64
    assert any("sized to 8 nodes" in n for n in doc["prediction"]["notes"])
    assert set(doc["prediction"]["time"]) >= {"compute", "tp_comm", "bubble", "dp_comm"}


def test_predict_all_options_and_export() -> None:
    args = [
        "predict",
        "--model",
        "mixtral-8x7b",
        "--cluster",
        "h100",
        "--nodes",
        "4",
        "--tp",
        "2",
        "--pp",
        "2",
        "--dp",
        "8",
        "--ep",
        "4",
        "--cp",
        "1",
        "--micro-batch",
        "1",
        "--global-batch",
        "256",
        "--recompute",
        "full",
        "--zero",
        "1",
        "--interleave",
        "2",
        "--export",
        "megatron",
        "--json",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert "--expert-model-parallel-size 4" in doc["export"]["text"]
    assert "--num-layers-per-virtual-pipeline-stage 8" in doc["export"]["args"]


def test_predict_rich_tables() -> None:
    res = runner.invoke(app, PREDICT)
    assert res.exit_code == 0
    assert "time per step" in res.stdout and "TP comm" in res.stdout and "fits" in res.stdout


def test_search_json_and_stored(tmp_path: Path) -> None:
    # No wall-clock assertion (the machine is shared): the search's own timings are in the JSON.
    url = f"sqlite:///{tmp_path / 'plans.db'}"
    res = runner.invoke(
        app,
        [
            "search",
            "--model",
            "llama3-70b",
            "--cluster",
            "dgx-h100",
            "--nodes",
            "8",
            "--db",
            url,
            "--json",
            "--enqueue",
            '{"tp": 8, "pp": 4, "dp": 2}',
        ],
    )
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["elapsed_s"] > 0 and doc["cpu_s"] > 0
    assert doc["gpus"] == 64 and doc["plans"] and all(p["prediction"]["fits"] for p in doc["plans"])
    assert doc["plans"][0]["why"] and doc["db"]["stored"] > 0
    assert doc["enqueued"][0]["status"] == "ranked"
    with create_engine(url).connect() as conn:
        rows = conn.execute(text("SELECT source, count(*) FROM wf_plans GROUP BY source")).all()
    counts = dict(rows)  # type: ignore[arg-type]
    assert counts["search"] + counts.get("enqueued", 0) == doc["db"]["stored"] and counts["enqueued"] == 1


def test_search_rich_table_and_export() -> None:
    res = runner.invoke(
        app,
        [
            "search",
            "--model",
            "llama3-8b",
            "--cluster",
            "dgx-a100",
            "--top",
            "2",
            "--no-store",
            "--export",
            "torchtitan",
        ],
    )
    assert res.exit_code == 0, res.stderr
    assert "best plans for llama3-8b" in res.stdout and "[parallelism]" in res.stdout


def test_export_command() -> None:
    res = runner.invoke(
        app,
        [
            "export",
            "--model",
            "llama3-70b",
            "--cluster",
            "dgx-h100",
            "--tp",
            "8",
            "--pp",
            "4",
            "--dp",
            "2",
            "--format",
            "megatron",
        ],
    )
    assert res.exit_code == 0
    assert res.stdout.startswith("--num-layers 80") and "--tensor-model-parallel-size 8" in res.stdout


def _one_line_error(res: object, code: int, fragment: str) -> None:
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)  # type: ignore[attr-defined]
    err = res.stderr.strip()  # type: ignore[attr-defined]
    assert err.startswith("error: ") and fragment in err and "\n" not in err and "Traceback" not in err


def test_heads_not_divisible_by_tp() -> None:
    res = runner.invoke(app, ["predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--tp", "3"])
    _one_line_error(res, 2, "heads 64 not divisible by TP 3")


def test_model_that_fits_nowhere() -> None:
    res = runner.invoke(app, ["search", "--model", "llama3-405b", "--cluster", "dgx-a100", "--no-store"])
    _one_line_error(res, 1, "no plan of llama3-405b fits")


def test_cluster_with_zero_gpus(tmp_path: Path) -> None:
    spec = tmp_path / "empty.yaml"
    spec.write_text("gpu: X\ngpus_per_node: 0\npeak_tflops: 1\nhbm_gb: 1\nhbm_tbps: 1\nintra_gbps: 1\ninter_gbps: 1\n")
    res = runner.invoke(app, ["search", "--model", "llama3-8b", "--cluster", str(spec), "--no-store"])
    _one_line_error(res, 2, "0 GPUs")
    res = runner.invoke(app, [*PREDICT, "--nodes", "0"])
    _one_line_error(res, 2, "--nodes must be at least 1")


def test_other_bad_inputs() -> None:
    nope = runner.invoke(app, ["predict", "--model", "nope", "--cluster", "h100"])
    _one_line_error(nope, 2, "unknown model")
    _one_line_error(runner.invoke(app, [*PREDICT, "--zero", "7"]), 2, "zero")
    _one_line_error(
        runner.invoke(app, ["search", "--model", "llama3-8b", "--cluster", "h100", "--no-store", "--enqueue", "{oops"]),
        2,
        "bad --enqueue plan",
    )
    # A URL that names no database is a usage error, checked before the prediction runs (README "Exit codes").
    _one_line_error(runner.invoke(app, [*PREDICT, "--db", "nosuchdialect://x"]), 2, "error")
    assert runner.invoke(app, []).exit_code == 2  # no_args_is_help: the help, and "asked wrongly" (nothing ran)


def test_precision_and_error_band_on_cli() -> None:
    res = runner.invoke(app, [*PREDICT, "--precision", "fp8", "--tp-overlap", "--json"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["prediction"]["plan"]["precision"] == "fp8"
    assert doc["error_band"]["key"] == "h100/fp8/dense" and doc["error_band"]["validated"] is True
    screen = runner.invoke(app, ["predict", "--model", "llama3-8b", "--cluster", "dgx-h200", "--dp", "8"])
    assert screen.exit_code == 0 and "not validated" in screen.stdout
    bad = runner.invoke(app, ["predict", "--model", "llama3-8b", "--cluster", "dgx-a100", "--precision", "fp8"])
    assert bad.exit_code == 2 and "no FP8" in bad.stderr


def test_search_for_deepspeed_exports_its_config() -> None:
    res = runner.invoke(
        app,
        [
            "search",
            "--model",
            "llama3-8b",
            "--cluster",
            "dgx-h100",
            "--nodes",
            "2",
            "--global-batch",
            "64",
            "--framework",
            "deepspeed",
            "--no-store",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["framework"] == "deepspeed" and doc["export"]["format"] == "deepspeed"
    assert json.loads(doc["export"]["text"])["train_batch_size"] == 64
    assert all(p["prediction"]["plan"]["cp"] == 1 for p in doc["plans"])


def test_predict_framework_memory_and_fit_verdict() -> None:
    """--framework changes whose memory is counted; the verdict and its band are in --json and the table."""
    args = [
        "predict",
        "--model",
        "llama3-8b",
        "--cluster",
        "dgx-h100",
        "--dp",
        "8",
        "--micro-batch",
        "2",
        "--global-batch",
        "16",
        "--zero",
        "3",
    ]
    docs = {}
    for fw in ("megatron", "torchtitan"):
        res = runner.invoke(app, [*args, "--framework", fw, "--json"])
        assert res.exit_code == 0, res.stderr
        docs[fw] = json.loads(res.stdout)
    assert docs["torchtitan"]["prediction"]["plan"]["framework"] == "torchtitan"
    assert docs["torchtitan"]["peak_mem_gb"] < docs["megatron"]["peak_mem_gb"]  # no bf16 weight + fp32 grad copies
    assert docs["torchtitan"]["fits_verdict"] in ("yes", "no", "uncertain")
    assert 0 < docs["torchtitan"]["memory_band"] < 0.5
    res = runner.invoke(app, [*args, "--framework", "torchtitan", "--compile"])
    assert res.exit_code == 0 and "fits" in res.stdout and "±" in res.stdout
    bad = runner.invoke(app, [*args[:-2], "--zero", "1", "--framework", "torchtitan"])
    assert bad.exit_code == 2 and "use --zero 3" in bad.stderr and "Traceback" not in bad.output
