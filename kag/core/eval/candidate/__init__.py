"""The untrusted harness: what runs in the candidate process around the solution's ``ModelNew``.

Untrusted side: a solution can patch anything here, so nothing the judge believes comes from it.
From kag.core.eval this package imports only kag.core.eval.boundary (tests/core/eval/test_eval_layout.py).
"""
