"""Draw a `kag eval --timeline` file: one row per worker (an episode and its judge), a bar per phase.

    python3 bench/scripts/timeline_draw.py RUN/timeline.jsonl [--png RUN/timeline.png]

(``bench/scripts/scale.py --draw FILE`` does the same.) Colours by kind of phase: the policy, the agent's
tools, builds and compiles, waits for a host-wide slot or lock (where a run is serialised),
and the judge's reference, checks, baselines and timed calls. Prints the seconds per phase.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

KINDS = [("wait", "tab:red"), ("policy", "tab:purple"), ("tool", "tab:gray"), ("request", "lightgray"),
         ("build", "tab:olive"), ("compile", "tab:orange"), ("link", "tab:orange"), ("baselines", "tab:cyan"),
         ("timing", "tab:green"), ("timed", "tab:green"), ("check", "tab:blue"), ("reference", "tab:brown"),
         ("torch", "tab:pink"), ("spec received", "whitesmoke")]


def colour(label: str) -> str:
    low = label.lower()
    return next((c for key, c in KINDS if key in low), "silver")


def draw(path: str, png: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kag.core.timeline import phases, read, summarize

    rows = read(path)
    spans = phases(rows)
    if not spans:
        raise SystemExit(f"{path}: no spans (was the run made with kag eval --timeline?)")
    t0 = min(r["start"] for r in spans)
    lanes = sorted({r["lane"] for r in spans}, key=lambda lane: (lane.replace(" judge", ""), lane))
    fig, ax = plt.subplots(figsize=(14, 0.45 * len(lanes) + 1.5))
    for y, lane in enumerate(lanes):
        mine = [r for r in spans if r["lane"] == lane]
        # nested spans (a build holds its compiles): the longer drawn first, thinner bars on top
        for r in sorted(mine, key=lambda r: -(r["end"] - r["start"])):
            height = 0.8 if not r.get("point") and r["label"] in ("judge", "build") or r["label"].startswith(
                "request") else 0.5
            ax.broken_barh([(r["start"] - t0, r["end"] - r["start"])], (y - height / 2, height),
                           facecolors=colour(r["label"]), edgecolor="none")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([lane[-40:] for lane in lanes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first phase")
    handles = [matplotlib.patches.Patch(color=c, label=k) for k, c in KINDS]
    ax.legend(handles=handles, fontsize=7, ncol=7, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    ax.set_title(f"{Path(path).name}: {len(lanes)} lanes, {max(r['end'] for r in spans) - t0:.1f} s")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    total = summarize(rows)
    lines = ["| phase | seconds (summed over lanes) | count | mean s |", "|---|---|---|---|"]
    lines += [f"| {k} | {v['seconds']:.1f} | {v['count']} | {v['seconds'] / max(v['count'], 1):.3f} |"
              for k, v in total.items()]
    return "\n".join(lines) + "\n" + episodes_line(spans)


def episodes_line(spans: list[dict]) -> str:
    """An episode's span (its first phase to its last, its judges' lane included) against the run's
    wall: with W workers, wall x W - the spans' sum is the time workers sat idle (the run's tail)."""
    episodes: dict[str, list[float]] = {}
    for r in spans:
        lane = r["lane"].removesuffix(" judge")
        if lane.startswith(("judge[", "main[")):
            continue  # a judge's own process, the driver: not an episode
        first_last = episodes.setdefault(lane, [r["start"], r["end"]])
        first_last[0], first_last[1] = min(first_last[0], r["start"]), max(first_last[1], r["end"])
    if not episodes:
        return ""
    lengths = [end - start for start, end in episodes.values()]
    wall = max(r["end"] for r in spans) - min(r["start"] for r in spans)
    return (f"\nepisodes: {len(lengths)}, mean span {sum(lengths) / len(lengths):.2f} s, spans summed "
            f"{sum(lengths):.1f} s, wall {wall:.1f} s\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("timeline")
    ap.add_argument("--png", help="the picture (default: next to the file, .png)")
    args = ap.parse_args()
    png = args.png or str(Path(args.timeline).with_suffix(".png"))
    print(draw(args.timeline, png))
    print(f"picture: {png}")


if __name__ == "__main__":
    main()
