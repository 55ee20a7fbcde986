"""`pyc` and CURVE (README, "Encryption"): `pyc new --curve` gives a session CURVE keys, and every command
talks CurveZMQ to it (pyc's own implementation, src/client/zmtp_curve.c); a CURVE kernel started by someone
else (a connection file with curve keys, adopted as a session) is reached the same way."""

import json
import os
import subprocess
import sys

import pexpect
import pytest
import zmq
from jupyter_client.connect import write_connection_file
from jupyter_client.session import Session

import pyctest
from clitest import EXIT_OK, PYC_CLI, pyc, read_session, session_file, unique_name

sys.path.insert(0, os.path.join(pyctest.PYC_SRCDIR, "cli", "python"))
import pyc_client  # noqa: E402

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq has no CURVE")


def plaintext_answer(info, wait=1.5):
    """What a client without CURVE gets from the session's shell: None when it is refused."""
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.linger = 0
    # A DEALER whose handshake never completes has no peer to send to: without a send timeout the send itself
    # would block for ever.
    s.sndtimeo = int(wait * 1000)
    s.connect("tcp://%s:%d" % (info["ip"], info["shell_port"]))
    session = Session(key=info["key"].encode())
    try:
        session.send(s, session.msg("kernel_info_request", {}))
        got = s.recv_multipart() if s.poll(int(wait * 1000)) else None
    except zmq.Again:
        got = None
    s.close(0)
    ctx.term()
    return got


def test_new_curve_run_fork_status_and_cp(sessions, tmp_path):
    name = sessions.new(None, "--curve")
    info = read_session(name)
    assert len(info["curve_publickey"]) == 40 and len(info["curve_secretkey"]) == 40
    assert oct(os.stat(session_file(name)).st_mode & 0o777) == "0o600"
    p = pyc("run", name, "print('over curve'); big = bytes(range(256)) * 40000; 6 * 7", check=EXIT_OK)
    assert p.stdout == "over curve\n42\n"
    assert plaintext_answer(info) is None            # the kernel is a CURVE server
    assert pyc("run", name, "len(big)", check=EXIT_OK).stdout == "10240000\n"
    # 10 MB each way through the pickle transfer, encrypted
    pyc("cp", "%s:big" % name, tmp_path / "big.pkl", check=EXIT_OK)
    pyc("cp", tmp_path / "big.pkl", "%s:again" % name, check=EXIT_OK)
    assert pyc("run", name, "again == big", check=EXIT_OK).stdout == "True\n"
    assert json.loads(pyc("status", name, check=EXIT_OK).stdout)["state"] == "idle"
    assert name in pyc("ls", check=EXIT_OK).stdout
    child = unique_name("curvefork")
    pyc("fork", name, child, check=EXIT_OK)
    sessions.adopt(child)
    child_info = read_session(child)
    assert child_info["curve_publickey"] != info["curve_publickey"]   # keys of its own
    assert pyc("run", child, "len(big)", check=EXIT_OK).stdout == "10240000\n"


@pytest.mark.timeout(90)
def test_attach_over_curve(sessions):
    name = sessions.new(None, "--curve")
    child = pexpect.spawn(PYC_CLI, ["attach", name], encoding="utf-8", env=pyctest.child_env(TERM="dumb"),
                          timeout=30, dimensions=(40, 200))
    pyctest.register_pid(child.pid)
    try:
        child.expect(">>> ")
        child.sendline("sum(range(10))")
        child.expect(r"\r\n45\r\n")
        child.expect(">>> ")
        child.sendline("x = inp" + "ut('say: ')")
        child.expect("say: ")
        child.sendline("hello")
        child.expect(">>> ")
        child.sendline("x")
        child.expect("'hello'")
        # Ctrl-D only after the next prompt: readline puts the terminal in raw mode before it draws the prompt,
        # and a Ctrl-D that arrives while the terminal is still in cooked mode reaches readline as a NUL byte.
        child.expect(">>> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        if child.isalive():
            child.terminate(force=True)
        pyctest.kill_pid(child.pid)


def test_a_curve_kernel_started_elsewhere(sessions, tmp_path):
    """A connection file with curve keys (as jupyter_client 8.9 writes them), put where pyc looks for
    sessions: `pyc run` reaches the kernel over CURVE; with an allow-list that lists only another key, pyc
    (which presents the file's own key pair) still gets in."""
    name = unique_name("elsewhere")
    path = session_file(name)
    write_connection_file(path, ip="127.0.0.1", key=os.urandom(16).hex().encode(), kernel_name="pyc")
    pyc_client.write_curve_keys(path, allowed_clients=[zmq.curve_keypair()[0].decode()])
    log = open(pyctest.new_log_path("curve-elsewhere"), "wb")
    kernel = subprocess.Popen(pyctest.kernel_argv(path), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                              env=pyctest.child_env())
    pyctest.register_pid(kernel.pid)
    try:
        with open(path) as f:
            info = json.load(f)
        info["pid"] = kernel.pid
        with open(path + ".tmp", "w") as f:       # replaced whole: the kernel may be reading the file
            json.dump(info, f)
        os.chmod(path + ".tmp", 0o600)
        os.replace(path + ".tmp", path)
        sessions.adopt(name)
        assert pyc("run", name, "import os; os.getpid()", check=EXIT_OK).stdout == "%d\n" % kernel.pid
        assert plaintext_answer(info) is None
    finally:
        pyctest.kill_pid(kernel.pid)
        kernel.wait(timeout=10)
        log.close()
