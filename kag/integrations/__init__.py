"""Files that other RL frameworks load by path (OpenRLHF's ``--remote_rm_url FILE.py``); the
adapters themselves are in ``kag.reward``."""
