"""Trajectories on disk: a per-episode turn log written as it happens, one JSONL line per episode.

Layout under an output directory::

    episodes/<episode_id>.turns.jsonl   one Turn per line, appended after each turn
    trajectories.jsonl                  one finished Trajectory per line

Appends go through ``kag.core.records.append_jsonl`` (an exclusive ``flock``, a partial last line
left by a killed writer cut off first), so concurrent episodes (threads or processes) and resumed
runs keep the files line-valid.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Iterator

from kag.core.records import EvalResult, Message, Trajectory, Turn, append_jsonl, from_dict, iter_jsonl

TRAJECTORIES_FILE = "trajectories.jsonl"
EPISODES_DIR = "episodes"


def _safe_id(episode_id: str) -> str:
    if not episode_id or "/" in episode_id or episode_id in (".", "..") or "\0" in episode_id:
        raise ValueError(f"episode id {episode_id!r} cannot be used as a file name")
    return episode_id


class TrajectoryWriter:
    """Writes turns as they happen and finished trajectories as they end."""

    def __init__(self, out_dir: str | Path) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / TRAJECTORIES_FILE
        self._lock = threading.Lock()

    def turns_path(self, episode_id: str) -> Path:
        return self.out_dir / EPISODES_DIR / f"{_safe_id(episode_id)}.turns.jsonl"

    def append_turn(self, episode_id: str, turn: Turn) -> None:
        with self._lock:
            append_jsonl(self.turns_path(episode_id), turn)

    def finish(self, trajectory: Trajectory) -> None:
        """Record a finished episode (one line of ``trajectories.jsonl``)."""
        _safe_id(trajectory.episode_id)
        with self._lock:
            append_jsonl(self.path, trajectory)

    def finished_ids(self) -> set[str]:
        """Episode ids already in ``trajectories.jsonl`` (a resumed run skips them)."""
        if not self.path.exists():
            return set()
        return {t.episode_id for t in iter_trajectories(self.path)}


def _jsonl_records(path: Path, cls: type) -> Iterator:
    for n, data in iter_jsonl(path):
        try:
            record = from_dict(cls, data)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not a {cls.__name__} record ({exc}); was it written by "
                             f"another kag version?") from None
        yield record


def _resolve(path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir():
        p = p / TRAJECTORIES_FILE
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist; give a trajectories.jsonl file or the run's output directory")
    return p


def iter_trajectories(path: str | Path) -> Iterator[Trajectory]:
    yield from _jsonl_records(_resolve(path), Trajectory)


def load_trajectories(path: str | Path) -> list[Trajectory]:
    """Every trajectory in a ``trajectories.jsonl`` (or a run directory holding one)."""
    return list(iter_trajectories(path))


def load_turns(path: str | Path) -> list[Turn]:
    """The turns of one episode's ``.turns.jsonl`` log (an unfinished episode included)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist")
    return list(_jsonl_records(p, Turn))


# ---------------------------------------------------------------------------------------------
# a readable transcript for `kag show`
def _clip(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters]"


def _message(m: Message, limit: int | None) -> list[str]:
    head = {"system": "SYSTEM", "user": "USER", "assistant": "ASSISTANT", "tool": "TOOL RESULT"}.get(m.role, m.role)
    if m.role == "tool" and (m.name or m.tool_call_id):
        head += f" [{m.name or m.tool_call_id}]"
    out = [f"── {head} " + "─" * max(0, 60 - len(head))]
    if m.content:
        out.append(_clip(m.content, limit))
    for call in m.tool_calls:
        args = json.dumps(call.arguments, indent=2, ensure_ascii=False)
        out.append(f"→ {call.name}({_clip(args, limit)})")
    return out


def _result(r: EvalResult) -> str:
    bits = [f"compiled={r.compiled}", f"correct={r.correct}"]
    if r.speedup_vs_eager is not None:
        bits.append(f"vs eager {r.speedup_vs_eager:.2f}x")
    if r.speedup_vs_compile is not None:
        bits.append(f"vs compile {r.speedup_vs_compile:.2f}x")
    if r.violations:
        bits.append("violations: " + "; ".join(f"{v.guard}: {v.detail}" for v in r.violations))
    if r.error:
        bits.append(f"error ({r.error_kind or 'error'}): {r.error.splitlines()[0] if r.error else ''}")
    return ", ".join(bits)


def render_transcript(traj: Trajectory, max_chars: int | None = 4000) -> str:
    """The episode as text: header, the initial messages, each turn with its tool results."""
    lines = [f"episode {traj.episode_id} · task {traj.task} · policy {traj.policy or '?'} · "
             f"{len(traj.turns)} turns · stop: {traj.stop_reason or '?'} · {traj.elapsed_s:.1f} s"]
    if traj.kag_version:
        lines[0] += f" · kag {traj.kag_version}"
    # `messages` may hold the whole conversation or just the prompt: show what precedes turn 1
    n_prefix = len(traj.messages) if not traj.turns else next(
        (i for i, m in enumerate(traj.messages) if m.role == "assistant"), len(traj.messages))
    for m in traj.messages[:n_prefix]:
        lines += _message(m, max_chars)
    for turn in traj.turns:
        stats = []
        if turn.usage:
            stats.append(", ".join(f"{k}={v}" for k, v in turn.usage.items()))
        if turn.response_token_ids:
            stats.append(f"{len(turn.response_token_ids)} response tokens")
        if turn.elapsed_s:
            stats.append(f"{turn.elapsed_s:.1f} s")
        lines.append(f"\n══ turn {turn.index}" + (f" ({'; '.join(stats)})" if stats else "") + " ══")
        lines += _message(turn.response, max_chars)
        for obs in turn.observations:
            lines += _message(obs, max_chars)
        for r in turn.eval_results:
            lines.append(f"   eval: {_result(r)}")
        if turn.error:
            lines.append(f"   error: {turn.error}")
    lines.append("")
    if traj.result is not None:
        lines.append(f"result: {_result(traj.result)}")
    lines.append(f"reward: {traj.reward if traj.reward is not None else '-'}")
    return "\n".join(lines)
