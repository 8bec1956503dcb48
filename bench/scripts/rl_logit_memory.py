"""Peak host memory of one PPO actor micro-batch (forward + backward of the token log-probs with the
entropy logged), whole logits vs chunks, for a random-initialised model of Qwen2's vocabulary.

Each measurement runs in a fresh process (its peak RSS is its own). No weights are downloaded: the
model is built from a Qwen2 config with the real vocabulary (151,936) and a small body, so the
logits dominate as they do at long context in a real model.

    python bench/scripts/rl_logit_memory.py --tokens 2048 4096 --chunks 0 2048
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, torch
from transformers import Qwen2Config, Qwen2ForCausalLM
from kag.plugins.algorithms.ppo.models import token_logprobs
tokens, chunk, hidden, layers = (int(a) for a in sys.argv[1:5])
cfg = Qwen2Config(vocab_size=151936, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                  num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=tokens + 1, tie_word_embeddings=True)
torch.manual_seed(0)
model = Qwen2ForCausalLM(cfg)
ids = torch.randint(0, cfg.vocab_size, (1, tokens))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
logp, ent = token_logprobs(model, ids, torch.ones_like(ids), with_entropy=True, chunk_tokens=chunk)
logp.sum().backward()
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"tokens": tokens, "chunk": chunk, "model_mb": base / 1024, "peak_mb": peak / 1024,
                  "step_mb": (peak - base) / 1024, "seconds": dt, "logp_sum": float(logp.sum())}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[2048, 4096])
    ap.add_argument("--chunks", type=int, nargs="+", default=[0, 2048])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args()
    print("| tokens | logits | peak RSS (MB) | of which the step (MB) | forward+backward (s) |")
    print("|---|---|---|---|---|")
    for tokens in args.tokens:
        for chunk in args.chunks:
            out = subprocess.run([sys.executable, "-c", CHILD, str(tokens), str(chunk), str(args.hidden),
                                  str(args.layers)], capture_output=True, text=True)
            if out.returncode:
                print(f"| {tokens} | {chunk or 'whole'} | failed (rc {out.returncode}): {out.stderr.strip()[-200:]} | | |")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            label = "whole" if not chunk else f"chunks of {chunk}"
            print(f"| {tokens} | {label} | {r['peak_mb']:.0f} | {r['step_mb']:.0f} | {r['seconds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
