"""What patching one region means, as stored beside an exported package: the region, the op and how the call's
tensors map onto the task's inputs. Its own module: the patcher of ordinary calls (optimize/patching.py) and
that of loose tensor ops (optimize/loose_patch.py) both read it."""

from __future__ import annotations

from pydantic import BaseModel


class PatchSpec(BaseModel):
    """One region's patch (stored as JSON beside the exported package)."""

    region: str  # module path, or "path::function#i"
    module: str  # the module path the call runs in
    function: str = ""  # the torch.nn.functional name for a functional region
    op: str  # the exported op: the package's attribute (the task's name, elementwise_gelu_tanh for a member)
    task: str = ""  # the task it computes (elementwise[gelu_tanh]; "": op)
    shape: dict[str, int]  # the task's shape at the region's sizes (checked there before patching)
    order: list[int]  # task input i is the call's tensor order[i]; -1 absent (zeros of zero_shapes)
    flatten: list[bool]
    ranks: list[int]  # the task inputs' ranks (a flattened tensor merges its leading dimensions into one)
    zero_shapes: list[list[int]] = []
    reduce: str = ""
    ignore_index: int | None = None
    dtypes: list[str]  # the dtypes the task verified
    helper: bool = False  # ``function`` is a helper of the model's code, not a torch.nn.functional name
    output: int = -1  # which element of the helper's returned tuple the op computes (-1: its whole return)
    per_item: bool = False  # the op computes each item of the call's leading (batch) dimension on its own
    helper_file: str = ""  # the helper's source file: only a function of that name defined there is rebound
    # the op has no backward kernel: its backward is torch autograd of the task's reference (the package's
    # ``_reference`` module), recomputed from the saved inputs (a training step)
    reference_backward: bool = False
    # A loose region (optimize/loose_patch.py): the module's own tensor-returning torch calls at positions
    # loose_start..loose_end run as the op; the op's call tensors are read where loose_reads says
    # ([position, index among that call's tensors]).
    loose_start: int = -1
    loose_end: int = -1
    loose_names: list[str] = []  # the names of the module's calls at positions 0..loose_end, as traced
    loose_reads: list[list[int]] = []
    loose_input_shapes: list[list[int]] = []
    loose_input_dtypes: list[str] = []
    loose_input_floating: list[bool] = []  # in the call's own floating dtype (else loose_input_dtypes')
    loose_output_shape: list[int] = []
    loose_placeholders: list[list[tuple[list[int], list[int], str]]] = []  # per position start..end-1: its tensors
    loose_tuples: list[bool] = []  # per position start..end-1: it returned a tuple of them
    loose_guard: list[list[int]] = []  # the shapes of the module's tensor arguments, as traced
