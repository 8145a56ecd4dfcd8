"""Agent test fixtures: a scripted OpenAI-compatible server on 127.0.0.1 (real HTTP, real openai client)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pytest

from warpforge.agent.scripted import Reply, ScriptedServer


@pytest.fixture
def scripted() -> Iterator[Callable[..., ScriptedServer]]:
    """``scripted([Reply(...), ...])`` starts a server answering in that order; stopped after the test."""
    servers: list[ScriptedServer] = []

    def start(script: Sequence[Reply], default: Reply | None = None) -> ScriptedServer:
        server = ScriptedServer(script, default).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()
