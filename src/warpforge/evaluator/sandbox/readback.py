"""What the trusted side reads back from a child's scratch directory: regular files only, never more than a cap.

Everything in a scratch directory was writable by the candidate, so a name the harness chose (``stderr.txt``,
``out_0.pt``) may be anything by the time it is read: a symlink to ``/proc/self/environ`` (the orchestrator's
own environment, keys included, would land in a stored verdict), a FIFO (``open`` blocks forever), a device
node, a hard link to another file, or gigabytes. Each read here opens without following links and without
blocking, checks on the open descriptor (fstat, so nothing can be swapped in between) that it is a regular file
with a single link, and reads at most ``cap`` bytes, from the end for tails.

Example::

    >>> from pathlib import Path
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); (d / "f").write_bytes(b"x" * 10)
    10
    >>> tail_text(d / "f", 4)
    'xxxx'
    >>> (d / "l").symlink_to("/proc/self/environ"); tail_text(d / "l", 100)
    '[l is a symbolic link: refused, not read]'
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

# O_NOFOLLOW: a symlink fails with ELOOP; O_NONBLOCK: a FIFO opens at once (and is then refused by fstat).
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


# The largest output file the trusted side reads: a saved case holds its outputs and post-call inputs, and
# the largest benchmark shape's output is 256 MB (an 8192^2 fp32 matrix; 4096^3 bf16 matmul: 32 MB) with 64 MB
# of inputs, saved twice at most. Anything larger is refused, never loaded.
OUTPUT_CAP = 1 << 30


class NotReadable(OSError):
    """The path is not a plain file of the child's own, or is larger than the caller allows."""


def open_regular(path: Path) -> int:
    """A read-only descriptor on ``path``, only if it is a regular file with one link (else NotReadable)."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        why = "a symbolic link" if exc.errno == errno.ELOOP else f"not openable ({exc.strerror})"
        raise NotReadable(f"{path.name} is {why}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(st.st_mode) else f"a file with {st.st_nlink} links"
        raise NotReadable(f"{path.name} is {what}")
    return fd


def _read_upto(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_regular(path: Path, cap: int) -> bytes:
    """The whole file, refused (NotReadable) when it is not a regular file or holds more than ``cap`` bytes."""
    fd = open_regular(path)
    try:
        if os.fstat(fd).st_size > cap:
            raise NotReadable(f"{path.name} holds {os.fstat(fd).st_size} bytes, over the {cap}-byte cap")
        data = _read_upto(fd, cap + 1)  # st_size may lie (a file still growing): never read past the cap
        if len(data) > cap:
            raise NotReadable(f"{path.name} grew past the {cap}-byte cap while it was read")
        return data
    finally:
        os.close(fd)


def tail_bytes(path: Path, cap: int) -> bytes:
    """The last ``cap`` bytes of a regular file (NotReadable otherwise); a 3 GiB file costs ``cap`` bytes."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - cap), os.SEEK_SET)
        return _read_upto(fd, cap)
    finally:
        os.close(fd)


def tail_text(path: Path, cap: int = 2000) -> str:
    """A tail for messages: '' when the file is missing, a note (never the content) when it is refused."""
    try:
        return tail_bytes(path, cap).decode(errors="replace")
    except FileNotFoundError:
        return ""
    except NotReadable as exc:
        return f"[{exc}: refused, not read]"


def load_saved(data: bytes) -> dict[str, Any] | None:
    """A saved case as the harness writes it (child/check.py, child/bench.py): a dict whose ``out`` is a list of
    plain tensors and whose ``inputs_after``, when there, is a list of tensors and scalars; None for anything
    else. The bytes are the candidate's process's: torch.load's own failures (not a zip, a refused pickle
    global, a truncated record) are None too, never an exception in the judge.

    Example::

        >>> load_saved(b"not a torch file") is None
        True
    """
    import io

    import torch  # lazy: readback's other readers (stderr tails) need no torch

    try:
        obj = torch.load(io.BytesIO(data), weights_only=True)
    except Exception:  # noqa: BLE001 - pickle, zip and torch errors alike: the bytes are not a saved case
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("out"), list):
        return None
    if not all(type(o) is torch.Tensor for o in obj["out"]):
        return None
    after = obj.get("inputs_after", [])
    if not isinstance(after, list) or not all(
        type(x) is torch.Tensor or type(x) in (int, float, bool, type(None)) for x in after
    ):
        return None
    return obj
