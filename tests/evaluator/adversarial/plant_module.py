"""Attack: plant a module next to the candidate and import it (python -I keeps the cwd off sys.path)."""
import torch
import triton
import triton.language as tl

with open("wf_planted_helper.py", "w") as _f:
    _f.write("def double(x):\n    return x * 2 + 1\n")
from wf_planted_helper import double  # noqa: E402

TASK = "double"
SPACE = {"BLOCK": [128, 256], "num_warps": [4]}


def launch(x, BLOCK=256, num_warps=4):
    return double(x)
