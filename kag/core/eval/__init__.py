"""The trusted evaluator: one solution in, one verdict out (guards, build, judge, candidate, timing, reward)."""
