"""Dashboard fixtures: a seeded database (fast, API tests), a database filled by real campaigns (browser
tests, once per session), a live server on a free port, and Debian's chromium for pytest-playwright."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # fill.py / seed.py beside this file

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import seed

    url = f"sqlite:///{tmp_path_factory.mktemp('seeded') / 'wf.db'}"
    return {"url": url, **seed.seed(url)}


@pytest.fixture(scope="session")
def client(seeded: dict[str, Any]) -> Any:
    from fastapi.testclient import TestClient

    from warpforge.dashboard.app import create_app

    return TestClient(create_app(seeded["url"]))


@pytest.fixture(scope="session")
def campaign_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Real campaigns: softmax on replay (synthetic recordings, labelled) and on the CPU interpreter, an LLM
    agent campaign against the scripted server (~35 s), plus plans."""
    import fill

    work = tmp_path_factory.mktemp("campaigns")
    url = f"sqlite:///{work / 'wf.db'}"
    fill.replay_campaign(url, work)
    fill.interpret_campaign(url)
    fill.agent_campaign(url, work)
    fill.store_plans(url)
    return url


class _Server:
    def __init__(self, app: Any) -> None:
        import uvicorn

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("dashboard server did not start in 30 s")
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def serve() -> Any:
    """Serve an app on a free loopback port for a ``with`` block: ``with serve(app) as url: ...``.

    A fixture rather than an import: ``from conftest import ...`` picks whichever conftest module pytest
    imported first under that name (tests/parallel has one too), so it broke when the whole suite ran.
    """
    return _Server


@pytest.fixture(scope="session")
def live_url(campaign_db: str) -> Iterator[str]:
    from warpforge.dashboard.app import create_app

    with _Server(create_app(campaign_db)) as url:
        yield url


@pytest.fixture(scope="session")
def browser_type_launch_args() -> dict[str, Any]:
    """pytest-playwright launches Debian's chromium (never a downloaded browser)."""
    if not Path(CHROMIUM).is_file() or shutil.which("chromium") is None:
        msg = "Debian's chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("WARPFORGE_REQUIRE_BROWSER"):
            pytest.fail(msg)  # CI (.ci/run) installs it: a missing browser there is a failure, not a skip
        pytest.skip(msg)
    return {"executable_path": CHROMIUM, "headless": True, "args": CHROMIUM_ARGS}
