"""Model, cluster and plan specs: typed, validated, loadable from preset names or YAML/JSON files.

Example::

    >>> from warpforge.parallel.specs import load_model, load_cluster, PlanConfig
    >>> m = load_model("llama3-70b"); c = load_cluster("dgx-h100", nodes=8)
    >>> (m.layers, c.total_gpus)
    (80, 64)
    >>> PlanConfig(tp=8, pp=4, dp=2).gpus
    64
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from warpforge.parallel.errors import SpecError
from warpforge.parallel.gpus import gpu_model

Recompute = Literal["none", "selective", "full"]
# Megatron's --recompute-modules (with selective recompute): what backward replays. "core_attn" is the
# classic selective recompute (Korthikanti et al.); "layernorm" / "moe_act" replay norms / the experts'
# activation functions (memory-bound passes); "moe" replays the whole MoE layer (router, dispatch, experts,
# combine), which keeps only the layer's input.
RecomputeModule = Literal["core_attn", "layernorm", "moe_act", "moe"]
Precision = Literal["bf16", "fp8"]
FrameworkName = Literal["megatron", "torchtitan", "deepspeed"]
POWER_EXPONENT = 0.30  # FLOP/s ~ power ** 0.30 on H100 (NVL 400 W vs SXM 700 W datasheets; ClusterSpec)


class ModelSpec(BaseModel):
    """A decoder-only transformer. ``experts > 1`` makes the FFN of every layer after
    ``first_dense_layers`` a mixture of experts with ``top_k`` routed experts of width ``moe_ffn``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int | None = Field(default=None, gt=0)
    ffn: int | None = Field(default=None, gt=0)
    kv_channels: int | None = Field(default=None, gt=0)  # head dim when heads * it != hidden (Qwen3)
    vocab: int = Field(gt=0)
    seq: int = Field(gt=0)
    activation: Literal["gelu", "swiglu"] = "gelu"
    dropout: bool = False
    tied_embeddings: bool = False
    experts: int = Field(default=0, ge=0)
    top_k: int = Field(default=0, ge=0)
    moe_ffn: int | None = Field(default=None, gt=0)
    shared_experts: int = Field(default=0, ge=0)
    first_dense_layers: int = Field(default=0, ge=0)
    global_batch: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.kv_channels is None and self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.heads % self.n_kv_heads:
            raise ValueError(f"heads {self.heads} is not divisible by kv_heads {self.n_kv_heads}")
        if self.is_moe and not 1 <= self.top_k <= self.experts:
            raise ValueError(f"MoE needs 1 <= top_k <= experts (top_k={self.top_k}, experts={self.experts})")
        return self

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden // self.heads

    @property
    def q_width(self) -> int:
        """Width of the attention's query / output projection (``hidden`` unless ``kv_channels`` is set)."""
        return self.heads * self.head_dim

    @property
    def ffn_dim(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def expert_ffn(self) -> int:
        return self.moe_ffn or self.ffn_dim

    @property
    def moe_layers(self) -> int:
        return self.layers - min(self.first_dense_layers, self.layers) if self.is_moe else 0

    @property
    def mlp_mats(self) -> int:
        """Weight matrices per MLP: 2 for GeLU (up, down), 3 for SwiGLU (gate, up, down)."""
        return 3 if self.activation == "swiglu" else 2

    def attention_params(self) -> int:
        kv = self.n_kv_heads * self.head_dim
        return self.hidden * (self.q_width + 2 * kv) + self.q_width * self.hidden

    def dense_mlp_params(self) -> int:
        return self.mlp_mats * self.hidden * self.ffn_dim

    def moe_mlp_params(self, experts: int | None = None) -> int:
        """Weights of one MoE layer's FFN: routed experts (all, or ``experts`` of them) + shared + router."""
        n = self.experts if experts is None else experts
        per_expert = self.mlp_mats * self.hidden * self.expert_ffn
        return (n + self.shared_experts) * per_expert + self.hidden * self.experts

    def layer_params(self, moe: bool) -> int:
        mlp = self.moe_mlp_params() if moe else self.dense_mlp_params()
        return self.attention_params() + mlp + 2 * self.hidden  # + the two norms' weights

    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    def num_params(self) -> int:
        """Total parameters (all experts)."""
        dense = self.layers - self.moe_layers
        moe = self.moe_layers * self.layer_params(True)
        return dense * self.layer_params(False) + moe + self.embedding_params()

    def active_params(self) -> int:
        """Parameters a token touches (top-k + shared experts for MoE); equals num_params for dense."""
        if not self.is_moe:
            return self.num_params()
        active_moe = self.attention_params() + 2 * self.hidden + self.moe_mlp_params(self.top_k)
        dense = self.layers - self.moe_layers
        return dense * self.layer_params(False) + self.moe_layers * active_moe + self.embedding_params()

    def default_global_batch(self) -> int:
        """About 4M tokens per step (GPT-3 used 3.2M, Llama-3 4M then more), as a power of two sequences."""
        if self.global_batch:
            return self.global_batch
        target = max(1, (4 * 1024 * 1024) // self.seq)
        return 1 << (target.bit_length() - 1)


class ClusterSpec(BaseModel):
    """A homogeneous GPU cluster. Bandwidths are per GPU, unidirectional, GB/s (1e9 bytes);
    ``hbm_gb`` is the usable capacity per GPU in GiB (what nvidia-smi and the memory tables use)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    gpu: str
    gpus_per_node: int = Field(ge=0)
    nodes: int = Field(default=1, ge=0)
    peak_tflops: float = Field(gt=0)
    fp8_tflops: float | None = Field(default=None, gt=0)  # dense FP8 peak; None: no FP8 tensor cores
    hbm_gb: float = Field(gt=0)
    hbm_tbps: float = Field(gt=0)
    intra_gbps: float = Field(gt=0)
    inter_gbps: float = Field(gt=0)
    intra_latency_us: float = Field(default=10.0, ge=0)
    inter_latency_us: float = Field(default=20.0, ge=0)
    family: str = ""  # calibration key, e.g. "a100"; derived from ``gpu`` when empty
    # What the GPUs sustain when they do not run at the datasheet's boost clock (power-capped fleets:
    # torchtitan's H100 runs used a 500 W limit on a 700 W part). Either the clocks (MHz) or the power
    # (W); clocks win when both are given. See ``compute_scale``.
    sustained_clock_mhz: float | None = Field(default=None, gt=0)
    boost_clock_mhz: float | None = Field(default=None, gt=0)
    power_limit_w: float | None = Field(default=None, gt=0)
    tdp_w: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> ClusterSpec:
        if self.gpus_per_node < 1 or self.nodes < 1:
            raise ValueError(
                f"cluster has {self.gpus_per_node * self.nodes} GPUs (gpus_per_node={self.gpus_per_node}, "
                f"nodes={self.nodes}); it needs at least one"
            )
        return self

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    def tdp(self) -> float | None:
        """The board power a power limit is compared with: the file's ``tdp_w``, else the GPU model's
        (``presets/gpus.yaml``: an H100 SXM is a 700 W part whether or not the file says so)."""
        if self.tdp_w:
            return self.tdp_w
        known = gpu_model(self.gpu)
        return known.tdp_w if known else None

    def compute_scale(self) -> float:
        """Fraction of the datasheet's peak FLOP/s the GPUs sustain (1 at boost clock / full power).

        Tensor-core throughput scales with the SM clock: ``sustained / boost`` when the clocks are given.
        From a power limit: ``(limit / tdp) ** POWER_EXPONENT`` (``tdp``: the file's or the GPU model's),
        where the exponent 0.30 comes from two datasheet points of the same 132-SM GH100 die: H100 NVL 835
        dense bf16 TFLOP/s at 400 W and H100 SXM 989 at 700 W (ln(835/989) / ln(400/700) = 0.30); a 500 W
        H100 SXM gets 0.90 x 989 = 893."""
        if self.sustained_clock_mhz and self.boost_clock_mhz:
            return min(1.0, self.sustained_clock_mhz / self.boost_clock_mhz)
        tdp = self.tdp()
        if self.power_limit_w and tdp and self.power_limit_w < tdp:
            return float((self.power_limit_w / tdp) ** POWER_EXPONENT)
        return 1.0

    def power_notes(self) -> list[str]:
        """One line per power / clock field and what the planner made of it: the derating taken (and whose
        TDP), or why a field set in the file changes nothing (never ignored silently)."""
        clocks = bool(self.sustained_clock_mhz and self.boost_clock_mhz)
        out = []
        if clocks:
            out.append(
                f"sustained clock {self.sustained_clock_mhz:g} of {self.boost_clock_mhz:g} MHz boost: "
                f"peak FLOP/s x{self.compute_scale():.3f}"
            )
            if self.power_limit_w or self.tdp_w:
                out.append("warning: power_limit_w / tdp_w not used: the clocks given set the derating")
        elif self.sustained_clock_mhz or self.boost_clock_mhz:
            given = "sustained_clock_mhz" if self.sustained_clock_mhz else "boost_clock_mhz"
            out.append(f"warning: {given} not used: it needs both sustained_clock_mhz and boost_clock_mhz")
        if clocks:
            return out
        tdp = self.tdp()
        if self.power_limit_w:
            if tdp is None:
                out.append(
                    f"warning: power_limit_w {self.power_limit_w:g} W not used: the TDP of GPU "
                    f"'{self.gpu}' is not known here; add tdp_w to the cluster file"
                )
            elif self.power_limit_w < tdp:
                known = gpu_model(self.gpu)
                whose = f"{known.name}'s TDP, known" if known and not self.tdp_w else "the file's tdp_w"
                out.append(
                    f"power limit {self.power_limit_w:g} W of {tdp:g} W ({whose}): peak FLOP/s "
                    f"x{self.compute_scale():.3f}"
                )
            else:
                out.append(f"power limit {self.power_limit_w:g} W is not below the {tdp:g} W TDP: no derating")
        elif self.tdp_w:
            out.append(f"warning: tdp_w {self.tdp_w:g} W not used: without power_limit_w nothing is derated")
        return out

    @property
    def gpu_family(self) -> str:
        if self.family:
            return self.family
        g = self.gpu.lower()
        for fam in ("gb200", "b200", "h200", "h100", "a100"):
            if fam in g:
                return fam
        return "default"


class PlanConfig(BaseModel):
    """One parallelism plan. ``zero=1`` is Megatron's distributed optimizer (optimizer states sharded over
    DP x CP); 2 also shards gradients; 3 also shards weights (FSDP: Megatron-FSDP, PyTorch FSDP2).
    ``interleave`` > 1 selects the interleaved 1F1B schedule with that many model chunks per pipeline rank
    (layers need not divide evenly: chunks differ by at most one layer). ``ep`` is carved out of DP x CP,
    or, with ``expert_tp=1`` (Megatron's MoE parallel folding), out of TP x DP x CP. ``precision="fp8"``
    runs the linear layers' GEMMs in FP8 (Transformer Engine); attention and the LM head stay BF16.
    ``moe_load_factor`` is the busiest expert rank's tokens over the balanced share (1 = balanced)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    dp: int = Field(default=1, ge=1)
    cp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    micro_batch: int = Field(default=1, ge=1)
    global_batch: int | None = Field(default=None, ge=1)
    recompute: Recompute = "selective"
    zero: int = Field(default=1, ge=0, le=3)
    interleave: int = Field(default=1, ge=1)
    sequence_parallel: bool = True  # only meaningful with tp > 1
    flash_attention: bool = True
    overlap_grad_reduce: bool = True
    pp_first_layers: int | None = Field(default=None, ge=0)  # layers on the first stage (with embedding)
    pp_last_layers: int | None = Field(default=None, ge=0)  # layers on the last stage (with the LM head)
    overlap_tp_comm: bool = False  # TE userbuffers / async TP: TP collectives hidden under the GEMMs
    precision: Precision = "bf16"
    expert_tp: int | None = Field(default=None, ge=1)  # None: same as tp (Megatron's default)
    moe_load_factor: float = Field(default=1.0, ge=1.0)
    # "deepep": dispatch sends a token once per remote node and fans it out over NVLink (DeepEP's
    # internode kernels); "alltoall": one copy per routed expert over whichever tier it lands on.
    moe_dispatcher: Literal["alltoall", "deepep"] = "alltoall"
    # Megatron's --overlap-moe-expert-parallel-comm (1F1B all-to-all overlap): one micro-batch's dispatch
    # and combine run under another's compute; the calibrated share ``ep_overlap`` of them is hidden.
    # None or False: off (Megatron's default): the all-to-all is exposed.
    moe_a2a_overlap: bool | None = None
    # For ``recompute="selective"``: the modules replayed (None: ("core_attn",), the classic selective).
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    # Whose memory accounting applies (memory.py, memory_fsdp.py, memory_deepspeed.py): what each framework
    # keeps resident differs by up to 2x at the same layout. ``compiled``: torch.compile per block
    # (torchtitan), which changes what is saved for backward.
    framework: FrameworkName = "megatron"
    compiled: bool = False

    @property
    def etp(self) -> int:
        return self.tp if self.expert_tp is None else self.expert_tp

    @property
    def modules(self) -> tuple[str, ...]:
        """What selective recompute replays (empty unless ``recompute="selective"``)."""
        if self.recompute != "selective":
            return ()
        return ("core_attn",) if self.recompute_modules is None else tuple(self.recompute_modules)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def sp(self) -> bool:
        return self.sequence_parallel and self.tp > 1

    def stage_layers(self, layers: int) -> list[int]:
        """Layers per pipeline rank for this plan (``pipeline.stage_layers`` with the explicit ends)."""
        from warpforge.parallel.pipeline import stage_layers

        return stage_layers(layers, self.pp, self.pp_first_layers, self.pp_last_layers)

    def num_microbatches(self, model: ModelSpec) -> int:
        return self.batch(model) // (self.dp * self.micro_batch)

    def batch(self, model: ModelSpec) -> int:
        return self.global_batch or model.default_global_batch()

    def key(self) -> str:
        """Canonical JSON of the plan (the database's ``plan_key``). ``framework``, ``compiled``,
        ``moe_a2a_overlap`` and ``recompute_modules`` are left out at their defaults, so the keys of plans
        stored before they existed still match."""
        d = self.model_dump()
        for name in ("framework", "compiled", "moe_a2a_overlap", "recompute_modules"):
            if d[name] == PlanConfig.model_fields[name].default:
                del d[name]
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    def short(self) -> str:
        """Compact label, e.g. ``tp8 pp4 dp2 mb1 v2 sel z1``."""
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"]
        parts += [f"cp{self.cp}"] if self.cp > 1 else []
        parts += [f"ep{self.ep}"] if self.ep > 1 else []
        parts += [f"mb{self.micro_batch}"] + ([f"v{self.interleave}"] if self.interleave > 1 else [])
        rc = {"none": "norc", "selective": "sel", "full": "full"}[self.recompute]
        if self.recompute == "selective" and self.modules != ("core_attn",):
            rc += "(" + ",".join(self.modules) + ")"
        parts += [rc, f"z{self.zero}"]
        parts += ["fp8"] if self.precision == "fp8" else []
        parts += [self.framework] if self.framework != "megatron" else []
        parts += ["compiled"] if self.compiled else []
        parts += [f"etp{self.etp}"] if self.ep > 1 and self.etp != self.tp else []
        parts += ["deepep"] if self.ep > 1 and self.moe_dispatcher == "deepep" else []
        parts += ["a2a-overlap"] if self.ep > 1 and self.moe_a2a_overlap else []
        return " ".join(parts)


_PRESET_FILES = {"model": "models.yaml", "cluster": "clusters.yaml"}


@lru_cache(maxsize=None)
def _presets(kind: str) -> dict[str, dict[str, Any]]:
    text = resources.files("warpforge.parallel").joinpath("presets").joinpath(_PRESET_FILES[kind]).read_text()
    raw: dict[str, dict[str, Any]] = yaml.safe_load(text)
    out: dict[str, dict[str, Any]] = {}
    for name, body in raw.items():
        aliases = body.pop("aliases", [])
        body.pop("datasheet", None)  # provenance of datasheet-only presets (hardware.py), not a spec field
        out[name] = {"name": name, **body}
        for alias in aliases:
            out[alias] = out[name]
    return out


def preset_names(kind: Literal["model", "cluster"]) -> list[str]:
    """Preset names (aliases included), e.g. ``preset_names("cluster")``."""
    return sorted(_presets(kind))


def _read_spec_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SpecError(f"cannot read spec file {path}: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise SpecError(f"spec file {path} must hold a mapping of fields, got {type(data).__name__}")
    data.setdefault("name", path.stem)
    return data


def one_line(exc: ValidationError) -> str:
    """A pydantic validation error as one line: ``field: message; field: message``."""
    errs = exc.errors()
    parts = []
    for e in errs[:3]:
        loc = ".".join(str(x) for x in e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def _resolve(kind: Literal["model", "cluster"], ref: str | Path) -> dict[str, Any]:
    ref_s = str(ref)
    presets = _presets(kind)
    if ref_s in presets:
        return dict(presets[ref_s])
    path = Path(ref_s)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        if not path.exists():
            raise SpecError(f"{kind} spec file {path} does not exist")
        return _read_spec_file(path)
    names = ", ".join(preset_names(kind))
    raise SpecError(f"unknown {kind} '{ref_s}'; use a preset ({names}) or a YAML/JSON file")


def load_model(ref: str | Path, **overrides: Any) -> ModelSpec:
    """A model from a preset name (``llama3-70b``) or a YAML/JSON file; ``overrides`` replace fields."""
    data = {**_resolve("model", ref), **{k: v for k, v in overrides.items() if v is not None}}
    try:
        return ModelSpec(**data)
    except ValidationError as exc:
        raise SpecError(f"invalid model '{data.get('name', ref)}': {one_line(exc)}") from None


def load_cluster(ref: str | Path, nodes: int | None = None, **overrides: Any) -> ClusterSpec:
    """A cluster from a preset name (``dgx-h100``) or a YAML/JSON file, optionally resized to ``nodes``."""
    data = {**_resolve("cluster", ref), **{k: v for k, v in overrides.items() if v is not None}}
    if nodes is not None:
        data["nodes"] = nodes
    try:
        return ClusterSpec(**data)
    except ValidationError as exc:
        raise SpecError(f"invalid cluster '{data.get('name', ref)}': {one_line(exc)}") from None
