"""``kag serve`` (trusted side): the evaluator as a long-lived service over a Unix socket and HTTP,
and evaluations asked of an executor's workers."""
