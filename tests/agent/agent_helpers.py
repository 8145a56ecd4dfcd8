"""Shared constants and builders for the agent tests (imported by name; pytest puts this folder on the path)."""

from __future__ import annotations

from pathlib import Path

from warpforge.agent.config import LLMConfig, ModelConfig
from warpforge.agent.scripted import ScriptedServer

ROOT = Path(__file__).parents[2]
PLANTED = ROOT / "tests" / "evaluator" / "planted"
DOUBLE_TASK = PLANTED / "task_double.py"
GOOD_DOUBLE = (PLANTED / "good.py").read_text()
KEY = "sk-test-warpforge-0123456789abcdef"


def model_for(server: ScriptedServer, **kw: object) -> ModelConfig:
    base = {
        "name": "scripted",
        "model": "scripted-coder",
        "base_url": server.url,
        "api_key_env": "WF_TEST_KEY",
        "timeout_s": 10.0,
        "max_retries": 2,
    }
    return ModelConfig.model_validate({**base, **kw})


def config_for(server: ScriptedServer, **kw: object) -> LLMConfig:
    return LLMConfig(models=(model_for(server, **kw),))
