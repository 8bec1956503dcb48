"""Executors: where ``kag eval``'s episodes run (``local`` threads, a ``ray`` cluster)."""
