"""Crawl seed operators from ``torch.nn`` classes, ``torch.nn.functional`` and tensor ops.

Constructor arguments come from the names of the required parameters (``in_channels`` -> the
input's channels, ``kernel_size`` -> 3, ...); each class is tried on the input ranks its name
suggests (1d/2d/3d) until one runs. Whatever does not run is counted with the reason.
"""

from __future__ import annotations

import inspect
from typing import Any

from kag.plugin import (CRAWL_CHOICES, CRAWL_SHAPES, CrawlResult, Seed, Step, TaskError, check_task_code, expand,
                        fill_values, hookimpl, render_task)

# required constructor parameter -> template of its value
REQUIRED_ARGS: dict[str, str] = {
    "in_channels": "{c}", "out_channels": "{c2}", "kernel_size": "3", "num_features": "{c}",
    "normalized_shape": "({f},)", "num_groups": "{g}", "num_channels": "{c}", "output_size": "4",
    "in_features": "{f}", "out_features": "{f2}", "upscale_factor": "2", "downscale_factor": "2",
    "embed_dim": "{f}", "num_heads": "{h}", "d_model": "{f}", "nhead": "{h}", "input_size": "{f}",
    "hidden_size": "{f2}", "padding": "1", "value": "0.0", "threshold": "0.1", "groups": "{g}",
    "size": "5", "norm_type": "2",
}
# optional parameters we set on purpose (deterministic, batch-first, a softmax dimension)
OPTIONAL_ARGS: dict[str, str] = {"dropout": "0.0", "batch_first": "True"}
NONE_DEFAULTS: dict[str, str] = {"dim": "-1", "scale_factor": "2.0"}

SKIP_CLASSES: dict[str, str] = {
    **{n: "container or base class" for n in ("Module", "Sequential", "ModuleList", "ModuleDict",
                                             "ParameterList", "ParameterDict", "Container")},
    "Identity": "identity (no computation)",
    "Embedding": "needs integer indices", "EmbeddingBag": "needs integer indices",
    "Bilinear": "needs two inputs", "MaxUnpool1d": "needs pooling indices", "MaxUnpool2d": "needs pooling indices",
    "MaxUnpool3d": "needs pooling indices", "RReLU": "random (samples slopes in training mode)",
    "SyncBatchNorm": "needs a process group", "DataParallel": "wrapper, not an operator",
    "CosineSimilarity": "needs two inputs", "PairwiseDistance": "needs two inputs",
    "RNNBase": "container or base class", "RNNCellBase": "container or base class",
}
# classes whose constructor takes *args, or whose forward takes more than one input
CLASS_RECIPES: dict[str, tuple[str, str]] = {
    "RNN": ("nn.RNN({f}, {f2}, batch_first=True)", "{m}({x})[0]"),
    "LSTM": ("nn.LSTM({f}, {f2}, batch_first=True)", "{m}({x})[0]"),
    "GRU": ("nn.GRU({f}, {f2}, batch_first=True)", "{m}({x})[0]"),
    "Transformer": ("nn.Transformer(d_model={f}, nhead={h}, num_encoder_layers=1, num_decoder_layers=1, "
                    "dim_feedforward={f2}, dropout=0.0, batch_first=True)", "{m}({x}, {x})"),
    "TransformerEncoder": ("nn.TransformerEncoder(nn.TransformerEncoderLayer({f}, {h}, {f2}, dropout=0.0, "
                           "batch_first=True), num_layers=2, enable_nested_tensor=False)", "{m}({x})"),
    "TransformerDecoderLayer": ("nn.TransformerDecoderLayer({f}, {h}, {f2}, dropout=0.0, batch_first=True)",
                                "{m}({x}, {x})"),
    "TransformerDecoder": ("nn.TransformerDecoder(nn.TransformerDecoderLayer({f}, {h}, {f2}, dropout=0.0, "
                           "batch_first=True), num_layers=2)", "{m}({x}, {x})"),
    "Unflatten": ("nn.Unflatten(1, ({c}, 1))", "{m}({x})"),
}
# torch.nn.functional names that are helpers, not operators
F_HELPERS = {"Optional", "assert_int_or_pair", "boolean_dispatch", "handle_torch_function", "has_torch_function",
             "has_torch_function_unary", "has_torch_function_variadic", "Callable", "TYPE_CHECKING", "Tensor",
             "DType", "BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "GRID_SAMPLE_INTERPOLATION_MODES",
             "GRID_SAMPLE_PADDING_MODES", "importlib", "math", "np", "torch", "warnings", "reproducibility_notes",
             "sparse_support_notes", "tf32_notes", "Union"}

# tensor ops worth a class (name -> call template); functional ops are mined from F itself
TORCH_OPS: dict[str, tuple[str, str]] = {
    "sum": ("torch.sum({x}, dim=1)", "reduction"), "mean": ("torch.mean({x}, dim=-1)", "reduction"),
    "amax": ("torch.amax({x}, dim=1)", "reduction"), "amin": ("torch.amin({x}, dim=1)", "reduction"),
    "logsumexp": ("torch.logsumexp({x}, dim=1)", "reduction"), "std": ("torch.std({x}, dim=-1)", "reduction"),
    "var": ("torch.var({x}, dim=1)", "reduction"), "norm": ("torch.norm({x}, dim=-1)", "reduction"),
    "prod": ("torch.prod({x}, dim=1)", "reduction"), "cumsum": ("torch.cumsum({x}, dim=1)", "scan"),
    "cumprod": ("torch.cumprod({x}, dim=-1)", "scan"), "cummax": ("torch.cummax({x}, dim=1)[0]", "scan"),
    "exp": ("torch.exp({x})", "elementwise"), "log1p": ("torch.log1p(torch.abs({x}))", "elementwise"),
    "sqrt": ("torch.sqrt(torch.abs({x}))", "elementwise"), "abs": ("torch.abs({x})", "elementwise"),
    "sin": ("torch.sin({x})", "elementwise"), "cos": ("torch.cos({x})", "elementwise"),
    "erf": ("torch.erf({x})", "elementwise"), "square": ("torch.square({x})", "elementwise"),
    "rsqrt": ("torch.rsqrt(torch.abs({x}) + 1.0)", "elementwise"), "clamp": ("torch.clamp({x}, min=0.1, max=0.9)", "elementwise"),
    "transpose": ("torch.transpose({x}, 1, 2)", "shape"), "flip": ("torch.flip({x}, dims=[1])", "shape"),
    "matmul_self_t": ("torch.matmul({x}, {x}.transpose(-1, -2))", "matmul"),
    "diff": ("torch.diff({x}, dim=-1)", "elementwise"), "triu": ("torch.triu({x})", "elementwise"),
}


def family_of(name: str) -> str:
    low = name.lower()
    for key, fam in (("transpose", "conv_transpose"), ("conv", "conv"), ("adaptive", "adaptive_pool"),
                     ("pool", "pool"), ("norm", "norm"), ("linear", "linear"), ("softm", "softmax"),
                     ("attention", "attention"), ("rnn", "recurrent"), ("lstm", "recurrent"), ("gru", "recurrent"),
                     ("transformer", "transformer"), ("pad", "pad"), ("shuffle", "shape"), ("flatten", "shape"),
                     ("upsampl", "upsample"), ("fold", "shape")):
        if key in low:
            return fam
    return "activation"


def ranks_for(name: str, params: set[str]) -> list[int]:
    low = name.lower()
    if low.endswith("cell"):
        return [2]
    if "1d" in low:
        return [3, 2]
    if "2d" in low:
        return [4, 3]
    if "3d" in low:
        return [5, 4]
    if params & {"embed_dim", "d_model", "input_size"}:
        return [3]
    if params & {"in_features", "normalized_shape"}:
        return [2, 3]
    return [4, 3, 2]


def ctor_args(fn: Any, skip_first: bool) -> tuple[list[str] | None, set[str], str | None]:
    """Argument templates for a callable's signature; None and the parameter when one is unknown."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None, set(), "no signature"
    if skip_first and params:
        params = params[1:]
    args, names = [], set()
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in ("device", "dtype", "inplace"):
            continue
        names.add(p.name)
        if p.default is p.empty:
            if p.name not in REQUIRED_ARGS:
                return None, names, p.name
            args.append(f"{p.name}={REQUIRED_ARGS[p.name]}")
        elif p.name in OPTIONAL_ARGS:
            args.append(f"{p.name}={OPTIONAL_ARGS[p.name]}")
        elif p.default is None and p.name in NONE_DEFAULTS:
            args.append(f"{p.name}={NONE_DEFAULTS[p.name]}")
    return args, names, None


def try_seed(seed_id: str, op: str, source: str, family: str, step: Step, ranks: list[int],
             made_by: dict[str, Any]) -> tuple[Seed | None, str]:
    """Render the op as a task on each rank until one runs; the seed, or None and why not."""
    import torch

    from kag.plugin import load_module

    reason = "no input rank tried"
    for rank in ranks:
        shape = list(CRAWL_SHAPES[rank])
        concrete = expand(step, fill_values(shape, CRAWL_CHOICES))
        code = render_task([concrete], shape, f"{op} (seed crawled by kag data, {source})")
        try:
            ns = load_module(code, f"<seed {op}>")
            model = ns["Model"]()
        except Exception as exc:  # noqa: BLE001 - any failure is a counted reason, not a crash
            reason = f"constructor failed ({type(exc).__name__})"
            continue
        try:
            with torch.no_grad():
                torch.manual_seed(1)
                out1 = model(*ns["get_inputs"]())
                x = [torch.randn_like(t) for t in ns["get_inputs"]()]  # negatives too: RReLU-like ops
                torch.manual_seed(2)
                out_a = model(*x)
                torch.manual_seed(3)
                out_b = model(*x)
        except Exception as exc:  # noqa: BLE001
            reason = f"forward failed ({type(exc).__name__})"
            continue
        if not isinstance(out1, torch.Tensor):
            reason = f"returns {type(out1).__name__}, not a tensor"
            continue
        if not out1.is_floating_point():
            reason = f"returns {out1.dtype} (not floating point)"
            continue
        if out_a.shape != out_b.shape or not torch.allclose(out_a, out_b, rtol=0, atol=0, equal_nan=True):
            return None, "random (differs between calls)"
        try:
            check_task_code(code, f"<seed {op}>")
        except TaskError as exc:
            return None, f"task check failed: {exc}"
        return Seed(id=seed_id, op=op, source=source, family=family, step=step, rank=rank, input_shape=shape,
                    code=code, made_by={**made_by, "rank": rank, "out_shape": list(out1.shape)}), ""
    return None, reason


class TorchCrawler:
    """Seeds from torch.nn classes, torch.nn.functional functions and a list of tensor ops."""

    name = "torch"

    def __init__(self, functional: bool = True, tensor_ops: bool = True, **_: Any):
        self.functional = functional
        self.tensor_ops = tensor_ops

    def crawl(self) -> CrawlResult:
        import torch.nn as nn
        import torch.nn.functional as F

        result = CrawlResult()
        classes = {n: getattr(nn, n) for n in dir(nn) if not n.startswith("_")
                   and inspect.isclass(getattr(nn, n)) and issubclass(getattr(nn, n), nn.Module)}
        for name, cls in sorted(classes.items()):
            result.found += 1
            label = f"nn.{name}"
            skip = self._skip_reason(name)
            if skip:
                result.skipped[label] = skip
                continue
            args, params, missing = ctor_args(cls.__init__, skip_first=True)
            if name in CLASS_RECIPES:
                init, call = CLASS_RECIPES[name]
                step = Step(op=name, init=init, call=call)
                made_by = {"crawler": "torch", "kind": "nn.Module", "qualname": f"torch.nn.{name}", "recipe": "listed"}
                self._add(result, f"nn.{name}", name, family_of(name), step, [3], made_by)
                continue
            if args is None:
                result.failed[label] = f"no recipe for constructor argument {missing!r}"
                continue
            step = Step(op=name, init=f"nn.{name}({', '.join(args)})", call="{m}({x})")
            if params & {"embed_dim"}:
                step.call = "{m}({x}, {x}, {x})[0]"
            elif family_of(name) == "recurrent":
                step.call = "{m}({x})[0]"
            made_by = {"crawler": "torch", "kind": "nn.Module", "qualname": f"torch.nn.{name}"}
            self._add(result, label, name, family_of(name), step, ranks_for(name, params), made_by)
        if self.functional:
            lowered = {n.lower() for n in classes}
            for name in sorted(dir(F)):
                fn = getattr(F, name)
                if name.startswith("_") or name in F_HELPERS or not callable(fn) or inspect.isclass(fn):
                    continue
                result.found += 1
                label = f"F.{name}"
                if name.replace("_", "") in lowered or "dropout" in name:
                    result.skipped[label] = "same as an nn class" if "dropout" not in name else "random (dropout)"
                    continue
                args, params, missing = ctor_args(fn, skip_first=True)
                if args is None:
                    result.failed[label] = f"no recipe for argument {missing!r}"
                    continue
                if any("{" in a for a in args):  # shape-dependent arguments need a module, skip them
                    result.failed[label] = "needs weights or shape-dependent arguments"
                    continue
                call = f"F.{name}({', '.join(['{x}', *args])})"
                made_by = {"crawler": "torch", "kind": "functional", "qualname": f"torch.nn.functional.{name}"}
                self._add(result, label, name, family_of(name), Step(op=name, call=call), [4, 3, 2], made_by)
        if self.tensor_ops:
            for name, (call, family) in TORCH_OPS.items():
                result.found += 1
                made_by = {"crawler": "torch", "kind": "tensor op", "qualname": call}
                self._add(result, f"torch.{name}", name, family, Step(op=name, call=call), [4, 3, 2], made_by)
        return result

    @staticmethod
    def _skip_reason(name: str) -> str | None:
        if name in SKIP_CLASSES:
            return SKIP_CLASSES[name]
        if name.startswith("Lazy"):
            return "lazy module (shape set at first call)"
        if "Dropout" in name:
            return "random (dropout)"
        if "Loss" in name:
            return "loss (needs a target input)"
        return None

    @staticmethod
    def _add(result: CrawlResult, label: str, op: str, family: str, step: Step, ranks: list[int],
             made_by: dict[str, Any]) -> None:
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            seed, reason = try_seed(f"torch:{label}", op, "torch", family, step, ranks, made_by)
        if seed is not None and any("deprecated" in str(w.message) for w in caught):
            seed, reason = None, "deprecated"
        if seed is None:
            result.failed[label] = reason
        else:
            result.seeds.append(seed)


@hookimpl
def kag_register_crawlers(register) -> None:
    register("torch", TorchCrawler)
