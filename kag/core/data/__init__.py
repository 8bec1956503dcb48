"""The ``kag data`` pipeline's shared records and its resumable stages."""
