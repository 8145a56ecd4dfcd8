"""``warpforge optimize`` refuses what it cannot take in one line, exit 2, before anything runs."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from warpforge.cli import app


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["optimize", *args])
    return result.exit_code, result.output


def test_a_target_that_is_none_of_the_three_forms(tmp_path: Path) -> None:
    code, text = _run(str(tmp_path / "nothing-here"), "--out", str(tmp_path / "o"))
    assert code == 2
    assert "config.json" in text and "module:function" in text and "Traceback" not in text


def test_a_folder_without_a_config(tmp_path: Path) -> None:
    code, text = _run(str(tmp_path), "--out", str(tmp_path / "o"))
    assert code == 2 and "config.json" in text


def test_a_file_not_in_kernelbench_format(tmp_path: Path) -> None:
    f = tmp_path / "mine.py"
    f.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    code, text = _run(str(f), "--out", str(tmp_path / "o"))
    assert code == 2 and "get_inputs" in text and "get_init_inputs" in text


def test_a_missing_import_is_named_with_its_package(tmp_path: Path) -> None:
    f = tmp_path / "needs.py"
    f.write_text("import wf_missing_pkg_xyz\n")
    code, text = _run(str(f), "--out", str(tmp_path / "o"))
    assert code == 2 and "wf_missing_pkg_xyz" in text and "pip install" in text


def test_an_unknown_gpu_and_dtype(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "import torch\nclass Model(torch.nn.Linear):\n    pass\n"
        "def get_inputs():\n    return [torch.randn(2, 4)]\ndef get_init_inputs():\n    return [4, 4]\n"
    )
    code, text = _run(str(f), "--gpu", "Voodoo5", "--out", str(tmp_path / "o"))
    assert code == 2 and "Voodoo5" in text and "H100" in text
    code, text = _run(str(f), "--dtype", "float13", "--out", str(tmp_path / "o"))
    assert code == 2 and "float13" in text


def test_cluster_needs_a_transformers_target_and_a_known_cluster(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "import torch\nclass Model(torch.nn.Linear):\n    pass\n"
        "def get_inputs():\n    return [torch.randn(2, 4)]\ndef get_init_inputs():\n    return [4, 4]\n"
    )
    env = {"WARPFORGE_DB": f"sqlite:///{tmp_path / 'wf.db'}"}
    result = CliRunner().invoke(
        app, ["optimize", str(f), "--cluster", "dgx-h100", "--out", str(tmp_path / "o")], env=env
    )
    assert result.exit_code == 2 and "transformers config" in result.output and "kernelbench" in result.output
    from transformers import Qwen3Config

    Qwen3Config(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        vocab_size=512,
    ).save_pretrained(tmp_path / "q")
    result = CliRunner().invoke(
        app, ["optimize", str(tmp_path / "q"), "--cluster", "dgx-nope", "--out", str(tmp_path / "o")], env=env
    )
    assert result.exit_code == 2 and "dgx-nope" in result.output and "dgx-h100" in result.output, result.output
    assert "Traceback" not in result.output
