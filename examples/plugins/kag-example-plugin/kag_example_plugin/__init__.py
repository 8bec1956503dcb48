"""A third-party kag plugin, written only against ``kag.plugin``: three kinds through one ``kag`` entry point.

- reward ``example``: +1 for a correct solution, 0 otherwise;
- guard ``no-printf``: a static guard that flags ``printf`` in a kernel (it serialises a GPU's threads
  and floods the log);
- tool ``count_lines``: tells the agent how many lines each of the workspace's kernel files has.
"""

from __future__ import annotations

from typing import Any

from kag.plugin import (EvalResult, GuardBase, Solution, Task, Tool, ToolContext, ToolError, ToolOutput, Violation,
                        hookimpl, solution_files, strip_cpp_comments)


class ExampleReward:
    """+1 for any correct solution, 0 otherwise: a reward shaped however you like."""

    name = "example"

    def __call__(self, result: EvalResult) -> float:
        return 1.0 if result.ok else 0.0


class NoPrintfGuard(GuardBase):
    """Flags ``printf`` in a kernel source (comments aside), before anything is built."""

    name = "no-printf"

    def check_solution(self, solution: Solution, task: Task) -> list[Violation]:
        return [self.violation(f.path, "printf in a kernel") for f in solution_files(solution)
                if f.is_cpp and "printf(" in strip_cpp_comments(f.text)]


class CountLinesTool(Tool):
    """How many lines each file under ``kernels/`` has (a tool the model may call)."""

    name = "count_lines"
    description = "Count the lines of each file under kernels/ in the workspace."
    parameters: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        found = ctx.sandbox.run("wc -l kernels/*", timeout=10)
        if found.returncode != 0:
            raise ToolError(f"no kernel files to count: {(found.stdout + found.stderr).strip()[:200]}")
        return ToolOutput(found.stdout.strip())


@hookimpl
def kag_register_rewards(register):
    register("example", ExampleReward)


@hookimpl
def kag_register_guards(register):
    register("no-printf", NoPrintfGuard)


@hookimpl
def kag_register_tools(register):
    register("count_lines", CountLinesTool)
