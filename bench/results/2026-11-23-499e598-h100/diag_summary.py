import json, statistics, collections
rows=[json.loads(l) for l in open('/dev/shm/kag_diag.jsonl')]
g=collections.defaultdict(list)
for r in rows: g[(r['v'], r['n'], r['ref'])].append(r)
print(f"{'variant':>16} {'numel':>10} {'ref':>5} {'calls':>5} {'own ms':>8} {'launch ms':>9} {'gpu ev ms':>9}")
for k,rs in g.items():
    rs=rs[-120:]
    med=lambda key: statistics.median(x[key] for x in rs)
    print(f"{k[0]:>16} {k[1]:>10} {str(k[2]):>5} {len(rs):>5} {med('own'):8.4f} {med('launch'):9.4f} {med('gpu'):9.4f}")
