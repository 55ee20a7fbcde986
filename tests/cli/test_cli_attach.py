"""`pyc attach`: the line REPL, driven with pexpect like a terminal user."""

import os
import time

import pexpect
import pytest

import pyctest
from clitest import EXIT_OK, PYC_CLI, pyc, run_in_background, wait_busy

PS1 = r">>> "
PS2 = r"\.\.\. "


def spawn_attach(name, **env):
    # TERM=dumb: readline edits without escape sequences (no bracketed paste), so the output is plain text
    child = pexpect.spawn(PYC_CLI, ["attach", name], encoding="utf-8", env=pyctest.child_env(TERM="dumb", **env),
                          timeout=30, dimensions=(40, 200))
    pyctest.register_pid(child.pid)
    child.logfile_read = open(pyctest.new_log_path("attach"), "w")
    child.session = name
    return child


def close_attach(child):
    if child.isalive():
        child.terminate(force=True)
    pyctest.kill_pid(child.pid)
    child.logfile_read.close()


@pytest.fixture
def attach(sessions):
    child = spawn_attach(sessions.new())
    yield child
    close_attach(child)


@pytest.mark.timeout(90)
def test_attach_session(attach):
    c = attach
    name = c.session
    c.expect("attached to session %s" % name)
    c.expect(PS1)
    c.sendline("att_value = 6 * 7")
    c.expect(PS1)
    c.sendline("att_value")
    c.expect(r"\r\n42\r\n")
    c.expect(PS1)

    # tab completion through the kernel: the one match is filled in
    c.send("att_val\t")
    c.expect("att_value")
    c.sendline(" + 1")
    c.expect(r"\r\n43\r\n")
    c.expect(PS1)

    # a block: continuation lines until the kernel says it is complete, then an empty line ends it
    c.sendline("for i in range(2):")
    c.expect(PS2)
    c.sendline("print('it', i)")
    c.expect(PS2)
    c.sendline("")
    c.expect(r"it 0\r\nit 1\r\n")
    c.expect(PS1)

    # errors go to the terminal, the REPL goes on
    c.sendline("1 / 0")
    c.expect("ZeroDivisionError")
    c.expect(PS1)

    # input() reads from the terminal
    c.sendline("answer = input('your name? ')")
    c.expect("your name\\? ")
    c.sendline("bob")
    c.expect(PS1)

    # Ctrl-C interrupts the running cell, not the REPL
    # (the cell says when it runs: a Ctrl-C before that would find the kernel idle, where it does nothing)
    c.sendline("import time; print('sleep' + 'ing', flush=True); time.sleep(30)")
    c.expect("sleeping")
    c.sendintr()
    c.expect("KeyboardInterrupt", timeout=15)
    c.expect(PS1)

    # Ctrl-C at the prompt drops the line being typed
    c.send("this is not python")
    c.sendintr()
    c.expect(PS1)
    c.sendline("'after ^C'")
    # the result line itself (the echo of the input is preceded by the prompt, not a line break), and no
    # SyntaxError from the dropped text
    i = c.expect([r"\r\n'after \^C'\r\n", "SyntaxError"])
    assert i == 0, c.before
    c.expect(PS1)

    # Ctrl-D detaches; the session keeps running, with its state
    c.sendeof()
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0, (c.exitstatus, c.signalstatus)
    assert pyc("run", name, "att_value, answer", check=EXIT_OK).stdout == "(42, 'bob')\n"


@pytest.mark.timeout(60)
def test_attach_paste_and_open_blocks(attach):
    c = attach
    c.expect(PS1)
    # pasted text (sent at once) brings its own indentation: the suggested indent is not added on top of it
    c.send("def pasted(x):\n    y = x + 1\n    if y:\n        return y * 2\n    return 0\n\npasted(20)\n")
    i = c.expect([r"\r\n42\r\n", "Error"], timeout=20)
    assert i == 0, c.before
    c.expect(PS1)
    # an empty line inside a triple-quoted string or an open bracket belongs to the block
    c.sendline("text = \'\'\'a")
    c.expect(PS2)
    c.sendline("")
    c.expect(PS2)
    c.sendline("b\'\'\'")
    c.expect(PS1)
    c.sendline("items = [1,  # a comment (")
    c.expect(PS2)
    c.sendline("")
    c.expect(PS2)
    c.sendline("2]")
    c.expect(PS1)
    c.sendline("text, items")
    i = c.expect([r"\r\n\('a\\n\\nb', \[1, 2\]\)\r\n", "Error"])
    assert i == 0, c.before
    c.expect(PS1)
    # and an empty line still ends a block that waits for nothing
    c.sendline("for k in range(2):")
    c.expect(PS2)
    c.sendline("print('k', k)")
    c.expect(PS2)
    c.sendline("")
    c.expect(r"k 0\r\nk 1\r\n")
    c.expect(PS1)


@pytest.mark.timeout(60)
def test_attach_ctrl_c_while_asking_the_kernel(attach):
    """Ctrl-C while is_complete waits (behind another client's cell) drops the block: it is never run."""
    c = attach
    name = c.session
    c.expect(PS1)
    runner = run_in_background(name, "import time\ntime.sleep(30)")
    try:
        assert wait_busy(name)
        c.sendline("for half in range(3):")
        time.sleep(1.0)          # the is_complete_request waits behind the running cell
        c.sendintr()
        c.expect(PS1, timeout=5)                     # at once: not after the running cell
        assert "Error" not in c.before, c.before
        pyc("int", name, check=EXIT_OK)
        runner.communicate(timeout=20)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    c.sendline("'after'")
    i = c.expect([r"\r\n'after'\r\n", "Error"])
    assert i == 0, c.before
    c.expect(PS1)


@pytest.mark.timeout(60)
def test_attach_history_file(sessions):
    """Lines are kept in <Jupyter data dir>/pyc/attach_history and come back in the next attach (Ctrl-P)."""
    name = sessions.new()
    hist = os.path.join(os.environ["JUPYTER_DATA_DIR"], "pyc", "attach_history")
    c = spawn_attach(name)
    try:
        c.expect(PS1)
        c.sendline("'from ' + 'history'")
        c.expect(r"\r\n'from history'\r\n")
        c.expect(PS1)
        c.sendeof()
        c.expect(pexpect.EOF)
    finally:
        close_attach(c)
    assert "'from ' + 'history'" in open(hist).read().splitlines()
    c = spawn_attach(name)
    try:
        c.expect(PS1)
        c.send("\x10")          # Ctrl-P: the previous line, from the file
        c.send("\r")
        c.expect(r"\r\n'from history'\r\n")
        c.expect(PS1)
        c.sendeof()
        c.expect(pexpect.EOF)
    finally:
        close_attach(c)


@pytest.mark.timeout(60)
def test_attach_is_complete_unanswered(sessions):
    """No answer to is_complete within the wait (10 s; PYC_CLI_CONNECT_MS makes it 0.5 s here) while another
    client's cell runs does not run the block: the prompt goes on, and an empty line sends it; it then runs
    after the other cell, like any queued cell."""
    name = sessions.new()
    c = spawn_attach(name, PYC_CLI_CONNECT_MS="500")
    try:
        c.expect(PS1)
        # (the other cell ends by itself: an interrupted one would make the kernel abort the cells queued after
        # it; it outlasts the 0.5 s wait by enough to still run when the prompt comes back)
        runner = run_in_background(name, "import time\ntime.sleep(2)")
        try:
            assert wait_busy(name)
            c.sendline("late = 41 + 1")
            c.expect("did not say within 0.5 s", timeout=10)
            c.expect(PS2)
            assert runner.poll() is None
            c.sendline("")
            runner.communicate(timeout=20)
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.wait()
        c.expect(PS1)
        c.sendline("late")
        c.expect(r"\r\n42\r\n")
        c.expect(PS1)
    finally:
        close_attach(c)
