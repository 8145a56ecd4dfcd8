"""Which LLM endpoints the agent may call, from the environment or a YAML file (never the key itself).

Environment (one model): ``WARPFORGE_LLM_MODEL`` (required), ``WARPFORGE_LLM_BASE_URL`` (default: OpenAI),
``OPENAI_API_KEY``. A config file (``WARPFORGE_LLM_CONFIG`` or the proposer's ``llm_config``) lists several
models; each names the *environment variable* that holds its key, so the file can be committed::

    models:
      - name: local-qwen                # label in transcripts and the benchmark
        model: Qwen/Qwen3-32B           # id the server expects
        base_url: http://127.0.0.1:8000/v1
        api_key_env: VLLM_API_KEY       # optional; local servers take any key
        token_param: max_tokens         # or max_completion_tokens (OpenAI reasoning models reject max_tokens)
        max_tokens: 8192
        temperature: 0.6
        price_in: 0.0                   # USD per million prompt tokens
        price_out: 0.0                  # USD per million completion tokens
        weight: 1.0                     # share of calls when several models are listed
        structured_output: false        # opt-in, never guessed from the model's name
    agent:                              # optional defaults for the llm proposer (evolution.AgentSettings)
      max_calls: 16
      max_cost_usd: 2.0
    plan_agent:                         # optional defaults for plan search --proposer llm (plans.PlanAgentSettings)
      max_calls: 6
      plans_per_call: 4

Example::

    >>> cfg = load_llm_config(env={"WARPFORGE_LLM_MODEL": "gpt-5-mini", "OPENAI_API_KEY": "sk-..."})
    >>> cfg.models[0].model
    'gpt-5-mini'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from warpforge import keys
from warpforge.errors import UsageError

HOW_TO_CONFIGURE = (
    "no LLM configured: set WARPFORGE_LLM_MODEL (plus WARPFORGE_LLM_BASE_URL for a non-OpenAI "
    "server and OPENAI_API_KEY where it needs a key) or WARPFORGE_LLM_CONFIG=models.yaml; "
    "see docs/agent.md"
)


class LLMConfigError(UsageError):
    """The LLM configuration is missing or malformed; the message says what to set."""


class ModelConfig(BaseModel):
    """One endpoint+model. Frozen: a run's settings cannot drift mid-campaign."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = ""
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    token_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    max_tokens: int = Field(default=8192, gt=0)
    temperature: float | None = 0.7  # None: not sent (some reasoning models accept only their default)
    top_p: float | None = None
    price_in: float = Field(default=0.0, ge=0)  # USD per million prompt tokens
    price_out: float = Field(default=0.0, ge=0)  # USD per million completion tokens
    weight: float = Field(default=1.0, gt=0)
    timeout_s: float = Field(default=300.0, gt=0)  # per attempt; the client's own timeout
    max_retries: int = Field(default=2, ge=0)  # the client's own retries (429, 5xx, connection errors)
    structured_output: bool = False  # ask for a JSON {rationale, source} answer (response_format json_schema)
    extra_body: dict[str, Any] = Field(default_factory=dict)  # server-specific knobs (e.g. vLLM's top_k)

    @property
    def label(self) -> str:
        return self.name or self.model

    def api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        return (env if env is not None else keys.environ()).get(self.api_key_env) or None

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.price_in + completion_tokens * self.price_out) / 1e6

    def public(self) -> dict[str, Any]:
        """What may be stored and shown: everything but secrets (the key never is in the config)."""
        return self.model_dump(mode="json")


class LLMConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    models: tuple[ModelConfig, ...] = Field(min_length=1)
    agent: dict[str, Any] = Field(default_factory=dict)  # defaults for the llm proposer (budgets, in_flight, ...)
    plan_agent: dict[str, Any] = Field(default_factory=dict)  # defaults for plan search --proposer llm (plans.py)


def _from_file(path: Path) -> LLMConfig:
    if not path.is_file():
        raise LLMConfigError(f"LLM config file {path} does not exist; see docs/agent.md for its format")
    try:
        data = yaml.safe_load(path.read_text()) or {}
        return LLMConfig.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        first = str(exc).strip().splitlines()
        raise LLMConfigError(
            f"LLM config file {path} is malformed ({'; '.join(first[:3])}); see docs/agent.md for its format"
        ) from None


def load_llm_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> LLMConfig:
    """The configured models: ``path``, else $WARPFORGE_LLM_CONFIG, else the WARPFORGE_LLM_* variables.

    Raises LLMConfigError (one line saying what to set) when nothing is configured.
    """
    if env is None:  # the process's own: keys move out of os.environ into warpforge.keys
        config = load_llm_config(path, keys.environ())
        keys.hold([m.api_key_env for m in config.models])
        return config
    file = path or env.get("WARPFORGE_LLM_CONFIG")
    if file:
        return _from_file(Path(file))
    model = env.get("WARPFORGE_LLM_MODEL")
    if not model:
        raise LLMConfigError(HOW_TO_CONFIGURE)
    base_url = env.get("WARPFORGE_LLM_BASE_URL") or None
    if base_url is None and not env.get("OPENAI_API_KEY"):
        raise LLMConfigError(
            "WARPFORGE_LLM_MODEL is set but neither WARPFORGE_LLM_BASE_URL nor OPENAI_API_KEY: "
            "set OPENAI_API_KEY for OpenAI, or WARPFORGE_LLM_BASE_URL for a local server"
        )
    return LLMConfig(models=(ModelConfig(name=model, model=model, base_url=base_url),))


def llm_configured(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("WARPFORGE_LLM_CONFIG") or env.get("WARPFORGE_LLM_MODEL"))
