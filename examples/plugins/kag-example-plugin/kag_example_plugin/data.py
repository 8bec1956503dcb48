"""The example plugin's data kinds, written only against ``kag.plugin``: where tasks come from and how
``kag data`` makes new ones.

- dataset ``example-tiny``: three KernelBench-format tasks kept in this module (``kag tasks --dataset
  example-tiny``, ``kag eval --dataset example-tiny``); ``ids=`` picks some;
- crawler ``example-seeds``: seed operators from a fixed list of your own (ops torch has no class for),
  each run once at the crawl shape; those that do not run are counted with why (``kag data crawl
  --crawler example-seeds``);
- composer ``example-chain``: chains k shape-keeping seeds (bucket ``torch#k``) on one input, with no
  shape probing (``kag data compose --composer example-chain``);
- filter ``example-finite``: an execution filter that keeps a task when one run of it gives a finite
  output of at most ``max_numel`` elements (``kag data filter --filter example-finite``);
- filter ``example-text``: a decontamination filter that compares source text (the built-in ``decontam``
  compares what tasks compute) (``kag data decontam --decontam example-text --against kernelbench:PATH``).
"""

from __future__ import annotations

import ast
import difflib
import json
import random
from pathlib import Path
from typing import Any, Iterable, Iterator

from kag.plugin import (CRAWL_CHOICES, CRAWL_SHAPES, SIZE_PROFILES, ComposedTask, ComposeError, CrawlResult,
                        LoadedTasks, Seed, Step, SynthesisError, Task, TaskError, collect, expand, fill_values,
                        hookimpl, load_module, parse_ids, render_task, sample_shape)

# -- dataset ------------------------------------------------------------------------------------
_HEAD = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
TASKS: dict[str, str] = {  # "<problem id>_<name>": a KernelBench task (Model, get_inputs, get_init_inputs)
    "1_scaled_relu": _HEAD + """    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(64, 4096)]


def get_init_inputs():
    return [2.0]
""",
    "2_row_softmax": _HEAD + """    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(128, 1024)]


def get_init_inputs():
    return []
""",
    "3_linear_gelu": _HEAD + """    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(32, 512)]


def get_init_inputs():
    return [512, 256]
""",
}


class TinyDataset:
    """Tasks that ship inside a package, no files to point at: ``example-tiny/2_row_softmax`` is
    problem 2 (``ids=2-3``). ``collect`` checks each one as kag checks a task file."""

    def __init__(self, path: str | None = None, ids: str | Iterable[int] | None = None, **_: Any):
        if path:
            raise TaskError(f"example-tiny keeps its tasks in its module; drop the path ({path})")
        self.ids = parse_ids(ids)

    def load(self, execute: bool = True) -> LoadedTasks:
        def make(key: str):
            return lambda: Task(name=f"example-tiny/{key}", source="example-tiny", code=TASKS[key], level=1,
                                problem_id=int(key.split("_")[0]))

        return collect(((key, make(key)) for key in TASKS
                        if self.ids is None or int(key.split("_")[0]) in self.ids), execute=execute)


# -- crawler ------------------------------------------------------------------------------------
SEED_OPS: list[tuple[str, str, str, str | None]] = [  # op, family, call template, constructor template
    ("squared_relu", "activation", "torch.relu({x}) ** 2", None),
    ("signed_sqrt", "elementwise", "torch.sign({x}) * torch.sqrt(torch.abs({x}))", None),
    ("softcap", "activation", "30.0 * torch.tanh({x} / 30.0)", None),
    ("rms_norm", "norm", "{x} * torch.rsqrt({x}.pow(2).mean(-1, keepdim=True) + 1e-6)", None),
    ("glu_proj", "linear", "F.glu({m}({x}), dim=-1)", "nn.Linear({f}, {f2})"),  # last dim f -> f2 / 2
    ("cholesky", "linalg", "torch.linalg.cholesky({x})", None),  # needs square matrices: counted as failed
]


class ListCrawler:
    """Seeds from a list you keep (here ``SEED_OPS``): each op runs once on the rank-2 crawl input.
    Its seeds are plain torch ops (source ``torch``), so the built-in ``rule`` composer stacks them too;
    installed, it also joins every ``kag data crawl`` that names no ``--crawler`` (the stage runs all)."""

    def crawl(self) -> CrawlResult:
        import torch

        result, shape = CrawlResult(found=len(SEED_OPS)), list(CRAWL_SHAPES[2])
        for op, family, call, init in SEED_OPS:
            step = Step(op=op, call=call, init=init)
            code = render_task([expand(step, fill_values(shape, CRAWL_CHOICES))], shape, f"{op} (example seed)")
            try:
                ns = load_module(code, f"<seed {op}>")
                with torch.no_grad():
                    out = ns["Model"]()(*ns["get_inputs"]())
            except Exception as exc:  # noqa: BLE001 - an op that does not run is a counted reason
                result.failed[op] = f"forward failed ({type(exc).__name__})"
                continue
            result.seeds.append(Seed(id=f"example:{op}", op=op, source="torch", family=family, step=step, rank=2,
                                     input_shape=shape, code=code,
                                     made_by={"crawler": "example-seeds", "out_shape": list(out.shape)}))
        return result


# -- composer -----------------------------------------------------------------------------------
RANK_FREE = {"activation", "elementwise", "softmax", "scan"}  # ops that run on an input of any rank


class ChainComposer:
    """Bucket ``torch#k``: k torch seeds with no constructor (no sizes chosen) that kept their input's
    shape when crawled, applied in turn to one sampled input; every step sees that shape, so nothing
    is probed (no torch needed here). The seeds of other crawlers qualify too (``made_by["out_shape"]``).
    Options (kag.toml's ``[composers.example-chain]``): ``exclude``, ops it never picks."""

    def __init__(self, profile: str = "cpu", exclude: Iterable[str] = (), **_: Any):
        if profile not in SIZE_PROFILES:
            raise SynthesisError(f"unknown size profile {profile!r}; choose one of {', '.join(SIZE_PROFILES)}")
        self.profile, self.exclude = profile, sorted(exclude)

    def params(self) -> dict[str, Any]:
        return {"profile": self.profile, "exclude": self.exclude}

    def compose(self, seeds: list[Seed], bucket: str, index: int, seed: int = 0) -> ComposedTask:
        keeps = [s for s in seeds if s.source == "torch" and s.step.init is None and s.op not in self.exclude
                 and s.made_by.get("out_shape") == s.input_shape]
        if not bucket.startswith("torch#") or not keeps:
            raise ComposeError(f"example-chain stacks shape-keeping torch seeds; none for bucket {bucket}")
        rng = random.Random(f"{seed}:{index}:{bucket}")
        first = rng.choice(keeps)
        fits = [s for s in keeps if s.rank == first.rank or s.family in RANK_FREE]
        picked = [first] + [rng.choice(fits) for _ in range(int(bucket.split("#")[1]) - 1)]
        shape = sample_shape(first.rank, SIZE_PROFILES[self.profile], rng)
        steps = [expand(s.step, fill_values(shape, CRAWL_CHOICES)) for s in picked]
        code = render_task(steps, shape, f"{' -> '.join(s.op for s in picked)} ({bucket}, example-chain)")
        return ComposedTask(id=f"{bucket}:{index}", code=code, ops=[s.op for s in picked], data_source=bucket,
                            composer="example-chain", made_by={"input_shape": shape, "seeds": [s.id for s in picked]})


# -- filter -------------------------------------------------------------------------------------
class FiniteOutputFilter:
    """An ``ExecutionFilter``: runs each task once here, on the CPU, and keeps it when its output is a
    finite tensor of at most ``max_numel`` elements (verdict reasons: ``run_error``, ``non_tensor_output``,
    ``non_finite_output``, ``too_large``).

    How a filter is chosen: ``kag data filter --filter example-finite`` (and ``kag data build --filter
    ...``) makes the stage's filter with this name and the stage's options (``device``, ``workers``,
    ``timeout_s``..., which this one ignores: it runs on the CPU); the built-in is ``exec``. It runs only
    on this machine: a filter that can run on an executor's workers also has ``run_on(executor, items)``.
    """

    def __init__(self, max_numel: int = 1 << 20, **_: Any):
        self.device, self.slots, self.max_numel = "cpu", ["cpu"], int(max_numel)

    def params(self) -> dict[str, Any]:
        return {"device": self.device, "max_numel": self.max_numel}

    def run(self, items: Iterable[tuple[str, str]]) -> Iterator[tuple[str, dict[str, Any]]]:
        import torch

        for key, code in items:
            try:
                ns = load_module(code, f"<{key}>")
                with torch.no_grad():
                    out = ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
            except Exception as exc:  # noqa: BLE001 - a task that does not run is rejected, not raised
                yield key, {"ok": False, "reason": "run_error", "detail": f"{type(exc).__name__}: {exc}"[:300]}
                continue
            reason = ("non_tensor_output" if not isinstance(out, torch.Tensor) else
                      "non_finite_output" if not bool(torch.isfinite(out).all()) else
                      "too_large" if out.numel() > self.max_numel else None)
            yield key, ({"ok": True, "out_shape": list(out.shape)} if reason is None else
                        {"ok": False, "reason": reason, "detail": ""})


class SourceTextFilter:
    """A ``DecontamFilter``: a task's score is its closest benchmark task's source similarity (difflib's
    ratio of the two modules as ``ast.unparse`` writes them, so comments and spacing do not count); a
    task at or above ``threshold`` is dropped. ``kag data decontam --decontam example-text`` makes it with
    ``threshold=`` and kag.toml's ``[filters.example-text]`` options (here ``min_chars``)."""

    def __init__(self, threshold: float = 0.9, min_chars: int = 0, **_: Any):
        self.threshold, self.min_chars = float(threshold), int(min_chars)
        self.reference: list[tuple[str, str]] = []

    @staticmethod
    def _text(code: str) -> str:
        try:
            return ast.unparse(ast.parse(code))
        except SyntaxError:
            return code

    def add_reference(self, items: Iterable[tuple[str, str]]) -> None:
        self.reference += [(name, self._text(code)) for name, code in items if len(code) >= self.min_chars]

    def score(self, code: str) -> tuple[float, str | None]:
        text = self._text(code)
        best = max(((difflib.SequenceMatcher(None, text, ref).ratio(), name) for name, ref in self.reference),
                   default=(0.0, None))
        return best

    def keep(self, score: float) -> bool:
        return score < self.threshold

    def write_report(self, scores: list[float], out_dir: Path, extra: dict[str, Any] | None = None) -> None:
        report = {"filter": "example-text", "threshold": self.threshold, "checked": len(scores),
                  "dropped": sum(not self.keep(s) for s in scores), "max": max(scores, default=None), **(extra or {})}
        (Path(out_dir) / "decontam_report.json").write_text(json.dumps(report, indent=2) + "\n")


@hookimpl
def kag_register_datasets(register):
    register("example-tiny", TinyDataset)


@hookimpl
def kag_register_crawlers(register):
    register("example-seeds", ListCrawler)


@hookimpl
def kag_register_composers(register):
    register("example-chain", ChainComposer)


@hookimpl
def kag_register_filters(register):
    register("example-finite", FiniteOutputFilter)
    register("example-text", SourceTextFilter)
