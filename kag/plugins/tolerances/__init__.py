"""Correctness tolerance policies (kind ``tolerance``)."""
