"""Provider keys held in this process's memory, never in its environment.

A process that runs candidate code must not carry API keys in its environment: an unsandboxed candidate reads
``/proc/<ppid>/environ``, and a symlinked stderr can carry the orchestrator's own environment into a stored
verdict. :func:`hold` moves every key-like variable (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ...) out of
``os.environ`` into a private dict and overwrites it in the environment block the kernel shows as
``/proc/self/environ`` (``unsetenv`` alone leaves that block untouched); :func:`get` and :func:`environ` are how
the LLM client finds a key afterwards. The evaluator's child pool holds keys when it starts, and the LLM
configuration when it is read.

Example::

    >>> import os
    >>> os.environ["DEMO_API_KEY"] = "sk-demo-123456789"
    >>> hold()
    ['DEMO_API_KEY']
    >>> "DEMO_API_KEY" in os.environ, get("DEMO_API_KEY")
    (False, 'sk-demo-123456789')
"""

from __future__ import annotations

import ctypes
import os
import re
from collections import ChainMap
from collections.abc import Iterable, Mapping

# Names that hold credentials by convention (OpenAI, Anthropic, Hugging Face, vLLM, cloud SDKs).
# (and any NAME_KEY: the dashboard scrubbed those too; holding one more name costs nothing).
KEY_NAME = re.compile(
    r"[A-Z0-9_]*(API_KEY|APIKEY|_TOKEN|_SECRET|SECRET_KEY|_PASSWORD|ACCESS_KEY)[A-Z0-9_]*"
    r"|[A-Z0-9_]*_KEY"
)
_HELD: dict[str, str] = {}


def is_key_name(name: str) -> bool:
    return KEY_NAME.fullmatch(name.upper()) is not None


def _env_block() -> tuple[int, int]:
    """Start and end address of this process's initial environment block (/proc/self/stat fields 50-51)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[47]), int(fields[48])  # fields 50 and 51, counted from 1, with 1-2 before ")"


def _scrub_block(names: Iterable[str]) -> None:
    """Overwrite ``NAME=value`` entries in the initial environment block with NUL bytes."""
    wanted = {n.encode() for n in names}
    try:
        start, end = _env_block()
        with open("/proc/self/environ", "rb") as f:
            block = f.read()
    except (OSError, ValueError, IndexError):
        return
    if len(block) > end - start:
        return  # not the layout expected: touch nothing
    offset = 0
    for entry in block.split(b"\0"):
        if entry.split(b"=", 1)[0] in wanted:
            ctypes.memset(start + offset, 0, len(entry))
        offset += len(entry) + 1


def hold(names: Iterable[str] | None = None) -> list[str]:
    """Move ``names`` (default: every key-like variable) out of the environment; returns the names moved."""
    chosen = [
        n
        for n in (names if names is not None else list(os.environ))
        if n in os.environ and (names is not None or is_key_name(n))
    ]
    for name in chosen:
        value = os.environ.pop(name)
        if value:
            _HELD[name] = value
    if chosen:
        _scrub_block(chosen)
    return sorted(chosen)


def get(name: str) -> str | None:
    """A key, from the environment (set after it was held: the newer value) or held."""
    return os.environ.get(name) or _HELD.get(name) or None


def environ() -> Mapping[str, str]:
    """The environment as the configuration reads it: ``os.environ``, then the held keys."""
    return ChainMap(os.environ, _HELD)  # type: ignore[arg-type]
