"""glob, grep and todo_write on a real workspace."""

from __future__ import annotations


def test_glob(ctx, tools):
    glob = tools["glob"]
    assert glob(ctx, pattern="*.cu").text == "kernels/add.cu"
    assert glob(ctx, pattern="kernels/*.cu").text == "kernels/add.cu"
    everything = glob(ctx, pattern="**/*").text.splitlines()
    assert "utils/compile.sh" in everything and "model.py" in everything
    assert glob(ctx, pattern="*.sh", path="utils").text == "utils/compile.sh"
    assert "no files match" in glob(ctx, pattern="*.rs").text
    assert glob(ctx, pattern="*", path="..").is_error


def test_grep_modes_and_filters(ctx, tools):
    grep = tools["grep"]
    assert grep(ctx, pattern="beta").text == "notes.txt"
    assert grep(ctx, pattern="beta", output_mode="count").text.splitlines()[0] == "notes.txt:2"
    content = grep(ctx, pattern="^beta", output_mode="content").text.splitlines()
    assert content == ["notes.txt:2:beta", "notes.txt:4:beta again"]
    around = grep(ctx, pattern="gamma", output_mode="content", **{"-C": 1}).text.splitlines()
    assert around == ["notes.txt-2-beta", "notes.txt:3:gamma", "notes.txt-4-beta again"]
    after = grep(ctx, pattern="alpha", output_mode="content", **{"-A": 1}).text.splitlines()
    assert after == ["notes.txt:1:alpha", "notes.txt-2-beta"]
    assert grep(ctx, pattern="GLOBAL", **{"-i": True}, include="*.cu").text == "kernels/add.cu"
    assert "no matches" in grep(ctx, pattern="global", include="*.py").text
    bad = grep(ctx, pattern="(unclosed")
    assert bad.is_error and "invalid regular expression" in bad.text
    limited = grep(ctx, pattern=".", output_mode="content", head_limit=2).text.splitlines()
    assert len(limited) == 3 and "more lines not shown" in limited[-1]


def test_todo_write_keeps_the_list(ctx, tools):
    out = tools["todo_write"](ctx, todos=[
        {"content": "profile the reference", "status": "completed"},
        {"content": "write the kernel", "status": "in_progress"},
        {"content": "verify", "status": "pending"},
    ])
    assert not out.is_error
    assert out.text.splitlines() == ["[x] 1. profile the reference", "[~] 2. write the kernel", "[ ] 3. verify",
                                     "(1/3 completed)"]
    assert ctx.state["todos"][1]["content"] == "write the kernel"
    bad = tools["todo_write"](ctx, todos=[{"content": "x", "status": "doing"}])
    assert bad.is_error and "must be one of" in bad.text


def test_grep_and_glob_skip_links_out_of_the_workspace(ctx, tools, tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.cu").write_text("__global__ host secret 0b7e\n")
    (ctx.root / "kernels" / "x.cu").symlink_to(host / "secret.cu")
    (ctx.root / "linked").symlink_to(host)
    found = tools["grep"](ctx, pattern="secret", output_mode="content")
    assert "host secret" not in found.text and "no matches" in found.text
    assert "2 symbolic links skipped, not followed" in found.text
    listed = tools["glob"](ctx, pattern="**/*.cu")
    assert listed.text.splitlines()[0] == "kernels/add.cu" and "secret.cu" not in listed.text
    assert "1 symbolic link skipped" in listed.text
    direct = tools["grep"](ctx, pattern="secret", path="linked")
    assert direct.is_error and "linked is a symbolic link" in direct.text
