"""Shared pieces of the ``kag data`` pipeline: seed/step records, task rendering, shape probing,
the op mix, resumable JSONL files and the manifest.

Crawlers, composers and filters are plugins; they meet here so that a seed crawled by one plugin
can be stacked by another and every stage can be resumed from the files it wrote.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import attrs

# The paper's mix of Ops-6K (torch x1..x5, transformers), the default target of `kag data compose`.
DEFAULT_MIX: dict[str, float] = {"torch#1": 0.03, "torch#2": 0.75, "torch#3": 0.09, "torch#4": 0.03,
                                 "torch#5": 0.02, "transformers": 0.08}

# Shape choices per input rank and per placeholder. `cpu` keeps eager time around a millisecond on
# one core; `gpu` aims at the paper's 1-100 ms window on an H100.
SIZE_PROFILES: dict[str, dict[str, Any]] = {
    "cpu": {"batch": [2, 4, 8], "channels": [8, 16, 32], "spatial": [16, 32], "depth": [4, 8],
            "length": [32, 64, 128], "features": [32, 64, 128], "c2": [8, 16, 32], "f2": [32, 64, 128],
            "max_numel": 1 << 18},
    "gpu": {"batch": [16, 32, 64, 128], "channels": [16, 32, 64], "spatial": [64, 128, 256],
            "depth": [16, 32], "length": [1024, 2048, 4096], "features": [512, 1024, 2048, 4096],
            "c2": [16, 32, 64, 128], "f2": [512, 1024, 2048, 4096], "max_numel": 1 << 26},
}
# Fixed shapes seeds are crawled with (small, so crawling stays fast on a laptop).
CRAWL_SHAPES: dict[int, list[int]] = {2: [16, 64], 3: [8, 16, 64], 4: [4, 16, 32, 32], 5: [2, 8, 8, 16, 16]}
CRAWL_CHOICES: dict[str, int] = {"c2": 32, "f2": 64}


class SynthesisError(Exception):
    """A pipeline input or parameter that cannot be used; the message says which and how to fix it."""


class ComposeError(Exception):
    """One composition attempt that produced no task; the message is the counted reason."""


@attrs.define
class Step:
    """One operator of a task: an optional constructor expression and a call template.

    Templates use ``{c}`` (dim 1 of the input), ``{f}`` (last dim), ``{g}``/``{h}`` (a group /
    head count dividing them) and ``{c2}``/``{f2}`` (chosen output sizes); ``call`` uses ``{m}``
    for the module and ``{x}`` for the input tensor.
    """

    op: str
    call: str
    init: str | None = None
    imports: list[str] = attrs.field(factory=list)


@attrs.define
class Seed:
    """A crawled operator: how to build and call it, the input rank it takes, and its task code."""

    id: str
    op: str
    source: str
    family: str
    step: Step
    rank: int
    input_shape: list[int]
    code: str
    made_by: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class ComposedTask:
    """A composed task before filtering, in the Ops-6K shape plus how it was made."""

    id: str
    code: str
    ops: list[str]
    data_source: str
    composer: str
    made_by: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class CrawlResult:
    """What one crawler found: the seeds, how many classes it looked at, and why others failed."""

    seeds: list[Seed] = attrs.field(factory=list)
    found: int = 0
    failed: dict[str, str] = attrs.field(factory=dict)  # operator name -> reason
    skipped: dict[str, str] = attrs.field(factory=dict)  # operator name -> reason (not attempted)


# ---------------------------------------------------------------------------------------------
# templates and code
def fill_values(shape: list[int], choices: Mapping[str, int]) -> dict[str, int]:
    """Placeholder values for an input ``shape``: channels, features, groups, heads, out sizes."""
    c = shape[1] if len(shape) > 1 else shape[0]
    f = shape[-1]
    return {"c": c, "f": f, "g": next(g for g in (8, 4, 2, 1) if c % g == 0),
            "h": next(h for h in (8, 4, 2, 1) if f % h == 0), "c2": int(choices["c2"]), "f2": int(choices["f2"])}


def expand(step: Step, values: Mapping[str, int]) -> Step:
    init = step.init.format(**values) if step.init else None
    return Step(op=step.op, call=step.call, init=init, imports=list(step.imports))


def render_task(steps: list[Step], input_shape: list[int], title: str) -> str:
    """A self-contained KernelBench-format module whose forward applies ``steps`` in order."""
    imports = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F"]
    for step in steps:
        imports += [i for i in step.imports if i not in imports]
    init_lines, fwd_lines = [], []
    for i, step in enumerate(steps):
        module = f"self.op{i}"
        if step.init:
            init_lines.append(f"        {module} = {step.init}")
        fwd_lines.append(f"        x = {step.call.format(m=module, x='x')}")
    body = "\n".join(["        super().__init__()", *init_lines])
    dims = ", ".join(str(d) for d in input_shape) + ("," if len(input_shape) == 1 else "")
    return "\n".join([
        *imports, "", "",
        "class Model(nn.Module):",
        f'    """{title}"""', "",
        "    def __init__(self):", body, "",
        "    def forward(self, x):", *fwd_lines, "        return x", "", "",
        f"input_shape = ({dims})", "", "",
        "def get_inputs():", "    return [torch.rand(*input_shape)]", "", "",
        "def get_init_inputs():", "    return []", "",
    ])


def probe_output(code: str, input_shape: list[int], real_limit: int = 1 << 21) -> tuple[list[int], str]:
    """Output shape and dtype of a task, found on the meta device (no memory, no compute).

    Operators the meta device cannot run are run for real on small inputs; larger ones raise.
    """
    import torch

    from kag.core.tasks import load_module

    ns = load_module(code, "<probe>")
    try:
        with torch.device("meta"), torch.no_grad():
            out = ns["Model"]()(torch.empty(*input_shape))
    except (NotImplementedError, RuntimeError) as exc:
        if math.prod(input_shape) > real_limit:
            raise RuntimeError(f"cannot probe on meta and input too large to run: {exc}") from None
        with torch.no_grad():
            out = ns["Model"]()(torch.rand(*input_shape))
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returns {type(out).__name__}, not a tensor")
    return list(out.shape), str(out.dtype).replace("torch.", "")


def sample_shape(rank: int, profile: Mapping[str, Any], rng: random.Random, hidden: bool = False) -> list[int]:
    """A random input shape of ``rank`` from a size profile, at most ``max_numel`` elements.

    Ranks: N,F / N,C,L / N,C,H,W / N,C,D,H,W; ``hidden`` gives transformer hidden states B,S,H.
    """
    shape = _raw_shape(rank, profile, rng, hidden)
    while math.prod(shape) > profile["max_numel"] and shape[0] > 1:
        shape[0] //= 2
    return shape


def _raw_shape(rank: int, profile: Mapping[str, Any], rng: random.Random, hidden: bool) -> list[int]:
    if hidden:
        return [rng.choice(profile["batch"]), rng.choice(profile["length"]), rng.choice(profile["features"])]
    n, c = rng.choice(profile["batch"]), rng.choice(profile["channels"])
    if rank == 2:
        return [n * rng.choice([1, 4, 16]), rng.choice(profile["features"])]
    if rank == 3:
        return [n, c, rng.choice(profile["length"])]
    if rank == 4:
        s = rng.choice(profile["spatial"])
        return [n, c, s, s]
    if rank == 5:
        s = rng.choice(profile["spatial"]) // 2
        return [n, c, rng.choice(profile["depth"]), s, s]
    raise SynthesisError(f"no shape recipe for rank {rank}; seeds take inputs of rank 2 to 5")


# ---------------------------------------------------------------------------------------------
# the op mix
def parse_mix(spec: str | Mapping[str, float] | None) -> dict[str, float]:
    """``"torch#1=0.03,torch#2=0.75,transformers=0.08"`` -> normalised weights."""
    if spec is None or spec == "":
        return dict(DEFAULT_MIX)
    if isinstance(spec, str):
        raw: dict[str, float] = {}
        for part in spec.split(","):
            key, sep, val = part.partition("=")
            try:
                raw[key.strip()] = float(val)
            except ValueError:
                raise SynthesisError(f"bad --mix entry {part!r}: use BUCKET=WEIGHT, e.g. torch#2=0.75") from None
            if not sep:
                raise SynthesisError(f"bad --mix entry {part!r}: use BUCKET=WEIGHT, e.g. torch#2=0.75")
    else:
        raw = dict(spec)
    for key in raw:
        if key != "transformers" and key not in {f"torch#{k}" for k in range(1, 6)}:
            raise SynthesisError(f"unknown mix bucket {key!r}: use torch#1..torch#5 or transformers")
    total = sum(raw.values())
    if total <= 0 or any(v < 0 for v in raw.values()):
        raise SynthesisError(f"mix weights must be >= 0 and not all zero, got {raw}")
    return {k: v / total for k, v in raw.items()}


def allocate(n: int, mix: Mapping[str, float]) -> list[str]:
    """``n`` bucket labels in the proportions of ``mix`` (largest remainder), in a fixed order."""
    exact = {k: n * w for k, w in mix.items()}
    counts = {k: int(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: exact[k] - counts[k], reverse=True)[: n - sum(counts.values())]:
        counts[k] += 1
    out: list[str] = []
    for k in mix:
        out += [k] * counts[k]
    random.Random(0).shuffle(out)
    return out


# ---------------------------------------------------------------------------------------------
# resumable files (records are appended and read back with kag.core.records' JSONL helpers)
def versions() -> dict[str, str]:
    """Versions that decide what a pipeline run produces."""
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for dist in ("kag", "torch", "transformers", "pyarrow"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = "not installed"
    return out


class Manifest:
    """``manifest.json`` of an output folder: per stage its counts, reasons, parameters and state."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.data: dict[str, Any] = {"stages": {}, "versions": versions()}
        if self.path.exists():
            self.data = json.loads(self.path.read_text(encoding="utf-8"))
            self.data["versions"] = versions()

    def stage(self, name: str) -> dict[str, Any]:
        return self.data["stages"].setdefault(name, {"complete": False})

    def is_complete(self, name: str, params: Mapping[str, Any] | None = None) -> bool:
        st = self.data["stages"].get(name, {})
        return bool(st.get("complete")) and (params is None or st.get("params") == json.loads(json.dumps(params)))

    def update(self, name: str, **fields: Any) -> None:
        self.stage(name).update(json.loads(json.dumps(fields)))
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)


def count_reasons(reasons: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in reasons:
        out[r] = out.get(r, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def iter_chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i: i + size]


def now() -> float:
    return time.perf_counter()
