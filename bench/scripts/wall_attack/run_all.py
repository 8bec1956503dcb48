"""Run every route (r01..r17) and print, per route, which targets ended with the chosen bytes in
them. Run from this folder, kag installed: ./build.sh && python run_all.py"""
import glob, json, os, subprocess, sys
HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.environ.get("KAG_BENCH_OUT") or os.path.join(HERE, "..", "..", "out", "wall_attack")  # as harness.py
for script in sorted(glob.glob(os.path.join(HERE, "r[0-9][0-9]_*.py"))):
    name = os.path.basename(script)[:-3]
    p = subprocess.run([sys.executable, script], capture_output=True, text=True, cwd=HERE)
    if name == "r16_real_library":
        for line in p.stdout.splitlines():
            row = json.loads(line)
            print(f"{name}: sealed={row.get('sealed')} filter={row.get('filter')} byte after attacks={row.get('after-attacks')} :: {row.get('outcome', row.get('error'))}")
        continue
    rows = json.load(open(os.path.join(RESULTS, f"{name}.json")))
    bad = [f"{r['target']}/{r['filter']}{'' if r.get('confined', True) else '/unconfined'}" for r in rows
           if r.get("state") == "CHOSEN BYTES WRITTEN"]
    walls = [b for b in bad if b.startswith("wall-ro/") or b.startswith("wall-none/")]
    errs = [r for r in rows if "error" in r]
    print(f"{name}: chosen bytes in: {', '.join(bad) or 'none'}  | sealed wall defeated: {'YES ' + str(walls) if walls else 'no'}"
          + (f"  | {len(errs)} harness errors" if errs else ""))
