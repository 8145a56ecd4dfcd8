"""An exported op checks itself on the first call of each new signature (export/runtime/_selfcheck.py).

The kernel here is swiglu's flat template with one change: above 20,000 elements it writes 0. Every shape the
campaign judged (the task's check shapes, at most 17 x 257 = 4,369 elements) is right, so its stored verdict is
``ok``; the package is then called where nobody judged it, in a process with ``TRITON_INTERPRET=1`` and warpforge
blocked: the first call of that signature must answer the reference's values, warn once and list the refusal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from export_fill import save

from warpforge.db.queries import Reader
from warpforge.export.package import render_package, write_tree
from warpforge.export.plan import plan_task
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

RIGHT = "    out = a / (1.0 + tl.exp(-a)) * b\n"
WRONG_ABOVE = "    out = tl.where(n_elements > 20000, 0.0, a / (1.0 + tl.exp(-a)) * b)\n"

CALLS = """
import sys
sys.modules["warpforge"] = None
import json, warnings
import torch
import wfcheck
from wfcheck._reference import swiglu as ref

def call(shape, seed=0):
    inputs = ref.make_inputs(shape, torch.float16, seed, "cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = wfcheck.swiglu(*inputs)
    expected = ref.reference(*[x.double() for x in inputs]).to(torch.float16)
    err = float((out.double() - expected.double()).abs().max())
    return err, [str(w.message) for w in caught if str(w.message).startswith("swiglu:")]

rows = {}
rows["judged"] = call({"M": 3, "N": 1009})
rows["unjudged"] = call({"M": 8, "N": 4096})
rows["unjudged_again"] = call({"M": 8, "N": 4096}, seed=1)
wfcheck.self_check(False)
rows["unjudged_unchecked"] = call({"M": 9, "N": 4096})
rows["verified"] = [[c.shape, c.dtype, c.device, c.ok, list(c.cases), c.why] for c in wfcheck.verified()]
print(json.dumps(rows))
"""


def test_the_first_call_at_an_unjudged_shape_catches_a_kernel_wrong_only_there(tmp_path: Path) -> None:
    template = next(v for v in builtin_variants("swiglu") if v.name == "flat").path.read_text()
    assert template.count(RIGHT) == 1
    wrong = tmp_path / "flat_wrong_above_20000.py"
    wrong.write_text(template.replace(RIGHT, WRONG_ABOVE))
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    save(url, "swiglu", "", {"BLOCK": 1024, "num_warps": 4, "num_stages": 1}, resources=[(32, 0, 0)], source=wrong)
    plan = plan_task(Reader(url), get_task("swiglu"), allow_untimed=True)
    dest = tmp_path / "pkg"
    write_tree(dest, render_package([plan], "wfcheck"))

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(dest), TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", CALLS], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])

    err, warned = rows["judged"]
    assert err < 1e-2 and not warned  # the kernel answered, right, at a size the campaign judged
    err, warned = rows["unjudged"]
    assert err < 1e-2, "the refused signature must answer the reference's values"
    assert len(warned) == 1 and "disagrees with the reference" in warned[0] and "'M': 8, 'N': 4096" in warned[0]
    err, warned = rows["unjudged_again"]
    assert err < 1e-2 and not warned  # refused once, warned once: later calls take the reference silently
    err, _ = rows["unjudged_unchecked"]
    assert err > 0.1  # with the check off, the kernel's own answer there: it is wrong, so the check caught it
    judged, unjudged = rows["verified"]
    assert judged[:4] == [{"M": 3, "N": 1009}, "float16", "cpu", True] and judged[4][0] == "the call's own inputs"
    assert unjudged[:4] == [{"M": 8, "N": 4096}, "float16", "cpu", False]
    assert unjudged[5].startswith("the call's own inputs: AssertionError")

    # off from the environment, read when the package is imported
    env["WFCHECK_SELF_CHECK"] = "0"
    off = "import sys; sys.modules['warpforge'] = None; import wfcheck; print(wfcheck._selfcheck.enabled())"
    proc = subprocess.run([sys.executable, "-c", off], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr[-2000:]
