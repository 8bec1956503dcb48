"""The human policy, driven through pipes: a real subprocess reads the actions from stdin."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

from kag.core.records import Message
from kag.plugins.policies.human import HumanPolicy
from kag.plugins.tools.files import ReadTool, WriteTool

TOOLS = [ReadTool().schema(), WriteTool().schema()]


def test_reads_tool_calls_and_shows_observations():
    stdin = io.StringIO('bogus {}\nread {"path": "model.py"}\nwrite {"path": "a.py",\n "content": "x = 1\nprint(x)\n"}\n'
                        'read {not json}\ntools\ndone\n')
    stdout = io.StringIO()
    policy = HumanPolicy(stdin=stdin, stdout=stdout)
    messages = [Message(role="system", content="SYSTEM PROMPT"), Message(role="user", content="TASK TEXT")]
    first = policy.act(messages, TOOLS)
    assert [(c.name, c.arguments) for c in first.message.tool_calls] == [("read", {"path": "model.py"})]
    assert "SYSTEM PROMPT" in stdout.getvalue() and "TASK TEXT" in stdout.getvalue()
    assert "unknown tool 'bogus'" in stdout.getvalue()
    messages += [first.message, Message(role="tool", content="MODEL SOURCE", tool_call_id="c", name="read")]
    second = policy.act(messages, TOOLS)
    assert second.message.tool_calls[0].arguments == {"path": "a.py", "content": "x = 1\nprint(x)\n"}
    assert "MODEL SOURCE" in stdout.getvalue()
    assert stdout.getvalue().count("TASK TEXT") == 1  # each message is shown once
    third = policy.act(messages, TOOLS)
    assert third.done
    out = stdout.getvalue()
    assert "invalid JSON arguments" in out and "write(path: string, content: string)" in out


def test_end_of_input_finishes():
    assert HumanPolicy(stdin=io.StringIO(""), stdout=io.StringIO()).act([], TOOLS).done


def test_in_a_subprocess_through_a_pipe(tmp_path):
    program = textwrap.dedent("""
        from kag.core.records import Message
        from kag.plugins.policies.human import HumanPolicy
        from kag.plugins.tools.files import ReadTool
        policy = HumanPolicy()
        steps = []
        while True:
            step = policy.act([Message(role="user", content="optimise it")], [ReadTool().schema()])
            if step.done:
                break
            steps.append(step.message.tool_calls[0].arguments["path"])
        print("CALLS", steps)
    """)
    proc = subprocess.run([sys.executable, "-c", program], input='read {"path": "a"}\nread {"path": "b"}\ndone\n',
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "optimise it" in proc.stdout and "CALLS ['a', 'b']" in proc.stdout
