"""`pyc attach`: the line REPL, driven with pexpect like a terminal user."""

import time

import pexpect
import pytest

import pyctest
from clitest import EXIT_OK, PYC_CLI, pyc

PS1 = r">>> "
PS2 = r"\.\.\. "


@pytest.fixture
def attach(sessions):
    name = sessions.new()
    # TERM=dumb: readline edits without escape sequences (no bracketed paste), so the output is plain text
    child = pexpect.spawn(PYC_CLI, ["attach", name], encoding="utf-8", env=pyctest.child_env(TERM="dumb"),
                          timeout=30, dimensions=(40, 200))
    pyctest.register_pid(child.pid)
    child.logfile_read = open(pyctest.new_log_path("attach"), "w")
    child.session = name
    yield child
    if child.isalive():
        child.terminate(force=True)
    pyctest.kill_pid(child.pid)
    child.logfile_read.close()


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
    c.sendline("import time; time.sleep(30)")
    time.sleep(1.0)
    c.sendintr()
    c.expect("KeyboardInterrupt", timeout=15)
    c.expect(PS1)

    # Ctrl-C at the prompt drops the line being typed
    c.send("this is not python")
    c.sendintr()
    c.expect(PS1)
    c.sendline("'after ^C'")
    c.expect("'after \\^C'")
    c.expect(PS1)

    # Ctrl-D detaches; the session keeps running, with its state
    c.sendeof()
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0, (c.exitstatus, c.signalstatus)
    assert pyc("run", name, "att_value, answer", check=EXIT_OK).stdout == "(42, 'bob')\n"
