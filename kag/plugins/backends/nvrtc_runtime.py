"""Launchers for the nvrtc backend's kernels, imported by the generated ``cuda_extension.py``.

Untrusted side: this runs in the candidate process, as the solution's own module does. It loads
each CUBIN with cupy's driver-API module (``cuModuleLoadData``: no compiler at run time) and wraps
each kernel so model_new.py calls ``cuda_extension.relu_kernel(grid, block, x, y, n)`` with torch
tensors, on torch's current stream. Nothing here is believed by the judge: the kernels still go
through the checks, the judge's clock and the provenance guard like any other.
"""

from __future__ import annotations

import base64
from typing import Any

SCALARS = {
    "bool": "bool_", "char": "int8", "signed char": "int8", "unsigned char": "uint8", "short": "int16",
    "unsigned short": "uint16", "int": "int32", "signed": "int32", "signed int": "int32", "unsigned": "uint32",
    "unsigned int": "uint32", "long": "int64", "long int": "int64", "unsigned long": "uint64",
    "long long": "int64", "long long int": "int64", "unsigned long long": "uint64", "size_t": "uint64",
    "int8_t": "int8", "uint8_t": "uint8", "int16_t": "int16", "uint16_t": "uint16", "int32_t": "int32",
    "uint32_t": "uint32", "int64_t": "int64", "uint64_t": "uint64", "float": "float32", "double": "float64",
    "__half": "float16", "half": "float16",
}


class NvrtcKernel:
    """One ``extern "C" __global__`` function: converts each argument to its parameter's C type."""

    def __init__(self, name: str, function: Any, params: list[str]) -> None:
        import numpy

        self.name = name
        self._function = function
        self.params = params
        self._convert = [self._converter(numpy, i, p) for i, p in enumerate(params)]

    def _converter(self, numpy: Any, index: int, param: str) -> Any:
        if param.endswith("*"):
            def pointer(value: Any) -> Any:
                if value is None:
                    return numpy.uint64(0)
                if not hasattr(value, "data_ptr") or not getattr(value, "is_cuda", False):
                    raise TypeError(f"{self.name}: argument {index} ({param}) takes a CUDA tensor, "
                                    f"got {type(value).__name__}")
                return numpy.uint64(value.data_ptr())
            return pointer
        dtype = SCALARS.get(param)
        if dtype is None:
            def unsupported(value: Any) -> Any:
                raise TypeError(f"{self.name}: parameter {index} has type {param!r}, which the nvrtc backend "
                                f"cannot pass; use a pointer or one of: {', '.join(sorted(SCALARS))}")
            return unsupported
        cast = getattr(numpy, dtype)
        return lambda value: cast(value)

    def __call__(self, grid: Any, block: Any, *args: Any, shared_mem: int = 0) -> None:
        import torch

        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments ({', '.join(self.params)}), "
                            f"got {len(args)}")
        grid = tuple(grid) if isinstance(grid, (tuple, list)) else (int(grid),)
        block = tuple(block) if isinstance(block, (tuple, list)) else (int(block),)
        values = tuple(convert(value) for convert, value in zip(self._convert, args))
        stream = _stream(torch.cuda.current_stream().cuda_stream)
        self._function(grid, block, values, shared_mem=shared_mem, stream=stream)

    def __repr__(self) -> str:
        return f"<nvrtc kernel {self.name}({', '.join(self.params)})>"


_STREAMS: dict[int, Any] = {}


def _stream(handle: int) -> Any:
    import cupy

    stream = _STREAMS.get(handle)
    if stream is None:
        stream = _STREAMS[handle] = cupy.cuda.ExternalStream(handle)
    return stream


def load_kernels(objects: list[dict[str, Any]]) -> dict[str, NvrtcKernel]:
    """Every kernel of every object, by name (the module's attributes)."""
    import torch
    from cupy.cuda.function import Module

    torch.cuda.current_stream()  # torch's context is current before cupy loads into it
    kernels: dict[str, NvrtcKernel] = {}
    for obj in objects:
        module = Module()
        module.load(base64.b64decode(obj["cubin"]))
        for name, params in obj["kernels"].items():
            kernels[name] = NvrtcKernel(name, module.get_function(name), list(params))
    return kernels
