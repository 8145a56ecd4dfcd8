"""Compile every Triton kernel a training template launches (launch_forward and launch_backward, not only
launch, which is all the evaluator's compile stage captures today) for sm_90 without a GPU, the way
evaluator/sandbox/child/compile.py does: capture the launches on fake tensors, then Triton's real front end.

Run as a script in a process without TRITON_INTERPRET (the interpreter replaces @triton.jit):
``python newtask_compile_probe.py TASK TEMPLATE_PATH PARAMS_JSON`` prints one JSON line per kernel."""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any


def main(task_name: str, path: str, params_json: str) -> None:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.compiler import compile as triton_compile
    from triton.runtime.jit import JITFunction, create_function_from_signature

    from warpforge.kernels.task import get_task

    captured: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def capture(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        captured.append((self, args, kwargs))

    JITFunction.run = capture  # type: ignore[method-assign]
    spec = importlib.util.spec_from_file_location("probe_template", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = get_task(task_name)
    params = json.loads(params_json)
    with FakeTensorMode():
        inputs = task.make_inputs(task.shapes[0], task.dtypes[0], 0, "cpu")
        module.launch(*inputs, **params)
        if hasattr(module, "launch_forward"):
            out, saved = module.launch_forward(*inputs, **params)
            module.launch_backward(torch.empty_like(out), saved, *inputs, **params)
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    seen = set()
    for fn, args, kwargs in captured:
        kwargs = {"debug": False, **kwargs}
        binder = create_function_from_signature(fn.signature, fn.params, backend)
        bound, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
        key = json.dumps([fn.__name__, signature, sorted(map(str, constexprs.items()))])
        if key in seen:
            continue
        seen.add(key)
        compiled = triton_compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)
        print(
            json.dumps(
                {
                    "kernel": fn.__name__,
                    "shared_bytes": int(compiled.metadata.shared),
                    "num_warps": int(compiled.metadata.num_warps),
                    "cubin_bytes": len(compiled.asm["cubin"]),
                }
            )
        )


if __name__ == "__main__":
    main(*sys.argv[1:4])
