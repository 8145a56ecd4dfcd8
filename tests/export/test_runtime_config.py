"""The config lookup the exported package runs (export/runtime/_config.py; copied into every package)."""

from __future__ import annotations

import warnings

import pytest
import torch

from warpforge.export.runtime import _config
from warpforge.export.runtime._config import ConfigTable, shape_of

SMALL, LARGE = {"M": 1024, "N": 1024}, {"M": 8192, "N": 8192}
P_SMALL, P_LARGE, GENERAL = {"w": 1}, {"w": 2}, {"w": 8}


def _table() -> ConfigTable:
    h100 = {
        "gpu": "NVIDIA H100",
        "general": GENERAL,
        "shapes": [
            {"shape": SMALL, "dtype": "float16", "params": P_SMALL},
            {"shape": LARGE, "dtype": "float16", "params": P_LARGE},
            {"shape": LARGE, "dtype": "float32", "params": {"w": 3}},
        ],
    }
    a100 = {"gpu": "NVIDIA A100", "general": {"w": 4}, "shapes": []}
    return ConfigTable("op", [a100, h100], primary="NVIDIA H100")


def test_nearest_shape_in_log_space() -> None:
    t = _table()
    # log distance to SMALL: |ln(2000/1024)| ~ 0.67 (N equal-ish); to LARGE: sqrt(1.41^2 + 2.10^2) ~ 2.5
    assert t.select({"M": 2000, "N": 1000}, "float16", "NVIDIA H100") == P_SMALL
    # 4096 is 2 octaves from 1024 and 1 from 8192
    assert t.select({"M": 4096, "N": 4096}, "float16", "NVIDIA H100") == P_LARGE
    # same dtype first: float32 has only the LARGE entry
    assert t.select(SMALL, "float32", "NVIDIA H100") == {"w": 3}
    # GPU names match case-insensitively
    assert t.select(SMALL, "float16", "nvidia h100") == P_SMALL


def test_constraints_skip_to_the_next_shape_then_general_then_none() -> None:
    # (a table caches per shape: an op's constraints never change, so each case gets its own table)
    assert _table().select(SMALL, "float16", "NVIDIA H100", lambda p, s: p != P_SMALL) == P_LARGE
    assert _table().select(SMALL, "float16", "NVIDIA H100", lambda p, s: p == GENERAL) == GENERAL
    with pytest.warns(RuntimeWarning, match="no verified configuration fits"):
        assert _table().select({"M": 3, "N": 3}, "float16", "NVIDIA H100", lambda p, s: False) is None


def test_unknown_gpu_uses_the_primary_general_config_with_one_warning() -> None:
    t = _table()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert t.select(SMALL, "float16", "AMD MI300X") == GENERAL
        assert t.select(LARGE, "float16", "AMD MI300X") == GENERAL
    assert len([w for w in caught if "no tuned configurations for AMD MI300X" in str(w.message)]) == 1
    # a GPU with a table but no shapes: its own general configuration
    assert t.select(SMALL, "float16", "NVIDIA A100") == {"w": 4}
    # the CPU (the interpreter) looks up the primary GPU's table
    assert t.select(SMALL, "float16", None) == P_SMALL


def test_shape_of_folds_leading_dims() -> None:
    dims = {"M": (0, 0, 2), "N": (0, 1, 2)}
    assert shape_of((torch.empty(6, 5), torch.empty(5)), dims) == {"M": 6, "N": 5}
    assert shape_of((torch.empty(2, 3, 5), torch.empty(5)), dims) == {"M": 6, "N": 5}


def test_fresh_clones_only_aliasing_outputs() -> None:
    x = torch.ones(3)
    assert _config.fresh(x, (x,)).data_ptr() != x.data_ptr()
    y = torch.zeros(3)
    assert _config.fresh(y, (x,)) is y


def test_an_untimed_table_does_not_warn_per_gpu() -> None:
    t = ConfigTable("op", [{"gpu": "untimed", "timing_source": "untimed", "general": GENERAL, "shapes": []}])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert t.select(SMALL, "float16", "NVIDIA H200") == GENERAL
    assert caught == []
