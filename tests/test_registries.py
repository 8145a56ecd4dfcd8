"""Every registry is complete in a fresh interpreter, whatever was imported first.

Each check runs in its own ``python -c`` so no earlier import in the test session can have filled a registry
by side effect: the process imports only the module that defines the registry (or the one function a user
calls) and looks every built-in member up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def fresh(code: str, **env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()


# registry module, registry name, the built-in members a user can name on the command line
REGISTRIES = [
    ("warpforge.evaluator.run.backend", "BACKENDS", {"interpret", "cuda", "replay"}),
    ("warpforge.agent.proposers", "PROPOSERS", {"template", "llm"}),
    ("warpforge.search.samplers.registry", "SAMPLERS", {"tpe", "random", "wf-default"}),
    ("warpforge.search.engine.allocators", "ALLOCATORS", {"default"}),
]
LIST = (
    "import json, importlib; reg = getattr(importlib.import_module({module!r}), {attr!r}); "
    "print(json.dumps({{n: str(getattr(reg[n], 'name', n)) for n in reg}}))"
)


@pytest.mark.parametrize(("module", "attr", "expected"), REGISTRIES, ids=[r[1].lower() for r in REGISTRIES])
def test_registry_complete_in_a_fresh_interpreter(module: str, attr: str, expected: set[str]) -> None:
    members = json.loads(fresh(LIST.format(module=module, attr=attr))[-1])
    assert expected <= set(members), f"{attr}: {sorted(members)} lacks {sorted(expected - set(members))}"
    if attr in {"BACKENDS", "PROPOSERS"}:  # classes that declare their own name
        assert all(declared == name for name, declared in members.items()), members


def test_backend_and_proposer_lookups_in_fresh_interpreters() -> None:
    pool = (
        "from warpforge.evaluator.run import make_pool; from warpforge.evaluator.run.pool import "
        "PoolConfig; pool = make_pool('interpret', PoolConfig(workers=1, use_ray=False)); "
        "print(type(pool).__name__, pool.backend_name); pool.close()"
    )
    assert fresh(pool)[-1] == "LocalPool interpret"
    # get_proposer('llm') finds the class without agent/evolution.py imported first, and a preflight
    # refuses a proposer no registry holds, naming the ones that exist.
    proposers = (
        "from warpforge.agent.proposers import get_proposer; print(type(get_proposer('llm', {})).__name__)\n"
        "from warpforge.errors import UsageError; from warpforge.preflight import check_run\n"
        "from warpforge.search.engine.campaign import CampaignSpec\n"
        "try:\n    check_run(CampaignSpec(name='c', tasks=['softmax'], proposer='nope'))\n"
        "except UsageError as exc:\n    print('refused:', exc)\nelse:\n    print('accepted')"
    )
    built, refused = fresh(proposers, WARPFORGE_LLM_MODEL="scripted", WARPFORGE_LLM_BASE_URL="http://127.0.0.1:9/v1")
    assert built == "LLMProposer"
    assert refused.startswith("refused: unknown proposer 'nope'") and "llm, template" in refused, refused
