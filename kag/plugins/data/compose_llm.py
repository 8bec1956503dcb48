"""The ``llm`` composer: a policy (any ``policy`` plugin) picks and stacks operators, as in the paper.

The prompt offers a random menu of crawled operators with their constructor and call, and asks
for one ``Model`` applying K of them in sequence; the answer's last python code block is the
task. It is kept only if it passes the task check and runs on the meta device. An answer that does
not (no code block, an invalid module, shapes that do not fit) goes back to the policy with the
error, up to ``repairs`` times (the paper's composer is an LLM that fixes its own shape errors).
"""

from __future__ import annotations

import ast
import random
import re
from typing import Any

from kag.plugin import (ComposeError, ComposedTask, Message, SIZE_PROFILES, Seed, SynthesisError, TaskError,
                        check_task_code, expand, fill_values, hookimpl, sample_shape)

SYSTEM = (
    "You build training tasks for CUDA kernel engineers. A task is a self-contained Python module in "
    "the KernelBench format: `class Model(nn.Module)` whose forward applies PyTorch operators in "
    "sequence, `get_inputs()` returning a list of input tensors and `get_init_inputs()` returning the "
    "constructor arguments. The task must be deterministic (no dropout, no random ops) and every "
    "operator's output must fit the next operator's input."
)
CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def prompt(menu: list[Seed], count: int, shape: list[int], profile: dict[str, Any], rng: random.Random) -> str:
    lines = []
    for seed in menu:
        step = expand(seed.step, fill_values(list(seed.input_shape), {"c2": profile["c2"][0], "f2": profile["f2"][0]}))
        make = f"{step.init}; " if step.init else ""
        lines.append(f"- {seed.op} ({seed.family}, input rank {seed.rank}): {make}call {step.call.format(m='m', x='x')}")
    return (
        f"Compose a task that applies exactly {count} of these operators in sequence (you choose which and "
        f"in what order; adjust sizes so shapes fit):\n" + "\n".join(lines) +
        f"\n\nThe first input is torch.rand{tuple(shape)} unless your first operator needs another rank. "
        "Answer with one ```python code block holding the whole module (imports, Model, get_inputs, "
        "get_init_inputs) and nothing after it."
    )


def repair_prompt(error: str) -> str:
    """What the policy is told when its answer cannot be a task."""
    return (f"That module cannot be a task: {error}. Fix it (make each operator's output fit the next "
            "operator's input, keep the operators you chose) and answer again with the whole module in one "
            "```python code block.")


def answer_text(reply: Any) -> str:
    """The text of a policy's reply, whatever record the policy returns it in."""
    if isinstance(reply, str):
        return reply
    if isinstance(reply, dict):
        return str(reply.get("content") or reply.get("text") or "")
    for attr in ("content", "text"):
        value = getattr(reply, attr, None)
        if isinstance(value, str) and value:
            return value
    for attr in ("message", "response"):
        inner = getattr(reply, attr, None)
        if inner is not None:
            return answer_text(inner)
    return ""


def extract_code(text: str) -> str:
    blocks = CODE_BLOCK.findall(text)
    if not blocks:
        raise ComposeError("answer has no ```python code block")
    return blocks[-1].strip() + "\n"


def validate(code: str) -> list[int]:
    """Check the task and run it on the meta device; returns the output shape."""
    import torch

    from kag.plugin import load_module

    try:
        check_task_code(code, "<llm task>")
    except TaskError as exc:
        raise ComposeError(f"invalid task: {str(exc).split(': ', 1)[-1][:200]}") from None
    ns = load_module(code, "<llm task>")
    try:
        with torch.device("meta"), torch.no_grad():
            out = ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
    except Exception as exc:  # noqa: BLE001
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise ComposeError(f"task does not run ({type(exc).__name__}{': ' + detail if detail else ''})") from None
    if not isinstance(out, torch.Tensor):
        raise ComposeError("forward does not return a tensor")
    return list(out.shape)


NOT_OPS = {"Module", "Parameter", "ParameterList", "ModuleList", "Sequential", "randn", "rand", "zeros", "ones",
           "tensor", "empty", "arange", "float32", "float16", "bfloat16", "no_grad", "device", "Tensor"}


def ops_used(code: str, seeds: list[Seed]) -> list[str]:
    """Operators the task's ``Model`` calls (``nn.X``, ``torch.X``, ``F.X``), named as the seeds name them."""
    names = {s.op.split(".")[-1].lower(): s.op for s in seeds}
    tree = ast.parse(code)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), tree)
    hits = sorted((node.lineno, node.col_offset, names.get(node.attr.lower(), node.attr)) for node in ast.walk(model)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in ("torch", "nn", "F") and node.attr not in NOT_OPS)
    return list(dict.fromkeys(op for _, _, op in hits))


class LLMComposer:
    """Asks a policy plugin (``policy=NAME``, ``policy_options={...}``) for each composed task."""

    name = "llm"

    def __init__(self, policy: str | None = None, policy_options: dict[str, Any] | None = None,
                 plugins: Any = None, profile: str = "cpu", menu_size: int = 12, repairs: int = 2, **_: Any):
        if profile not in SIZE_PROFILES:
            raise SynthesisError(f"unknown size profile {profile!r}; choose one of {', '.join(SIZE_PROFILES)}")
        if plugins is None:
            from kag.plugin import Plugins

            plugins = Plugins()
        self.policy_name = policy or plugins.selected("policy")
        self.policy = plugins.create("policy", self.policy_name, **(policy_options or {}))
        self.profile_name, self.profile = profile, SIZE_PROFILES[profile]
        self.menu_size = int(menu_size)
        self.repairs = max(0, int(repairs))

    def params(self) -> dict[str, Any]:
        return {"policy": self.policy_name, "profile": self.profile_name, "menu_size": self.menu_size,
                "repairs": self.repairs}

    def compose(self, seeds: list[Seed], bucket: str, index: int, seed: int = 0) -> ComposedTask:
        rng = random.Random(f"{seed}:{index}:{bucket}")
        hidden = bucket == "transformers"
        pool = [s for s in seeds if s.source.startswith("transformers") == hidden]
        if not pool:
            raise ComposeError(f"no {'transformers' if hidden else 'torch'} seeds")
        count = 1 if hidden else int(bucket.split("#")[1])
        menu = rng.sample(pool, min(len(pool), max(self.menu_size, count)))
        shape = sample_shape(3 if hidden else menu[0].rank, self.profile, rng, hidden=hidden)
        messages = [Message(role="system", content=SYSTEM),
                    Message(role="user", content=prompt(menu, count, shape, self.profile, rng))]
        errors: list[str] = []
        for attempt in range(self.repairs + 1):
            try:
                reply = self.policy.act(messages, [])
            except Exception as exc:  # noqa: BLE001 - a policy failure is this item's reason
                raise ComposeError(f"policy failed ({type(exc).__name__})") from None
            text = answer_text(reply)
            try:
                code = extract_code(text)
                out_shape = validate(code)
                break
            except ComposeError as exc:
                errors.append(str(exc))
                if attempt == self.repairs:
                    raise ComposeError("; then ".join(errors)) from None
                messages = [*messages, Message(role="assistant", content=text),
                            Message(role="user", content=repair_prompt(str(exc)))]
        ops = ops_used(code, seeds) or ["unknown"]
        source = next((s.source for s in menu if s.op in ops), bucket) if hidden else bucket
        return ComposedTask(id=f"{bucket}:{index}", code=code, ops=ops, data_source=source, composer="llm",
                         made_by={"policy": self.policy_name, "menu": [s.op for s in menu], "asked_ops": count,
                                  "output_shape": out_shape, "profile": self.profile_name,
                                  "repaired": errors})


@hookimpl
def kag_register_composers(register) -> None:
    register("llm", LLMComposer)
