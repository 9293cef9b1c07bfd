"""A run's spec: one frozen, typed value (RunSpec), built once at the edge (bench.run.spec.resolve for a new
run, bench.run.spec.read_spec for a run folder) and passed to everything that reads it: engine, tasks,
experiments, slurm and reports. Its schema gives every key's type, range and allowed values, checked before
anything is built, so that a bad value is one line naming the key instead of a crash (or a silent mistake)
iterations later.

Values are checked, not converted: the spec keeps what was resolved (strict mode: "5" is not a number, true
is not an integer, and 2000 stays 2000 where a float is allowed), so spec.json is written back byte for byte.
`model` and `data` are the task's own: their keys are the preset's, and a value must be of the preset's kind
(a number for a number, a list for a list, ...).
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WrapValidator,
    field_validator,
    model_validator,
)

from bench.core.errors import UserError
from bench.core.identity import LATE_SETTINGS, SpecDocument, differing, identity_of
from bench.core.yamlsafe import excerpt


def _keep_int(value: Any, handler: Any) -> Any:
    """A float field checks an integer as a float but keeps it an integer (T1: 2000 stays 2000)."""
    checked = handler(value)
    return value if type(value) is int else checked


def _number(**limits: Any) -> Any:
    return Annotated[float, Field(**limits), WrapValidator(_keep_int)]


# Every integer fits the machine type it is handed to (torch's and numpy's int64: a seed of 10**29 was a ValueError
# traceback in torch.manual_seed); the counts below are stated constants, not the machine's: a spec resolved on one
# machine runs on another (a login node's cores say nothing of a compute node's).
INT64_MAX = 2**63 - 1
MAX_SCALE = 8192  # S, W and A: 64x the paper's largest S (128, ImageNet); 10**12 never finished an iteration
MAX_BATCH = 1 << 20  # examples (or tokens) per micro-batch: 512x the paper's largest (2048 tokens); 10**12 was a
# 7 TiB index array
MAX_THREADS = 1024  # torch threads and data-loader workers per process: past any machine's cores today

Positive = _number(gt=0, allow_inf_nan=False)
NonNegative = _number(ge=0, allow_inf_nan=False)
PositiveInt = Annotated[int, Field(ge=1, le=INT64_MAX)]
NonNegativeInt = Annotated[int, Field(ge=0, le=INT64_MAX)]
ScaleInt = Annotated[int, Field(ge=1, le=MAX_SCALE)]
ThreadCount = Annotated[int, Field(ge=1, le=MAX_THREADS)]
Fraction = _number(gt=0, le=1)  # (0, 1]


def _step(pair: list[float]) -> list[float]:
    """An elastic step [fraction of T1, S]: the fraction in [0, 1], S an integer scale."""
    fraction, scale = pair
    if not fraction <= 1:
        raise ValueError(f"the step's fraction of T1 {fraction!r} is past 1")
    if type(scale) is not int or not 1 <= scale <= MAX_SCALE:
        raise ValueError(f"the step's S {scale!r} is not an integer in [1, {MAX_SCALE}]")
    return pair


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Constant(_Strict):
    kind: Literal["constant"]
    lr0: Positive


class Exponential(_Strict):
    kind: Literal["exponential"]
    lr0: Positive
    decay: Fraction  # the total decrease over the run


class Step(_Strict):
    kind: Literal["step"]
    lr0: Positive
    gamma: Fraction
    milestones: list[_number(ge=0, le=1)] = []  # fractions of T1


Schedule = Constant | Exponential | Step


class Preset(_Strict):
    """What every task preset defines (tasks/presets/<task>.py): its model, data and training recipe."""

    T1: _number(gt=0, le=1e9, allow_inf_nan=False)  # the paper's longest is 1.55 M: past 1e9, a typo
    batch_size: Annotated[int, Field(ge=1, le=MAX_BATCH)]
    lr_schedule: Schedule = Field(discriminator="kind")
    momentum: _number(ge=0, lt=1)
    weight_decay: NonNegative
    scales: list[ScaleInt]
    # [[fraction of T1, S]]: S an integer (2.5 ran at S = 2 in a folder named 2.5)
    elastic: dict[str, list[Annotated[list[NonNegative], Field(min_length=2, max_length=2), AfterValidator(_step)]]]
    eval_every: Positive
    checkpoint_every: NonNegativeInt
    num_workers: Annotated[int, Field(ge=0, le=MAX_THREADS)]
    model: dict[str, Any]
    data: dict[str, Any]

    @field_validator("lr_schedule", mode="before")
    @classmethod
    def _kind_first(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("kind") not in ("constant", "exponential", "step"):
            raise ValueError(f"kind {value.get('kind')!r} is not one of constant, exponential, step")
        return value


class Settings(_Strict):
    """The settings every run has, whatever the task, with their defaults and meaning: the one place
    they are written (RUN_DEFAULTS, below, is read off these fields); a preset or --set may change any."""

    estimator: Literal["unbiased", "ratio"] = Field("unbiased", description="or ratio, the paper's §3.4 estimator")
    track_stats: bool = Field(True, description="observe sum_sq per iteration (off: plain training, the perf baseline)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: CUDA when there is one")
    ranks: ScaleInt = Field(1, description="W data-parallel processes; A = S / W micro-batches on each")
    accumulation: ScaleInt | None = Field(
        None, description="fix A instead: W_t = S_t / A; a change of W restarts the run on S_t / A ranks"
    )
    reduction: Literal["pairwise", "native"] = Field(
        "pairwise", description="ḡ summed as a binary tree, bit-identical for any W × A; native: autograd + DDP"
    )
    T_AS: Positive | None = Field(None, description="LSW+: iterations of its AdaScale run (looked up when unset)")
    T: Positive | None = Field(None, description="scaled SGD: its own number of iterations")
    train_loss_window: Fraction = Field(0.05, description="summary.train_loss: mean over this final fraction")
    threads: ThreadCount | None = Field(None, description="torch threads on CPU; None: 1 (tiny), torch's default")
    eval_unit: Literal["tau", "epochs"] = Field(
        "tau", description="evaluate every eval_every scale-invariant iterations (tau) or data epochs"
    )
    max_epochs: Positive | None = Field(None, description="also stop after this many epochs of data")
    target: Positive | None = Field(None, description="also stop at the first evaluation that reaches this metric")
    ttt_target: _number(allow_inf_nan=False) | None = Field(
        None,
        description="time to target's threshold on the metric (reports.speed.timetotarget), fixed before the runs: the "
        "preset's, which says where it comes from, or a matrix's for a variant; None: not counted",
    )
    warmup_iterations: PositiveInt | None = Field(
        None, description="an extra ramp: iteration k uses (k + 1) / n of its lr for k < n (textbook)"
    )
    keep_checkpoints_every: PositiveInt | None = Field(
        None, description="also keep the model weights every k iterations (checkpoints/), for `gain`"
    )
    keep_checkpoints_until: _number(gt=0, le=1, allow_inf_nan=False) | None = Field(
        None, description="keep them only while τ ≤ this share of T1 (finding iv's window: 0.1), for `gain`"
    )
    experiment: dict[str, Any] | None = Field(None, description="the matrix experiment the run belongs to")
    # Sized for the longest wait between collectives: an evaluation, a checkpoint written by rank 0, a
    # data-loader start on a cold file system (minutes on the paper presets).
    collective_timeout_s: Positive = Field(
        1800.0,
        description="how long a collective waits for a silent peer before the job fails (the process group's "
        "timeout); $ADASCALE_BENCH_DIST_TIMEOUT overrides it for one job",
    )
    microbatch_mode: Literal["sequential", "batched"] = Field(
        LATE_SETTINGS["microbatch_mode"],
        description="sequential: one forward/backward per micro-batch; batched: one over the rank's A "
        "micro-batches at once (bench.core.engine.batched)",
    )
    amp: Literal["none", "bf16"] = Field(LATE_SETTINGS["amp"], description="bf16: autocast the forward pass on CUDA")
    heartbeat_s: NonNegative = Field(
        60.0, description="a progress line every this many seconds when stdout is not a terminal (0: none)"
    )
    tensorboard: bool = Field(False, description="also write the metrics as TensorBoard events (RUN_DIR/tensorboard)")
    optimizer: Literal["sgd", "adamw"] = Field(
        LATE_SETTINGS["optimizer"],
        description="sgd: momentum SGD (the paper's; momentum, weight_decay coupled); adamw: torch's AdamW "
        "(betas, eps, weight_decay decoupled) on the same exactly reduced gradient (bench.core.engine.adamwstep)",
    )
    betas: Annotated[list[_number(ge=0, lt=1)], Field(min_length=2, max_length=2)] = Field(
        LATE_SETTINGS["betas"], description="adamw: (β₁, β₂), the moment estimates' decay rates"
    )
    eps: Positive = Field(LATE_SETTINGS["eps"], description="adamw: ε added to √v̂ in the denominator")

    @model_validator(mode="after")
    def _adam_keys_need_adamw(self) -> Settings:
        """betas and eps are AdamW's: set for SGD they would be silently ignored."""
        if self.optimizer == "sgd":
            for key in ("betas", "eps"):
                if getattr(self, key) != LATE_SETTINGS[key]:
                    raise ValueError(f"{key} is AdamW's: set optimizer=adamw to use it (SGD has momentum)")
        return self


class RunSpec(Settings, Preset):
    """A resolved spec: which run, the preset's recipe, the settings, and what the user overrode. Frozen:
    a changed spec is a new value (`replace`), checked again."""

    task: str
    method: str
    scale: ScaleInt | Literal["elastic-up", "elastic-down"]
    seed: NonNegativeInt  # < 2**63: torch's and numpy's seeds are int64
    preset: str
    overrides: dict[str, Any]
    data_root: str | None
    rule: dict[str, Any] | None = None  # a user's rule: its name, source digest and facts (bench.core.methods.record)
    user_task: dict[str, Any] | None = None  # a task of yours: its name, source digest and card (tasks.record)

    def to_json(self) -> SpecDocument:
        """The spec.json document: the keys resolved or read, with their values as given (nothing added)."""
        return self.model_dump(exclude_unset=True)

    @cached_property
    def identity(self) -> dict[str, Any]:
        """The run's identity (bench.core.identity.identity_of), computed once per spec."""
        return identity_of(self.to_json())

    def differs_from(self, other: SpecDocument) -> list[str]:
        """The identity keys in which the spec document `other` (a run folder's, a checkpoint's) is another run."""
        return differing(self.identity, identity_of(other))

    def replace(self, drop: tuple[str, ...] = (), **changes: Any) -> RunSpec:
        """This spec with `changes` and without the keys in `drop`, checked as a resolved one is (the task's own
        keys against themselves)."""
        doc = {k: v for k, v in self.to_json().items() if k not in drop}
        return checked(doc | changes, {"model": self.model, "data": self.data})


RUN_DEFAULTS: dict[str, Any] = {name: field.default for name, field in Settings.model_fields.items()}
PRESET_KEYS: tuple[str, ...] = tuple(Preset.model_fields)


def _where(loc: tuple) -> str:
    """A dotted key (the discriminator's tag, e.g. lr_schedule.exponential.decay, left out)."""
    parts = [str(p) for p in loc if p not in ("constant", "exponential", "step")]
    return ".".join(parts)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def _task_keys(name: str, given: Any, preset: Any) -> list[str]:
    """What is wrong in a task mapping (`model`, `data`) against the preset's: unknown keys, kinds."""
    if not isinstance(given, dict):
        return [f"{name}: expected a mapping, got {given!r}"]
    problems = []
    for key, value in given.items():
        where = f"{name}.{key}"
        if key not in preset:
            known = ", ".join(sorted(preset)) or "none"
            problems.append(f"{where}: unknown key; known keys: {known}")
        elif isinstance(preset[key], dict):
            problems += _task_keys(where, value, preset[key])
        elif preset[key] is not None and value is not None and _kind(value) != _kind(preset[key]):
            problems.append(f"{where}={excerpt(value)}: expected a {_kind(preset[key])} like {excerpt(preset[key])}")
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{where}={value!r}: expected a finite number")
        elif _kind(value) == "number" and (why := _number_problem(value, preset[key])):
            problems.append(f"{where}={excerpt(value)}: {why}")
    return problems


def _number_problem(value: float, preset: Any) -> str | None:
    """A task's own number against its preset's (sizes, counts, rates, noise levels: the presets hold no
    signed quantity): an integer where the preset has one, positive where it is positive, not negative
    where it is 0. tiny_noise = -1 crashed the data writer; a width of 2.5 the model."""
    if isinstance(preset, int) and not isinstance(preset, bool) and not isinstance(value, int):
        return f"expected an integer like {preset}"
    if isinstance(preset, int | float) and preset > 0 and not value > 0:
        return f"expected a positive number like {preset}"
    if isinstance(preset, int | float) and preset == 0 and value < 0:
        return "expected a non-negative number"
    return None


def check(spec: SpecDocument, preset: dict[str, Any]) -> tuple[RunSpec | None, list[str]]:
    """The typed spec of the JSON document `spec` and every violation of the schema in it, one line each
    (None and the list when there is any)."""
    found, typed = [], None
    try:
        typed = RunSpec.model_validate(spec)
    except ValidationError as e:
        for err in e.errors():
            where = _where(err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                found.append(f"{where}: unknown key")
            elif err["type"] == "missing":
                found.append(f"{where}: missing")
            elif not where:  # a check across keys (Settings._adam_keys_need_adamw): its message names them
                found.append(msg)
            else:
                found.append(f"{where}={excerpt(err['input'])}: {msg[0].lower()}{msg[1:]}")
    for name in ("model", "data"):
        found += _task_keys(name, spec.get(name), preset.get(name) or {})
    found = [" ".join(p.split()) for p in dict.fromkeys(found)]
    return (None if found else typed), found


def checked(spec: SpecDocument, preset: dict[str, Any]) -> RunSpec:
    """The typed spec of the JSON document `spec`, or one UserError listing every violation (one line)."""
    typed, found = check(spec, preset)
    if typed is None:
        raise UserError("invalid spec: " + "; ".join(found))
    return typed
