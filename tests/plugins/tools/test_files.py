"""read / write / edit / multiedit on a real workspace copy."""

from __future__ import annotations

import os
import sys
import time

import pytest

from kag.core.records import ToolCall
from kag.core.agent.toolkit import call_tool


def test_read_numbers_lines_and_honours_ranges(ctx, tools):
    out = tools["read"](ctx, path="notes.txt")
    assert not out.is_error
    assert out.text.splitlines()[0] == "     1\talpha"
    part = tools["read"](ctx, path="notes.txt", offset=2, limit=2)
    assert part.text.splitlines()[:2] == ["     2\tbeta", "     3\tgamma"]
    assert "[lines 2-3 of 4]" in part.text
    assert tools["read"](ctx, path="notes.txt", offset=9).is_error


def test_read_errors_are_observations(ctx, tools):
    assert "does not exist" in tools["read"](ctx, path="nope.py").text
    assert "directory" in tools["read"](ctx, path="kernels").text
    (ctx.root / "blob.bin").write_bytes(b"\0\1\2")
    assert "binary" in tools["read"](ctx, path="blob.bin").text
    out = tools["read"](ctx, path="../../etc/passwd")
    assert out.is_error and "outside the workspace" in out.text
    assert tools["read"](ctx, path="/etc/passwd").is_error


def test_read_output_is_truncated_with_a_note(ctx):
    from kag.plugins.tools.files import ReadTool

    (ctx.root / "big.txt").write_text("x" * 100 + "\n" * 50)
    out = ReadTool(max_output_chars=60)(ctx, path="big.txt")
    assert "characters omitted" in out.text and "offset/limit" in out.text


def test_write_needs_a_read_first_and_creates_new_files(ctx, tools):
    refused = tools["write"](ctx, path="notes.txt", content="new")
    assert refused.is_error and "has not been read" in refused.text
    assert (ctx.root / "notes.txt").read_text().startswith("alpha")
    tools["read"](ctx, path="notes.txt")
    assert not tools["write"](ctx, path="notes.txt", content="new\n").is_error
    assert (ctx.root / "notes.txt").read_text() == "new\n"
    created = tools["write"](ctx, path="kernels/sub/mul.cu", content="// mul\n")
    assert not created.is_error and "created" in created.text
    assert (ctx.root / "kernels/sub/mul.cu").read_text() == "// mul\n"


def test_write_refuses_a_file_changed_since_read(ctx, tools):
    tools["read"](ctx, path="notes.txt")
    import os
    import time

    path = ctx.root / "notes.txt"
    path.write_text("changed by bash\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    out = tools["write"](ctx, path="notes.txt", content="x")
    assert out.is_error and "changed since" in out.text


def test_protected_files_and_outside_paths_cannot_be_written(ctx, tools):
    for path in ("model.py", "SKILL.md", "utils/compile.sh", "utils/new.py", "binding.cpp", "./model.py"):
        tools["read"](ctx, path=path) if (ctx.root / path).exists() else None
        out = tools["write"](ctx, path=path, content="hack")
        assert out.is_error and "protected" in out.text, path
    assert "compiled" in (ctx.root / "utils/compile.sh").read_text()
    edit = tools["edit"](ctx, path="model.py", old_string="pass", new_string="x = 1")
    assert edit.is_error and "protected" in edit.text
    out = tools["write"](ctx, path="../escape.txt", content="x")
    assert out.is_error and "outside the workspace" in out.text
    assert not (ctx.root.parent / "escape.txt").exists()
    (ctx.root / "link").symlink_to("/tmp")
    assert tools["write"](ctx, path="link/evil.txt", content="x").is_error


def test_edit_replaces_a_unique_string(ctx, tools):
    out = tools["edit"](ctx, path="notes.txt", old_string="gamma", new_string="GAMMA")
    assert not out.is_error
    assert (ctx.root / "notes.txt").read_text() == "alpha\nbeta\nGAMMA\nbeta again\n"


def test_edit_reports_missing_and_ambiguous_strings(ctx, tools):
    missing = tools["edit"](ctx, path="notes.txt", old_string="delta", new_string="x")
    assert missing.is_error and "not found" in missing.text
    twice = tools["edit"](ctx, path="notes.txt", old_string="beta", new_string="B")
    assert twice.is_error and "occurs 2 times" in twice.text
    same = tools["edit"](ctx, path="notes.txt", old_string="beta", new_string="beta")
    assert same.is_error
    all_ = tools["edit"](ctx, path="notes.txt", old_string="beta", new_string="B", replace_all=True)
    assert not all_.is_error and "2 replacements" in all_.text
    assert (ctx.root / "notes.txt").read_text() == "alpha\nB\ngamma\nB again\n"


def test_multiedit_is_all_or_nothing(ctx, tools):
    before = (ctx.root / "notes.txt").read_text()
    bad = tools["multiedit"](ctx, path="notes.txt", edits=[
        {"old_string": "alpha", "new_string": "A"},
        {"old_string": "zeta", "new_string": "Z"},
    ])
    assert bad.is_error and "edit 2 of 2" in bad.text
    assert (ctx.root / "notes.txt").read_text() == before
    good = tools["multiedit"](ctx, path="notes.txt", edits=[
        {"old_string": "alpha", "new_string": "A"},
        {"old_string": "A\nbeta", "new_string": "A\nB"},  # later edits see earlier ones
    ])
    assert not good.is_error
    assert (ctx.root / "notes.txt").read_text() == "A\nB\ngamma\nbeta again\n"


def test_malformed_calls_become_clear_errors(ctx, tools):
    missing = call_tool(tools, ctx, ToolCall(id="1", name="write", arguments={"path": "a.txt"}))
    assert missing.is_error and "missing the required field 'content'" in missing.text
    wrong_type = call_tool(tools, ctx, ToolCall(id="2", name="read", arguments={"path": "notes.txt", "limit": "ten"}))
    assert wrong_type.is_error and "limit must be of type integer" in wrong_type.text
    extra = call_tool(tools, ctx, ToolCall(id="3", name="read", arguments={"path": "notes.txt", "lines": 3}))
    assert extra.is_error and "unknown field 'lines'" in extra.text
    unknown = call_tool(tools, ctx, ToolCall(id="4", name="rm", arguments={}))
    assert unknown.is_error and "unknown tool 'rm'" in unknown.text and "read" in unknown.text
    raw = call_tool(tools, ctx, ToolCall(id="5", name="read",
                                         arguments={"_raw_arguments": "{path: x", "_parse_error": "Expecting"}))
    assert raw.is_error and "not valid JSON" in raw.text
    nested = call_tool(tools, ctx, ToolCall(id="6", name="multiedit",
                                            arguments={"path": "notes.txt", "edits": [{"old_string": "a"}]}))
    assert nested.is_error and "edits[0]" in nested.text and "new_string" in nested.text
    ctx_key = call_tool(tools, ctx, ToolCall(id="7", name="read", arguments={"path": "notes.txt", "ctx": 1}))
    assert ctx_key.is_error and "unknown field 'ctx'" in ctx_key.text


def test_every_tool_has_an_openai_schema(tools):
    assert set(tools) == {"bash", "bash_output", "kill_bash", "read", "write", "edit", "multiedit", "glob", "grep",
                          "todo_write"}
    for name, tool in tools.items():
        schema = tool.schema()
        assert schema["type"] == "function"
        fn = schema["function"]
        assert fn["name"] == name and fn["description"]
        assert fn["parameters"]["type"] == "object"
        assert set(fn["parameters"].get("required", [])) <= set(fn["parameters"]["properties"])


# ---------------------------------------------------------------------------------------------
# links out of the workspace: the tools run on the host, so each is an attack on the host
SECRET = "host secret c3a9"


@pytest.fixture
def host(tmp_path):
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    (folder / "a.cu").write_text(SECRET)
    return folder


def test_read_and_edit_refuse_a_link_to_a_host_file(ctx, tools, host):
    (ctx.root / "kernels" / "x.cu").symlink_to(host / "secret.txt")
    for out in (tools["read"](ctx, path="kernels/x.cu"),
                tools["edit"](ctx, path="kernels/x.cu", old_string="host", new_string="HACKED"),
                tools["multiedit"](ctx, path="kernels/x.cu", edits=[{"old_string": "host", "new_string": "X"}]),
                tools["write"](ctx, path="kernels/x.cu", content="overwritten")):
        assert out.is_error and "kernels/x.cu is a symbolic link: links are not allowed" in out.text, out.text
        assert SECRET not in out.text
    assert (host / "secret.txt").read_text() == SECRET


def test_write_refuses_a_linked_kernels_folder(ctx, tools, host):
    (ctx.root / "kernels").rename(ctx.root / "old-kernels")
    (ctx.root / "kernels").symlink_to(host)
    out = tools["write"](ctx, path="kernels/evil.cu", content="planted")
    assert out.is_error and "kernels is a symbolic link: links are not allowed" in out.text
    assert sorted(p.name for p in host.iterdir()) == ["a.cu", "secret.txt"]


def test_edit_refuses_a_hard_link_to_a_host_file(ctx, tools, host):
    os.link(host / "secret.txt", ctx.root / "kernels" / "h.cu")
    out = tools["edit"](ctx, path="kernels/h.cu", old_string="host", new_string="HACKED")
    assert out.is_error and "kernels/h.cu has 2 hard links" in out.text
    assert (host / "secret.txt").read_text() == SECRET


def test_a_background_job_flipping_kernels_to_a_link_cannot_redirect_reads_or_edits(ctx, tools, host):
    """The agent starts a job that swaps kernels/ for a link to a host folder and back, over and
    over, then reads and edits through the tools: a check-then-open tool loses this race."""
    kernel = (ctx.root / "kernels" / "add.cu").read_text()
    (host / "add.cu").write_text(kernel + f"// {SECRET}\n")
    (ctx.root / "kernels_link").symlink_to(host)
    flip = ("import os, time\nend = time.time() + 3\nwhile time.time() < end:\n"
            "    os.rename('kernels', 'kernels_real'); os.rename('kernels_link', 'kernels')\n"
            "    os.rename('kernels', 'kernels_link'); os.rename('kernels_real', 'kernels')\n")
    (ctx.root / "flip.py").write_text(flip)
    job = tools["bash"](ctx, command=f"{sys.executable} flip.py", run_in_background=True)
    assert not job.is_error, job.text
    outcomes = set()
    swap = [("x[0] += 1.0f", "x[0] += 2.0f"), ("x[0] += 2.0f", "x[0] += 1.0f")]
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        read = tools["read"](ctx, path="kernels/add.cu")
        assert SECRET not in read.text
        outcomes.add("refused" if "is a symbolic link" in read.text else "read" if not read.is_error else "other")
        old, new = swap[0]
        if not tools["edit"](ctx, path="kernels/add.cu", old_string=old, new_string=new).is_error:
            swap.reverse()
    assert (host / "add.cu").read_text() == kernel + f"// {SECRET}\n"
    assert sorted(p.name for p in host.iterdir()) == ["a.cu", "add.cu", "secret.txt"]
    log = tools["bash_output"](ctx, job_id=job.metadata["job_id"]).text
    assert {"refused", "read"} <= outcomes, log  # the race really ran both ways
