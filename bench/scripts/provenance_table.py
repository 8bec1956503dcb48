"""Markdown table of the CPU provenance's raw counts per evaluation (the rows of adversarial_no_static.json that
bench/scripts/adversarial.py writes: each row's cpu_samples).

    python bench/scripts/provenance_table.py OUT/adversarial_no_static.json [...] > table.md
"""
import json, sys
rows = []
for f in sys.argv[1:]:
    rows += json.load(open(f))["rows"]
print("| case | honest | verdict | stops | windows | solution | torch | foreign | moments (outside) | first stops (outside) | threads (pooled) | PyTorch thread samples at first stops | candidate ms | eager ms | PyTorch ms a call | x eager | x eager, lower | first stops: x eager | first: lower |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    s = r.get("cpu_samples")
    got = r["got"].replace("|", "/")[:70]
    if not s:
        print(f"| {r['case']} | {r['honest']} | {got} | (not sampled: caught before timing) |" + " |" * 15)
        continue
    t = s.get("times_ms", {})
    def g(k):
        v = s.get(k)
        return "" if v is None else v
    print(f"| {r['case']} | {r['honest']} | {got} | {s['samples']} | {g('busy_windows') or s['windows']} | {s['solution']} | {s['torch']} | {s['foreign']} | "
          f"{s['moments']} ({s['moments_outside']}) | {s['first_stops']} ({s['first_stops_outside']}) | {s['threads']} ({g('pooled_threads')}) | "
          f"{g('first_outside_thread_samples')} | {t.get('candidate', 0):.3f} | {t.get('eager', 0):.3f} | {g('outside_ms_per_call')} | "
          f"{g('outside_of_eager')} | {g('outside_of_eager_lower')} | {g('first_outside_of_eager')} | {g('first_outside_of_eager_lower')} |")
