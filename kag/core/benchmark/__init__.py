"""``kag eval``: many episodes over a dataset, resumable, and the paper's table."""
