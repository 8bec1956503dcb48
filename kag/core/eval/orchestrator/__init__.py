"""The orchestrator (trusted side): the process that runs ``evaluate`` (``kag score``, a pool worker,
``kag serve``): guards, build, the GPU pool and host slots, the baseline cache, the judge's handle."""
