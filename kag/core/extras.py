"""Optional dependencies: which extra of kag brings each, and the one-line message when it is missing.

Neutral (no solution code here). Plugins call ``missing(...)`` from ``check_available`` (so
``kag plugins`` marks what cannot run and why) and before importing a heavy library, so a missing
optional dependency reads "install kag[train]" (or the extra that brings it), never a traceback.
"""

from __future__ import annotations

import importlib

# import name -> the extra of kag's pyproject.toml that installs it
EXTRAS = {"vllm": "rl", "deepspeed": "rl", "transformers": "train", "tensorboard": "train", "docker": "docker",
          "cupy": "cupy"}


def install_hint(module: str) -> str:
    extra = EXTRAS.get(module)
    return f"install kag[{extra}] (pip install 'kag[{extra}]')" if extra else f"pip install {module}"


def missing(module: str, needed_by: str) -> str | None:
    """None when ``module`` imports; else one line: what needs it and which extra to install."""
    try:
        importlib.import_module(module)
    except ImportError:
        return f"{needed_by} needs {module}, which is not installed: {install_hint(module)}"
    except Exception as exc:  # installed but broken (e.g. a wheel built for another torch)
        return f"{needed_by} needs {module}, which is installed but fails to import: {type(exc).__name__}: {exc}"
    return None
