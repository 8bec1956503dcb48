"""``precision``: lowering precision (fp16/bf16/TF32) is a policy choice.

Under ``tolerance="cuda-agent"`` (the paper: mixed precision is an allowed optimisation at 1e-2)
nothing is reported; under ``strict`` an fp32 task computed in half types or TF32 is a violation.
A task whose own code uses half types (``torch.float16``/``half``/``bfloat16``) may use them.
Static only (feedback): at run time the strict policy's tolerances themselves reject the error that
half types or TF32 bring to an fp32 task.
"""

from __future__ import annotations

import re

from kag.plugin import GuardBase, Solution, Task, Violation, hookimpl, regex_hits, solution_files

CPP_LOW = re.compile(r"\b(__half2?|half2|__nv_bfloat16\w*|__float2half\w*|__half2float|__float2bfloat16\w*|"
                     r"__bfloat162float|__hmul\w*|__hadd\w*|__hfma\w*|cuda_fp16\.h|cuda_bf16\.h|at::Half|at::BFloat16|"
                     r"c10::Half|c10::BFloat16|kHalf|kBFloat16|kFloat16|wmma::precision::tf32|"
                     r"CUBLAS_COMPUTE_32F_FAST_\w+|CUBLAS_TF32_TENSOR_OP_MATH|CUBLAS_TENSOR_OP_MATH|CUDA_R_16F|CUDA_R_16BF|"
                     r"CUDNN_DATA_HALF|CUDNN_DATA_BFLOAT16|CUDNN_TENSOR_OP_MATH\w*|\w*tf32\w*|f16x2|\.f16\b|\.bf16\b)",
                     re.IGNORECASE)
PY_LOW = re.compile(r"\.half\(\)|\.bfloat16\(\)|\btorch\.(float16|half|bfloat16)\b|allow_tf32|"
                    r"set_float32_matmul_precision|reduced_precision_reduction|autocast|\bfp16\b|\bbf16\b")
TASK_LOW = re.compile(r"torch\.(float16|half|bfloat16)\b|\.half\(\)|\.bfloat16\(\)")


def python_code_only(text: str) -> str:
    """The source with comments and string literals (docstrings) blanked, line numbers kept."""
    import io
    import tokenize

    lines = text.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    for tok in reversed(tokens):
        if tok.type in (tokenize.STRING, tokenize.COMMENT):
            (r0, c0), (r1, c1) = tok.start, tok.end
            for r in range(r0, r1 + 1):
                line = lines[r - 1]
                a = c0 if r == r0 else 0
                b = c1 if r == r1 else len(line.rstrip("\n"))
                lines[r - 1] = line[:a] + " " * (b - a) + line[b:]
    return "".join(lines)


class PrecisionPolicy(GuardBase):
    name = "precision"

    def check_solution(self, solution: Solution, task: Task) -> list[Violation]:
        if self.options.tolerance != "strict" or TASK_LOW.search(task.code or ""):
            return []
        found: list[Violation] = []
        for file in solution_files(solution):
            if file.is_cpp:
                hits = [(line, m.group(0)) for line, m in regex_hits(file, CPP_LOW)]
            elif file.is_python:
                text = python_code_only(file.text)
                hits = [(text.count("\n", 0, m.start()) + 1, m.group(0))
                        for m in PY_LOW.finditer(text)]
            else:
                continue
            seen: set[str] = set()
            for line, what in hits:
                if what in seen:
                    continue
                seen.add(what)
                found.append(self.violation(f"{file.path}:{line}", f"{what}: reduced precision in an fp32 task "
                                            "is not allowed under the strict tolerance policy"))
        return found


@hookimpl
def kag_register_guards(register) -> None:
    register("precision", PrecisionPolicy)
