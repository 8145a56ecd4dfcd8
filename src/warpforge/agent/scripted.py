"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for tests, CI and offline demos.

It speaks real HTTP (``POST /v1/chat/completions``, ``GET /v1/models``), so the agent is exercised through
the real ``openai`` client with its own retries and timeouts, never a mock of the client. Each request
takes the next scripted :class:`Reply` (or asks ``script(request)`` when the script is a function): good
variants, broken code, prose, truncated answers, reasoning fields, slow answers, 429/503 errors.

Example::

    >>> with ScriptedServer([Reply(content="```python\\nTASK = 'double'\\n...```")]) as server:  # doctest: +SKIP
    ...     client = AsyncOpenAI(base_url=server.url, api_key="sk-test")
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``status`` != 200 answers an error body instead (429, 503, ...)."""

    content: str = ""
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"  # vLLM/SGLang/DeepSeek; "reasoning" for others
    finish_reason: str = "stop"
    status: int = 200
    delay_s: float = 0.0
    prompt_tokens: int | None = None  # default: request characters / 4
    completion_tokens: int | None = None  # default: answer characters / 4


@dataclass
class ScriptedServer:
    """Answers with ``script`` in arrival order; ``default`` once the list is used up (else a 500)."""

    script: Sequence[Reply] | Callable[[dict[str, Any]], Reply]
    default: Reply | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)  # bodies received, in order
    auth_headers: list[str] = field(default_factory=list)
    max_concurrent: int = 0  # most requests being answered at once (proposals in flight)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._active = 0
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _reply_for(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if callable(self.script):
                return self.script(body)
            if self._next < len(self.script):
                self._next += 1
                return self.script[self._next - 1]
        return self.default or Reply(status=500, content="script exhausted")

    def start(self) -> ScriptedServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.auth_headers.append(self.headers.get("Authorization", ""))
                reply = server._reply_for(body)
                with server._lock:
                    server._active += 1
                    server.max_concurrent = max(server.max_concurrent, server._active)
                try:
                    self._answer(reply, body)
                finally:
                    with server._lock:
                        server._active -= 1

            def _answer(self, reply: Reply, body: dict[str, Any]) -> None:
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status != 200:
                    # retry-after-ms keeps the client's own backoff short in tests (it honours the header).
                    self._send(
                        reply.status,
                        {
                            "error": {
                                "message": reply.content or "scripted error",
                                "type": "scripted",
                                "code": reply.status,
                            }
                        },
                        {"retry-after-ms": "20"},
                    )
                    return
                message: dict[str, Any] = {"role": "assistant", "content": reply.content}
                if reply.reasoning is not None:
                    message[reply.reasoning_field] = reply.reasoning
                prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
                usage_in = reply.prompt_tokens if reply.prompt_tokens is not None else prompt_chars // 4
                out_chars = len(reply.content) + len(reply.reasoning or "")
                usage_out = reply.completion_tokens if reply.completion_tokens is not None else out_chars // 4
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "scripted"),
                        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
                        "usage": {
                            "prompt_tokens": usage_in,
                            "completion_tokens": usage_out,
                            "total_tokens": usage_in + usage_out,
                        },
                    },
                )

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True  # a slow scripted answer never blocks shutdown
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def code_reply(source: str, prose: str = "Here is the variant.", **kw: Any) -> Reply:
    """A well-formed answer: a rationale line and the source in one python fence."""
    return Reply(content=f"{prose}\n\n```python\n{source.strip()}\n```\n", **kw)


def _reply_from_arg(arg: str) -> Reply:
    kind, _, value = arg.partition(":")
    if kind == "code":
        from pathlib import Path

        return code_reply(Path(value).read_text())
    if kind == "truncated":
        return Reply(content="```python\n" + value, finish_reason="length")
    if kind == "status":
        return Reply(status=int(value))
    if kind == "prose":
        return Reply(content=value)
    raise SystemExit(f"--reply {arg!r}: use code:PATH, prose:TEXT, truncated:TEXT or status:CODE")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m warpforge.agent.scripted --reply code:a.py --reply prose:hi``: serve until interrupted."""
    import argparse

    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible server on 127.0.0.1 (offline demos).")
    parser.add_argument(
        "--reply",
        action="append",
        default=[],
        help="code:PATH | prose:TEXT | truncated:TEXT | status:CODE, answered in order",
    )
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer (a model's latency)")
    args = parser.parse_args(argv)
    server = ScriptedServer([replace(_reply_from_arg(a), delay_s=args.delay) for a in args.reply]).start()
    print(f"export WARPFORGE_LLM_BASE_URL={server.url} WARPFORGE_LLM_MODEL=scripted", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
