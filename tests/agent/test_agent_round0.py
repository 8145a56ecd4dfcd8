"""A first-round LLM variant that cannot be prepared (here: its constraints() rule out every configuration) is
recorded and skipped; the campaign goes on with the other one (it used to end the campaign: a KernelBench task
has no templates, so its first variants all come from the model)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from agent_helpers import KEY

from warpforge.agent.scripted import ScriptedServer, code_reply
from warpforge.search.engine.campaign import CampaignSpec, run_campaign

ANSWERS = Path(__file__).parent / "answers"
TASK = Path(__file__).parent / "task_double_small.py"  # no templates: round 0 asks the model
GOOD = (ANSWERS / "double_good_v2.py").read_text()
NO_CONFIG = GOOD + "\n\ndef constraints(params, shape):\n    return False\n"


@pytest.mark.slow
def test_a_round0_variant_that_fails_preparation_does_not_end_the_campaign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedServer([code_reply(NO_CONFIG), code_reply(GOOD)]) as server:
        config = tmp_path / "models.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "models": [
                        {
                            "name": "scripted",
                            "model": "coder",
                            "base_url": server.url,
                            "api_key_env": "WF_TEST_KEY",
                            "max_retries": 0,
                        }
                    ]
                }
            )
        )
        monkeypatch.setenv("WARPFORGE_LLM_CONFIG", str(config))
        monkeypatch.setenv("WF_TEST_KEY", KEY)
        spec = CampaignSpec(
            name="round0",
            tasks=[str(TASK)],
            trials=2,
            proposer="llm",
            backend="interpret",
            proposer_config={"in_flight": 2, "max_calls": 2, "seed": 0},
            sampler="random",
            seed=0,
            db_url=f"sqlite:///{tmp_path / 'wf.db'}",
            top_k=0,
            seeds=1,
        )
        summary = run_campaign(spec)
    assert len(server.requests) == 2
    (task,) = summary.tasks
    assert task.evaluations == 2  # both trials ran, on the one variant that could be prepared
    notes = " ".join(task.notes)
    assert "1 proposed variant(s) skipped" in notes and "satisfies constraints()" in notes
    # The key was read once and held out of the environment (warpforge/keys.py: a candidate reading
    # /proc/<pid>/environ finds none); it stays usable for the next campaign of this process.
    from warpforge import keys

    assert os.environ.get("WF_TEST_KEY") is None and keys.get("WF_TEST_KEY") == KEY
