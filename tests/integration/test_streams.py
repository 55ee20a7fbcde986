"""stdout/stderr capture (DESIGN.md sections 3 and 4): Python-level and fd-level output, threads, order, large
and unicode output."""

import time

import pytest

import pyctest
from pyctest import IS_PYC, execute, outputs, result_text, stream_text, summarize


def stream_runs(msgs):
    """[(name, text), ...] with consecutive chunks of the same stream merged, plus execute_result as
    ('result', text/plain)."""
    runs = []
    for m in outputs(msgs):
        if m["msg_type"] == "stream":
            key, text = m["content"]["name"], m["content"]["text"]
        elif m["msg_type"] == "execute_result":
            key, text = "result", m["content"]["data"]["text/plain"]
        else:
            key, text = m["msg_type"], ""
        if runs and runs[-1][0] == key and key != "result":
            runs[-1] = (key, runs[-1][1] + text)
        else:
            runs.append((key, text))
    return runs


def test_print_is_stdout_stream(kc):
    reply, msgs = execute(kc, "print('hello, world')")
    assert reply["content"]["status"] == "ok"
    streams = outputs(msgs, "stream")
    assert streams and all(m["content"]["name"] == "stdout" for m in streams)
    assert stream_text(msgs) == "hello, world\n"
    assert outputs(msgs, ("execute_result", "error")) == []


def test_stderr_stream(kc):
    reply, msgs = execute(kc, "import sys\nprint('oops', file=sys.stderr)")
    assert reply["content"]["status"] == "ok"
    assert stream_text(msgs, "stderr") == "oops\n"
    assert stream_text(msgs, "stdout") == ""


def test_partial_line_is_flushed_before_idle(kc):
    reply, msgs = execute(kc, "import sys\nprint('no newline', end='')\nsys.stderr.write('err no newline'); None")
    assert stream_text(msgs) == "no newline"
    assert stream_text(msgs, "stderr") == "err no newline"


def test_result_comes_after_prints(kc):
    reply, msgs = execute(kc, "print('a')\nprint('b')\n7")
    assert stream_runs(msgs) == [("stdout", "a\nb\n"), ("result", "7")], summarize(msgs)


def test_stdout_stderr_order_with_flush(kc):
    code = (
        "import sys\n"
        "print('1', flush=True)\n"
        "print('2', file=sys.stderr, flush=True)\n"
        "print('3', flush=True)\n"
        "print('4', file=sys.stderr, flush=True)\n"
        "'end'"
    )
    reply, msgs = execute(kc, code)
    assert stream_runs(msgs) == [
        ("stdout", "1\n"),
        ("stderr", "2\n"),
        ("stdout", "3\n"),
        ("stderr", "4\n"),
        ("result", "'end'"),
    ], summarize(msgs)


@pytest.mark.skipif(
    not IS_PYC,
    reason="pyc-only: ipykernel buffers stdout and stderr separately, so unflushed interleaving is not kept",
)
def test_stdout_stderr_order_without_flush(kc):
    code = "import sys\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')\nsys.stderr.write('d\\n')\n'end'"
    reply, msgs = execute(kc, code)
    assert stream_runs(msgs) == [
        ("stdout", "a\n"),
        ("stderr", "b\n"),
        ("stdout", "c\n"),
        ("stderr", "d\n"),
        ("result", "'end'"),
    ], summarize(msgs)


def fd_text(kc, msgs, name, want):
    """The text of stream `name` of a cell that wrote at the fd level.

    pyc must publish it before idle.  ipykernel's fd capture is a Python thread reading a pipe: now and
    then the bytes go out after idle (under the next parent), so against other kernels late stream
    messages are collected for a short while."""
    text = stream_text(msgs, name)
    if IS_PYC:
        return text
    deadline = time.monotonic() + 2.0
    while not all(w in text for w in want) and time.monotonic() < deadline:
        try:
            m = kc.get_iopub_msg(timeout=0.2)
        except Exception:
            continue
        if m["msg_type"] == "stream" and m["content"]["name"] == name:
            text += m["content"]["text"]
    return text


@pytest.mark.parametrize(
    "code, name, expected",
    [
        ("import os\n_ = os.system('echo hi')", "stdout", "hi\n"),
        ("import os\n_ = os.system('echo to-err 1>&2')", "stderr", "to-err\n"),
        ("import subprocess\n_ = subprocess.run(['echo', 'from subprocess'])", "stdout", "from subprocess\n"),
        (
            "import subprocess, sys\n_ = subprocess.run([sys.executable, '-c', 'import sys; sys.stderr.write(\"py-err\\\\n\")'])",
            "stderr",
            "py-err\n",
        ),
        ("import os\n_ = os.write(1, b'x\\n')", "stdout", "x\n"),
        ("import os\n_ = os.write(2, b'e\\n')", "stderr", "e\n"),
    ],
    ids=["os.system", "os.system-stderr", "subprocess", "subprocess-stderr", "os.write-1", "os.write-2"],
)
def test_fd_level_output_is_captured(kc, code, name, expected):
    reply, msgs = execute(kc, code)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert fd_text(kc, msgs, name, [expected]) == expected, summarize(msgs)


def test_fd_and_python_output_together(kc):
    code = "import os, sys\nprint('py1', flush=True)\nos.write(1, b'fd\\n')\nprint('py2')\n'r'"
    reply, msgs = execute(kc, code)
    text = fd_text(kc, msgs, "stdout", ["fd\n", "py1\n", "py2\n"])
    assert sorted(text.splitlines()) == ["fd", "py1", "py2"], summarize(msgs)
    assert text.index("py1") < text.index("py2")


def test_thread_output_within_cell(kc):
    code = (
        "import threading\n"
        "t = threading.Thread(target=lambda: print('from thread'))\n"
        "t.start()\n"
        "t.join()"
    )
    reply, msgs = execute(kc, code)
    assert stream_text(msgs) == "from thread\n", summarize(msgs)


def test_thread_output_after_cell_ends(kc):
    """A thread that prints after its cell ended: the output still reaches iopub (user threads keep running
    between cells)."""
    code = (
        "import threading, time\n"
        "def _late():\n"
        "    time.sleep(0.3)\n"
        "    print('late thread output', flush=True)\n"
        "late_t = threading.Thread(target=_late)\n"
        "late_t.start()"
    )
    reply, msgs = execute(kc, code)
    seen = stream_text(msgs)
    deadline = time.monotonic() + 10
    while "late thread output" not in seen and time.monotonic() < deadline:
        try:
            m = kc.get_iopub_msg(timeout=0.5)
        except Exception:
            continue
        if m["msg_type"] == "stream":
            seen += m["content"]["text"]
    assert "late thread output" in seen
    execute(kc, "late_t.join()")


def test_many_threads_print(kc):
    code = (
        "import sys, threading\n"
        "def _w(k):\n"
        "    for j in range(50):\n"
        "        sys.stdout.write('t%d-%d\\n' % (k, j))\n"  # print() writes text and end separately
        "ts = [threading.Thread(target=_w, args=(k,)) for k in range(4)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]; None"
    )
    reply, msgs = execute(kc, code)
    lines = stream_text(msgs).splitlines()
    # every line whole; each thread's lines in its own order
    assert sorted(lines) == sorted("t%d-%d" % (k, j) for k in range(4) for j in range(50))
    for k in range(4):
        mine = [ln for ln in lines if ln.startswith("t%d-" % k)]
        assert mine == ["t%d-%d" % (k, j) for j in range(50)]


FIFTY_MB = 50 * 1024 * 1024


@pytest.fixture(scope="module")
def uncapped_kc():
    """A kernel without the default output cap (32 MiB a cell, README "Limits and outcomes"): the tests below
    move 50 MiB through one cell.  Its environment is ignored by another kernel under test (ipykernel)."""
    k = pyctest.Kernel("pyc", env={"PYC_OUTPUT_LIMIT": "0"})
    yield k.kc
    k.shutdown(now=True)
BIG_EXPR = "''.join('%09d\\n' % i for i in range({}))".format(FIFTY_MB // 10)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_50mb_single_write(uncapped_kc):
    kc = uncapped_kc
    reply, msgs = execute(kc, "import sys\n_ = sys.stdout.write(" + BIG_EXPR + ")", timeout=150)
    assert reply["content"]["status"] == "ok"
    text = stream_text(msgs)
    expected = eval(BIG_EXPR)
    assert len(text) == len(expected) == FIFTY_MB
    assert text == expected
    assert stream_text(msgs, "stderr") == ""


@pytest.mark.timeout(180)
def test_50mb_plain_write(uncapped_kc):
    kc = uncapped_kc
    reply, msgs = execute(kc, "import sys\n_ = sys.stdout.write('x' * (50 * 1024 * 1024))", timeout=150)
    text = stream_text(msgs)
    assert len(text) == FIFTY_MB
    assert text.count("x") == FIFTY_MB


@pytest.mark.timeout(180)
def test_50mb_many_prints(uncapped_kc):
    kc = uncapped_kc
    n = 200000
    code = "for i in range(%d):\n    print('%%07d' %% i + 'y' * 250)" % n
    reply, msgs = execute(kc, code, timeout=150)
    assert reply["content"]["status"] == "ok"
    text = stream_text(msgs)
    expected = "".join("%07d" % i + "y" * 250 + "\n" for i in range(n))
    assert len(text) == len(expected)
    assert text == expected


def test_unicode(kc):
    s = "caf\u00e9 \U0001F600 \u4e2d\u6587 \u0645\u0631\u062d\u0628\u0627 \u00df\u2211"
    reply, msgs = execute(kc, "s_uni = %r\nprint(s_uni)\nimport sys\nprint(s_uni, file=sys.stderr)\ns_uni" % s)
    assert stream_text(msgs) == s + "\n"
    assert stream_text(msgs, "stderr") == s + "\n"
    assert result_text(msgs) == repr(s)


@pytest.mark.skipif(
    not IS_PYC,
    reason="pyc-only: ipykernel's fd-level capture (a Python thread reading a pipe) sometimes loses bytes "
    "written one at a time",
)
def test_unicode_split_across_writes(kc):
    # a multi-byte character written byte by byte at the fd level must come out whole
    code = "import os\nb = '\u00e9\U0001F600\u4e2d'.encode()\nfor i in range(len(b)):\n    os.write(1, b[i:i+1])\nos.write(1, b'\\n'); None"
    reply, msgs = execute(kc, code)
    assert stream_text(msgs) == "\u00e9\U0001F600\u4e2d\n", summarize(msgs)
