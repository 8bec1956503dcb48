"""One corpus case through the real evaluator with every static guard off, its verdict, the
candidate's captured output and its confinement printed whole (for a crash's whereabouts).

    python bench/scripts/one_case_debug.py CASE [CASE...]
"""
import sys

sys.path.insert(0, ".")
from tests.adversarial.cases import cases  # noqa: E402
from tests.adversarial.conftest import guard_plugins  # noqa: E402
from tests.adversarial.runner import run_case  # noqa: E402

for name in sys.argv[1:]:
    case = next(c for c in cases("cuda") if c.name == name)
    r = run_case(case, guard_plugins(), static_guards=False)
    print("===", name, r.error_kind, (r.error or "")[:400])
    print("OUTPUT:", str(r.metadata.get("candidate_output", ""))[-4000:])
