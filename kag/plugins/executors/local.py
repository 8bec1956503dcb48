"""The ``local`` executor (the default): jobs in threads of this process, as ``kag eval`` always
ran them. Trusted side: each job runs the trusted evaluator, candidates in their own processes."""

from __future__ import annotations

from kag.plugin import LocalExecutor, hookimpl


@hookimpl
def kag_register_executors(register) -> None:
    register("local", LocalExecutor)
