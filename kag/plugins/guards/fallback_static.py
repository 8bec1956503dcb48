"""Static half of ``no-torch-fallback`` (split out of torch_fallback.py for length; not a plugin).

model_new.py (AST): ``import model``/``from model import``, ``class ModelNew(Model)``, try/except
around extension calls, ``torch.compile``/``torch.jit``, torch/F/nn calls and Tensor compute
methods outside ``__init__``, calls of PyTorch layers built in ``__init__``, the ``@`` operator,
numpy round-trips. kernels/* (regex, comments blanked): ``torch::``/``at::`` compute calls,
Tensor compute methods, calls back into Python, and the cuBLAS/cuDNN policy.
"""

from __future__ import annotations

import ast
import re

from kag.plugin import (GuardOptions, Solution, SourceFile, dotted_name, import_aliases, parse_python, regex_hits,
                        resolve, solution_files)

# torch.* functions that allocate, view or query (same policy as the runtime allow-list).
ALLOWED_TORCH_CALLS = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "is_tensor", "numel", "Size", "device", "dtype", "no_grad", "inference_mode",
    "enable_grad", "set_grad_enabled", "is_grad_enabled", "get_default_dtype", "finfo", "iinfo",
    "broadcast_shapes", "is_floating_point", "promote_types", "reshape", "flatten", "unflatten", "permute",
    "transpose", "squeeze", "unsqueeze", "t", "narrow", "split", "chunk", "unbind", "movedim", "select",
    "as_strided", "view_as_real", "view_as_complex", "manual_seed", "Generator",
    "cuda.current_stream", "cuda.current_device", "cuda.is_available", "cuda.get_device_properties",
    "cuda.get_device_capability", "cuda.device", "cuda.device_count", "nn.Parameter", "nn.Module",
    "nn.ParameterList", "nn.ModuleList", "nn.ParameterDict", "nn.ModuleDict", "nn.Identity", "Tensor",
    "jit.is_scripting", "compiler.is_compiling",
})
# nn layer classes may be built in __init__ to hold the weights (names must match Model's).
# Tensor methods that compute (receivers other than cuda_extension and non-torch modules).
COMPUTE_METHODS = frozenset({
    "abs", "abs_", "add", "add_", "addmm", "addmv", "all", "any", "argmax", "argmin", "baddbmm", "bmm",
    "ceil", "clamp", "clamp_", "clamp_min", "clamp_max", "clip", "clone", "copy_", "cos", "cosh", "cross",
    "cumprod", "cumsum", "div", "div_", "dot", "einsum", "eq", "erf", "exp", "exp_", "expm1", "flip",
    "floor", "gather", "ge", "gelu", "gt", "hardtanh", "index_select", "le", "lerp", "log", "log1p",
    "log_softmax", "logsumexp", "lt", "masked_fill", "matmul", "max", "maximum", "mean", "min", "minimum",
    "mm", "mul", "mul_", "mv", "ne", "neg", "norm", "pow", "prod", "reciprocal", "relu", "relu_", "repeat",
    "repeat_interleave", "roll", "round", "rsqrt", "scatter", "scatter_add", "sigmoid", "sigmoid_", "sign",
    "sin", "sinh", "softmax", "sort", "sqrt", "square", "std", "sub", "sub_", "sum", "tanh", "tanh_", "tile",
    "topk", "tril", "triu", "var", "where", "half", "bfloat16", "double", "numpy", "tolist", "item",
    "conv1d", "conv2d", "conv3d", "linear", "cumsum_", "normalize", "dropout", "silu", "softplus",
})
NON_TORCH_MODULES = frozenset({"math", "os", "sys", "time", "random", "functools", "itertools", "typing",
                               "collections", "cuda_extension", "operator", "builtins", "str", "dict", "list"})

# C++: torch::/at:: names that allocate, describe or give library handles; everything else called
# through those namespaces is compute.
ALLOWED_CPP = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "from_blob", "TensorOptions", "dtype", "device", "Device", "Scalar", "IntArrayRef", "Tensor", "ScalarType",
    "elementSize", "toString", "typeMetaToScalarType", "kFloat", "kHalf", "kBFloat16",
    "cuda::getCurrentCUDAStream", "cuda::getDefaultCUDAStream", "cuda::getCurrentCUDABlasHandle",
    "cuda::getCurrentCUDABlasLtHandle", "cuda::getCurrentDeviceProperties", "cuda::getDeviceProperties",
    "cuda::current_device", "cuda::device_count", "cuda::CUDAGuard", "cuda::OptionalCUDAGuard",
    "cuda::CUDAStreamGuard", "native::getCudnnHandle", "cuda::getCUDABlasLtWorkspace",
    "cuda::getChosenWorkspaceSize", "cuda::detail::getCUDAHooks", "globalContext", "OptionalDeviceGuard",
    "DeviceGuard", "checkAllSameGPU", "checkContiguous", "TensorArg", "CheckedFrom",
})
CPP_NS_CALL = re.compile(r"\b(?:torch|at)::((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*(?:<[^;(){}]*>)?\s*\(")
CPP_METHOD_CALL = re.compile(
    r"[\w\)\]]\s*(?:\.|->)\s*(matmul|mm|bmm|addmm|relu|relu_|sigmoid|tanh|softmax|log_softmax|conv1d|conv2d|"
    r"conv3d|linear|sum|mean|exp|log|clone|copy_|add|add_|sub|mul|mul_|div|div_|clamp|clamp_min|clamp_max|pow|"
    r"sqrt|max|min|argmax|topk|sort|gelu|where|index_select|gather|cumsum|norm|to|half|bfloat16|float)\s*\(")
CPP_PY_CALLBACK = re.compile(r"\b(?:py|pybind11)::module_?::import\s*\(|\bPyImport_\w+|\bPyRun_\w+|\bPyObject_Call\w*")
CUBLAS = re.compile(r"\bcublas\w*|cublas(?:Lt)?\.h", re.IGNORECASE)
CUDNN = re.compile(r"\bcudnn\w*|cudnn\.h", re.IGNORECASE)


def fallback_findings(solution: Solution, options: GuardOptions) -> list[tuple[str, str]]:
    """(where, what) for every static fallback finding."""
    found: list[tuple[str, str]] = []
    for file in solution_files(solution):
        if file.is_python:
            found += _python_findings(file)
        elif file.is_cpp:
            found += _cpp_findings(file, options)
    return found


def _python_findings(file: SourceFile) -> list[tuple[str, str]]:
    tree = parse_python(file.text)
    if tree is None:
        return []
    aliases = import_aliases(tree)
    found: list[tuple[str, str]] = []

    def at(node: ast.AST) -> str:
        return f"{file.path}:{getattr(node, 'lineno', 0)}"

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "model" or a.name.startswith("model."):
                    found.append((at(node), "imports the reference (import model): compute it yourself"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "model":
            found.append((at(node), "imports the reference (from model import ...): compute it yourself"))
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = dotted_name(base)
                if name and (name == "Model" or name.endswith(".Model")):
                    found.append((at(node), f"class {node.name} subclasses the reference Model"))
        elif isinstance(node, ast.Try):
            body = ast.dump(ast.Module(body=node.body, type_ignores=[]))
            if "cuda_extension" in body or any(_calls_torch(h, aliases) for h in node.handlers):
                found.append((at(node), "try/except around the extension call (a fallback path); "
                                        "let errors propagate"))
        elif isinstance(node, ast.Call):
            full = resolve(dotted_name(node.func), aliases) or ""
            if full.startswith(("torch.compile", "torch.jit.script", "torch.jit.trace", "torch._dynamo")):
                found.append((at(node), f"{full}: torch.compile/TorchScript generates the kernels, not you"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mod = node.names[0].name if isinstance(node, ast.Import) else (node.module or "")
            if mod.split(".")[0] in ("numpy", "scipy", "jax", "cupy", "triton", "numba"):
                found.append((at(node), f"imports {mod}: compute must be in your kernels/"))
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        found += _method_findings(file, cls, aliases)
    for fn in [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        found += _body_findings(file, fn, aliases, layers={})
    return found


def _calls_torch(node: ast.AST, aliases: dict[str, str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            full = resolve(dotted_name(sub.func), aliases) or ""
            if full.startswith("torch.") or (isinstance(sub.func, ast.Attribute) and sub.func.attr in COMPUTE_METHODS):
                return True
    return False


def _method_findings(file: SourceFile, cls: ast.ClassDef, aliases: dict[str, str]) -> list[tuple[str, str]]:
    layers: dict[str, str] = {}
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    ctor = resolve(dotted_name(node.value.func), aliases) or ""
                    if ctor.startswith("torch.nn.") and ctor[len("torch."):] not in ALLOWED_TORCH_CALLS:
                        for target in node.targets:
                            name = dotted_name(target)
                            if name and name.startswith("self."):
                                layers[name] = ctor
    found: list[tuple[str, str]] = []
    for fn in cls.body:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name != "__init__":
            found += _body_findings(file, fn, aliases, layers)
    return found


def _body_findings(file: SourceFile, fn: ast.AST, aliases: dict[str, str],
                   layers: dict[str, str]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for node in ast.walk(fn):
        where = f"{file.path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            found.append((where, "the @ operator runs a PyTorch matmul"))
        if not isinstance(node, ast.Call):
            continue
        raw = dotted_name(node.func)
        full = resolve(raw, aliases)
        if raw in layers:
            found.append((where, f"calls the PyTorch layer {raw} ({layers[raw]}) instead of a kernel"))
        elif full and full.startswith("torch."):
            short = full[len("torch."):]
            if short.startswith("nn.functional.") or short.startswith("nn.") and short not in ALLOWED_TORCH_CALLS:
                found.append((where, f"{full}: PyTorch compute in model_new.py (write a kernel)"))
            elif short not in ALLOWED_TORCH_CALLS and not short.startswith(("compile", "jit", "_dynamo", "cuda.",
                                                                             "backends.")):
                found.append((where, f"{full}: PyTorch compute in model_new.py (write a kernel)"))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in COMPUTE_METHODS:
            root = raw.split(".")[0] if raw else None
            own_method = raw is not None and raw.count(".") == 1 and root == "self"
            module = (resolve(root, aliases) or "").split(".")[0] if root else None
            if not own_method and (root is None or (root not in NON_TORCH_MODULES and module not in NON_TORCH_MODULES)):
                found.append((where, f".{node.func.attr}(): a PyTorch Tensor method computes here (write a kernel)"))
    return found


def _cpp_findings(file: SourceFile, options: GuardOptions) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for line, m in regex_hits(file, CPP_NS_CALL):
        name = m.group(1)
        if name not in ALLOWED_CPP and not name.startswith("k"):
            found.append((f"{file.path}:{line}", f"{m.group(0).rstrip('( ')}: a PyTorch op called from C++ "
                                                 f"(only allocation and metadata are allowed)"))
    if file.path.endswith((".cpp", ".cc", ".cxx", ".h", ".hpp")):
        for line, m in regex_hits(file, CPP_METHOD_CALL):
            found.append((f"{file.path}:{line}", f".{m.group(1)}(): a Tensor method computes in C++ (use a kernel)"))
    for line, m in regex_hits(file, CPP_PY_CALLBACK):
        found.append((f"{file.path}:{line}", f"{m.group(0).rstrip('( ')}: calls back into Python from C++"))
    if not options.allow_cublas:
        for line, m in regex_hits(file, CUBLAS, keep_strings=True):
            found.append((f"{file.path}:{line}", f"{m.group(0)}: cuBLAS is not allowed by this policy"))
    if not options.allow_cudnn:
        for line, m in regex_hits(file, CUDNN, keep_strings=True):
            found.append((f"{file.path}:{line}", f"{m.group(0)}: cuDNN is not allowed by this policy"))
    return found
