"""Crawl seed operators from ``transformers`` model files: MLPs, attention blocks, heads, norms.

Each model family is built from a tiny config (no download, dropout off, eager attention); every
``nn.Module`` class defined in its modeling file is tried with the constructor arguments its
signature names (``config``, ``layer_idx``, ``hidden_size`` ...) on hidden states ``(B, S, H)``.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from kag.plugin import CrawlResult, Seed, Step, TaskError, check_task_code, expand, fill_values, hookimpl, render_task

# family -> config class (both under transformers.models.<family>)
FAMILIES: dict[str, str] = {
    "llama": "LlamaConfig", "mistral": "MistralConfig", "qwen2": "Qwen2Config", "gemma": "GemmaConfig",
    "phi": "PhiConfig", "bert": "BertConfig", "roberta": "RobertaConfig", "gpt2": "GPT2Config",
    "gpt_neo": "GPTNeoConfig", "opt": "OPTConfig", "t5": "T5Config", "vit": "ViTConfig", "mpt": "MptConfig",
}
# tiny sizes, as templates ({f} = hidden size of the input, {f2} = an intermediate size)
TINY: dict[str, str] = {
    "hidden_size": "{f}", "intermediate_size": "{f2}", "num_attention_heads": "4", "num_key_value_heads": "4",
    "num_hidden_layers": "1", "vocab_size": "128", "max_position_embeddings": "256", "head_dim": "{f} // 4",
    "n_embd": "{f}", "n_head": "4", "n_layer": "1", "n_inner": "{f2}", "n_positions": "256",
    "d_model": "{f}", "d_ff": "{f2}", "num_heads": "4", "d_kv": "{f} // 4", "num_layers": "1",
    "ffn_dim": "{f2}", "word_embed_proj_dim": "{f}", "d_head": "{f} // 4", "expansion_ratio": "2",
    "n_heads": "4", "n_layers": "1",
}
CTOR_VALUES: dict[str, str] = {"config": "CONFIG", "layer_idx": "0", "hidden_size": "{f}",
                               "intermediate_size": "{f2}", "dim": "{f}", "eps": "1e-6", "layer_id": "0"}
SHAPE = [2, 16, 64]
CHOICES = {"c2": 16, "f2": 128}


def family_of(name: str) -> str:
    low = name.lower()
    for key, fam in (("mlp", "mlp"), ("feedforward", "mlp"), ("intermediate", "mlp"), ("dense", "mlp"),
                     ("attention", "attention"), ("head", "head"), ("pooler", "head"), ("norm", "norm"),
                     ("output", "projection"), ("layer", "block"), ("block", "block")):
        if key in low:
            return fam
    return "other"


def config_expr(family: str, config_cls: Any) -> str:
    """``LlamaConfig(hidden_size={f}, ..., attn_implementation='eager')`` with dropouts at 0."""
    base = config_cls()
    keys = set(base.to_dict())
    params = set(inspect.signature(config_cls.__init__).parameters)
    kwargs = [f"{k}={v}" for k, v in TINY.items() if k in keys or k in params]
    kwargs += [f"{k}=0.0" for k in sorted(keys) if ("dropout" in k or "pdrop" in k) and isinstance(getattr(base, k, None), float)]
    return f"{config_cls.__name__}({', '.join(kwargs)}, attn_implementation='eager')"


class TransformersCrawler:
    """Seeds from the modeling files of a list of transformers model families."""

    name = "transformers"

    def __init__(self, families: str | list[str] | None = None, **_: Any):
        if isinstance(families, str):
            families = [f.strip() for f in families.split(",") if f.strip()]
        self.families = list(families or FAMILIES)
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown:
            raise TaskError(f"unknown transformers families {unknown}; known: {', '.join(FAMILIES)}")

    @staticmethod
    def check_available() -> str | None:
        try:
            import transformers  # noqa: F401
        except ImportError:
            return "transformers is not installed (pip install transformers)"
        return None

    def crawl(self) -> CrawlResult:
        result = CrawlResult()
        missing = self.check_available()
        if missing:
            result.skipped["transformers"] = missing
            return result
        import torch.nn as nn
        import transformers
        from transformers import PreTrainedModel

        transformers.logging.set_verbosity_error()  # tiny configs trip vocabulary warnings

        for family in self.families:
            try:
                modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
                config_cls = getattr(importlib.import_module(f"transformers.models.{family}"), FAMILIES[family])
                cfg = config_expr(family, config_cls)
            except Exception as exc:  # noqa: BLE001 - a family missing from this transformers version
                result.skipped[f"transformers.{family}"] = f"family not importable ({type(exc).__name__})"
                continue
            for name, cls in sorted(vars(modeling).items()):
                if not (inspect.isclass(cls) and issubclass(cls, nn.Module)) or cls.__module__ != modeling.__name__:
                    continue
                result.found += 1
                label = f"{family}.{name}"
                if issubclass(cls, PreTrainedModel):
                    result.skipped[label] = "whole model (needs token ids)"
                    continue
                if "embedding" in name.lower():
                    result.skipped[label] = "embedding (needs ids or positions)"
                    continue
                seed, reason = self._try(family, name, cls, cfg, modeling.__name__, config_cls)
                if seed is None:
                    result.failed[label] = reason
                else:
                    result.seeds.append(seed)
        return result

    def _try(self, family: str, name: str, cls: Any, cfg: str, module: str, config_cls: Any) -> tuple[Seed | None, str]:
        import torch

        from kag.plugin import load_module

        args = []
        for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
                continue
            if p.name not in CTOR_VALUES:
                return None, f"no recipe for constructor argument {p.name!r}"
            args.append(CTOR_VALUES[p.name].replace("CONFIG", cfg))
        imports = [f"from {module} import {name}",
                   f"from transformers.models.{family} import {config_cls.__name__}"]
        for call in ("{m}({x})", "{m}({x})[0]"):
            step = Step(op=f"{family}.{name}", init=f"{name}({', '.join(args)})", call=call, imports=imports)
            code = render_task([expand(step, fill_values(SHAPE, CHOICES))], SHAPE,
                               f"{name} from transformers {family} (seed crawled by kag data)")
            try:
                ns = load_module(code, f"<seed {family}.{name}>")
                model = ns["Model"]()
            except Exception as exc:  # noqa: BLE001
                return None, f"constructor failed ({type(exc).__name__})"
            try:
                with torch.no_grad():
                    x = ns["get_inputs"]()
                    torch.manual_seed(1)
                    out_a = model(*x)
                    torch.manual_seed(2)
                    out_b = model(*x)
            except TypeError as exc:
                return None, "forward needs more inputs" if "argument" in str(exc) else "forward failed (TypeError)"
            except Exception as exc:  # noqa: BLE001
                return None, f"forward failed ({type(exc).__name__})"
            if isinstance(out_a, (tuple, list)) and call == "{m}({x})":
                continue
            if not isinstance(out_a, torch.Tensor) or not out_a.is_floating_point():
                return None, f"returns {type(out_a).__name__}, not a float tensor"
            if not torch.allclose(out_a, out_b, rtol=0, atol=0, equal_nan=True):
                return None, "random (differs between calls)"
            try:
                check_task_code(code, f"<seed {family}.{name}>")
            except TaskError as exc:
                return None, f"task check failed: {exc}"
            made_by = {"crawler": "transformers", "family": family, "qualname": f"{module}.{name}", "config": cfg,
                       "rank": 3, "out_shape": list(out_a.shape)}
            return Seed(id=f"transformers:{family}.{name}", op=f"{family}.{name}", source=f"transformers#{family}",
                        family=family_of(name), step=step, rank=3, input_shape=list(SHAPE), code=code,
                        made_by=made_by), ""
        return None, "returns a tuple of non-tensors"


@hookimpl
def kag_register_crawlers(register) -> None:
    register("transformers", TransformersCrawler)
