"""A person completes an episode through the ``human`` policy in a real terminal (a pseudo-terminal).

`kag run --policy human` runs with its stdin, stdout and stderr on a pty, as in a terminal window;
the test types what a person would: read the starter, paste the CPU ReLU kernels (files typed line
by line, as a paste arrives), compile, verify, then ``done``. The run must end with a correct
solution scored by the trusted evaluator.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "relu" / "cpu"

pty = pytest.importorskip("pty")
PROMPT = "\n> "  # the human policy's prompt, at the start of a line


class Terminal:
    """The master side of a pty running one command."""

    def __init__(self, argv: list[str], cwd: Path):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, start_new_session=True,
                                     env=dict(os.environ, COLUMNS="120", TERM="xterm"))
        os.close(slave)
        self.screen = ""
        self.pos = 0  # what read_until has consumed

    def read_until(self, marker: str, timeout_s: float) -> str:
        """Everything printed until ``marker`` appears (after what was already consumed)."""
        deadline = time.monotonic() + timeout_s
        start = self.pos
        while marker not in self.screen[start:]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {marker!r} within {timeout_s} s; the terminal shows:\n{self.screen[-3000:]}")
            ready, _, _ = select.select([self.master], [], [], min(left, 1.0))
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the command exited and closed the terminal
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    raise AssertionError(f"the command exited ({self.proc.returncode}) before {marker!r}:\n"
                                         f"{self.screen[-3000:]}")
                self.screen += chunk.decode("utf-8", errors="replace").replace("\r\n", "\n")
        self.pos = self.screen.index(marker, start) + len(marker)
        return self.screen[start:self.pos]

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def paste_call(self, tool: str, args: dict[str, str], content_key: str | None = None) -> None:
        """``tool {json}`` where the content string is typed over several lines, as a paste."""
        if content_key is None:
            self.type(f"{tool} {json.dumps(args)}")
            return
        head = {k: v for k, v in args.items() if k != content_key}
        prefix = f"{tool} " + json.dumps(head)[:-1] + f', "{content_key}": "'
        body = json.dumps(args[content_key])[1:-1].replace("\\n", "\n")  # literal newlines, as pasted
        lines = (prefix + body + '"}').split("\n")
        for line in lines:
            self.type(line)
            time.sleep(0.01)

    def close(self, wait_s: float = 120) -> int:
        try:
            return self.proc.wait(timeout=wait_s)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
            os.close(self.master)


@pytest.mark.slow  # 61 s on 2 cores: a whole episode typed into a terminal
def test_a_person_completes_an_episode_in_a_terminal(tmp_path):
    out = tmp_path / "run"
    term = Terminal([sys.executable, "-m", "kag.cli.main", "run", "--task", str(EXAMPLE / "model.py"),
                     "--backend", "cpu", "--policy", "human", "--out", str(out)], cwd=tmp_path)
    finished = False
    try:
        first = term.read_until(PROMPT, 120)
        assert "--- user ---" in first and "Model" in first  # the task is shown
        term.type('read {"path": "model_new.py"}')
        term.read_until(PROMPT, 60)
        for rel in ("kernels/relu.cpp", "kernels/relu_binding.cpp", "model_new.py"):
            term.paste_call("write", {"path": rel, "content": (EXAMPLE / rel).read_text()}, content_key="content")
            shown = term.read_until(PROMPT, 60)
            assert "tool result" in shown and "rror" not in shown.split("tool result")[-1][:200], shown
        term.type('bash {"command": "bash utils/compile.sh"}')
        shown = term.read_until(PROMPT, 600)
        assert "build ok" in shown.lower() or "compiled" in shown.lower(), shown
        term.type('bash {"command": "python3 utils/verification.py"}')
        shown = term.read_until(PROMPT, 600)
        assert "PASS" in shown, shown
        term.type("done")
        final = term.read_until("best solution:", 600)
        assert "correct: True" in final, final
        finished = True
    finally:
        code = term.close(wait_s=120 if finished else 0.1)
    assert code == 0
    assert (out / "workspace" / "kernels" / "relu.cpp").read_text() == (EXAMPLE / "kernels" / "relu.cpp").read_text()
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["policy"] == "human"
