"""OpenRLHF's reward file: ``--remote_rm_url`` this file's path (``kag.reward.OPENRLHF_FILE``).

OpenRLHF loads it with ``importlib`` and calls ``reward_func(queries, prompts, labels)``; the
labels (``--label_key``) are the tasks. Options: ``$KAG_REWARD_OPTIONS`` (JSON), e.g.
``{"backend": "cuda", "num_timed": 50}``. Trusted side: scores through kag.reward.
"""

from kag.reward import openrlhf_rewards


def reward_func(queries, prompts, labels):
    return openrlhf_rewards(queries, prompts, labels)
