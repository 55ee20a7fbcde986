"""`pyc-kernel gateway-launch` (issue 16) on loopback against a fake gateway: the launcher protocol version 1 of
Jupyter Enterprise Gateway and Gateway Provisioners, against the contract in src/gateway/gateway.h (its
numbered steps 1-5 name the sections below) and README's "Running on a cluster".

Each launch is followed the way a gateway follows it: the payload that reaches the response socket is decoded
as the upstream receivers decode it, its ip is set to the launcher's host (127.0.0.1 here, with `--ip
127.0.0.1`), a jupyter_client BlockingKernelClient loads it, waits for the kernel and runs "1+1"; requests go
to the communication port with the gateways' framing and 5 ms timeout.  Covered: the three ways of giving the
arguments (new-style, legacy --RemoteProcessProxy.*, environment only) and which wins; the payload's exact
content; signals and shutdown through the comm port; the failures that must stop the launcher before anything
starts (exit 2), an undeliverable payload (exit 1, no orphan kernel), a killed kernel (exit 137); port ranges;
SIGTERM/SIGHUP/SIGINT to the launcher; the kernel's own clean exit on SIGTERM.  The first tests check the fake
gateway itself against a payload built with another library (python3-cryptography).

pyc only.  The cross-host path (a kernel bound to 0.0.0.0 in another network namespace) is in
test_gateway_netns.py.
"""

import base64
import json
import os
import signal
import socket
import time
import uuid

import pytest

import fakegateway
import pyctest
from fakegateway import (PORT_KEYS, FakeGateway, connection_refused, gateway_shutdown, receive, run_one_plus_one,
                         send_listener_request, start_sleeping_cell, wait_gone, wait_refused)

LOOPBACK = "127.0.0.1"

#: How long the launcher may take to end once its kernel has ended or been told to.
EXIT_TIMEOUT = 10.0

EXIT_FAILURE = 1
EXIT_USAGE = 2


def new_kernel_id():
    return str(uuid.uuid4())


def new_style_args(gateway, kernel_id, ip=LOOPBACK, equals=False, **extra):
    """The arguments a gateway's kernelspec passes (plus pyc's --ip), as `--opt value` or `--opt=value`."""
    opts = [("--kernel-id", kernel_id), ("--response-address", gateway.response_address),
            ("--public-key", gateway.public_key)]
    if ip is not None:
        opts.append(("--ip", ip))
    opts += [("--" + k.replace("_", "-"), v) for k, v in extra.items()]
    args = []
    for opt, value in opts:
        args += ["%s=%s" % (opt, value)] if equals else [opt, value]
    return args


def launched(gateway, launch, connect, args=None, env=None, kernel_id=None, ip=LOOPBACK):
    """Starts a launcher (new-style arguments by default), takes its payload and connects a client:
    (launcher, connection info, client)."""
    kernel_id = kernel_id or new_kernel_id()
    launcher = launch(new_style_args(gateway, kernel_id) if args is None else args, env=env)
    info = receive(gateway, launcher, kernel_id, ip=ip)
    kc = connect(info, LOOPBACK)
    return launcher, info, kc


def assert_no_leftovers(launcher, kernel_id=None, timeout=3.0):
    """No live process names the launcher's TMPDIR (or the kernel id), a little while after the launcher
    ended: no orphan kernel."""
    deadline = time.monotonic() + timeout
    while True:
        left = launcher.leftovers()
        if kernel_id:
            left.update((pid, cmd) for pid, cmd in pyctest.processes_naming(kernel_id).items()
                        if pid != launcher.pid)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, "processes left behind by the launcher: %r%s" % (left, launcher.describe())


def assert_tmpdir_empty(launcher):
    left = sorted(os.listdir(launcher.tmpdir))
    assert not left, "files left in the launcher's TMPDIR %s: %r%s" % (launcher.tmpdir, left, launcher.describe())


def assert_exits(launcher, expected, timeout=EXIT_TIMEOUT, why=""):
    """The launcher exits with `expected` within timeout seconds; returns the time it took."""
    t0 = time.monotonic()
    rc = launcher.wait(timeout)
    took = time.monotonic() - t0
    assert rc is not None, "the launcher still runs %ss later%s%s" % (timeout, why, launcher.describe())
    assert rc == expected, "launcher exit %s, expected %s%s%s" % (rc, expected, why, launcher.describe())
    return took


# ---- the fake gateway itself ----------------------------------------------------------------------------------


def reference_payload(public_key, conn_info, version=1):
    """A version-1 payload built with python3-cryptography (not the library the fake gateway decodes with),
    from the protocol's description: base64(JSON{version, key: b64(RSA-PKCS1v1.5(aes_key)), conn_info:
    b64(AES-128-ECB(PKCS7(json)))})."""
    from cryptography.hazmat.primitives import padding as sym_padding
    from cryptography.hazmat.primitives.asymmetric import padding as asym_padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    pub = load_der_public_key(base64.b64decode(public_key))
    aes_key = os.urandom(16)
    padder = sym_padding.PKCS7(128).padder()
    plain = padder.update(json.dumps(conn_info).encode()) + padder.finalize()
    enc = Cipher(algorithms.AES(aes_key), modes.ECB()).encryptor()
    conn_ct = enc.update(plain) + enc.finalize()
    key_ct = pub.encrypt(aes_key, asym_padding.PKCS1v15())
    outer = {"version": version, "key": base64.b64encode(key_ct).decode(),
             "conn_info": base64.b64encode(conn_ct).decode()}
    return base64.b64encode(json.dumps(outer).encode())


def sample_info(kernel_id):
    info = {k: 50000 + i for i, k in enumerate(PORT_KEYS)}
    info.update(ip="0.0.0.0", key=str(uuid.uuid4()), transport="tcp", signature_scheme="hmac-sha256",
                kernel_name="", pid=os.getpid(), pgid=os.getpgid(0), comm_port=50010, kernel_id=kernel_id)
    return info


def send_to(gateway, data, pieces=1):
    """Sends data to the gateway's response socket in `pieces` writes, then closes."""
    with socket.create_connection((gateway.host, gateway.port), timeout=5) as s:
        step = -(-len(data) // pieces)
        for i in range(0, len(data), step):
            s.sendall(data[i:i + step])
            time.sleep(0.01)


def test_the_fake_gateway_decodes_a_reference_payload(gateway):
    assert len(gateway.public_key) == 216 and "\n" not in gateway.public_key and "-----" not in gateway.public_key
    kid = new_kernel_id()
    info = sample_info(kid)
    # in several writes, and longer than one 1024-byte chunk with a trailing newline
    send_to(gateway, reference_payload(gateway.public_key, info) + b"\n", pieces=3)
    d = gateway.wait_delivery(10)
    assert d is not None and d.error is None, d and d.error
    assert d.info == info and len(d.aes_key) == 16
    assert fakegateway.connection_info_problems(d.info, kid, "0.0.0.0") == []
    # the checks of the connection info can fail
    bad = dict(info, pid="1", extra=1)
    del bad["iopub_port"]
    problems = fakegateway.connection_info_problems(bad, new_kernel_id(), LOOPBACK)
    assert len(problems) == 5, problems


def test_the_fake_gateway_refuses_what_the_gateways_refuse(gateway):
    info = sample_info(new_kernel_id())
    other = fakegateway.public_key_string(fakegateway.new_private_key())
    send_to(gateway, reference_payload(other, info))                  # encrypted to another key
    send_to(gateway, reference_payload(gateway.public_key, info, version=2))
    send_to(gateway, base64.b64encode(json.dumps(info).encode()))     # no wrapper: no version
    errors = [gateway.wait_delivery(10) for _ in range(3)]
    assert all(d is not None and d.error for d in errors), errors


# ---- 1-3: the three ways of giving the arguments ---------------------------------------------------------------


@pytest.mark.parametrize("equals", [False, True], ids=["opt-value", "opt=value"])
def test_new_style_arguments(gateway, launch, connect, equals):
    """The kernelspec's arguments: a version-1 payload with the 14 keys, the kernel a child of the launcher in
    its process group, and a cell runs through the ports it names."""
    kid = new_kernel_id()
    launcher = launch(new_style_args(gateway, kid, equals=equals))
    info = receive(gateway, launcher, kid)
    pid = info["pid"]
    assert pyctest.pid_alive(pid), "the payload's pid %d is not a live process%s" % (pid, launcher.describe())
    # The payload names ports that already listen (the kernel reported what it bound: no pick-then-close race).
    listening = fakegateway.listening_sockets(pid)
    for name in PORT_KEYS + ("comm_port",):
        assert (LOOPBACK, info[name]) in listening, "%s %d does not listen on %s when the payload comes: %r" % (
            name, info[name], LOOPBACK, sorted(listening))
    argv = fakegateway.cmdline_of(pid)
    assert argv and os.path.basename(argv[0]) == "pyc-kernel", "the payload's pid runs %r" % argv
    assert fakegateway.ppid_of(pid) == launcher.pid, "the kernel is not the launcher's child"
    assert info["pgid"] == os.getpgid(pid) == os.getpgid(launcher.pid), (
        "pgid %d; the kernel's group %d, the launcher's %d" % (info["pgid"], os.getpgid(pid), os.getpgid(launcher.pid)))
    kc = connect(info, LOOPBACK)
    run_one_plus_one(kc)
    assert fakegateway.heartbeat_echoes(LOOPBACK, info["hb_port"]), "the heartbeat port does not echo"
    assert len(gateway.received) == 1, "the payload was sent %d times" % len(gateway.received)


def test_legacy_remote_process_proxy_arguments(gateway, launch, connect):
    kid = new_kernel_id()
    args = ["--RemoteProcessProxy.kernel-id", kid,
            "--RemoteProcessProxy.response-address", gateway.response_address,
            "--RemoteProcessProxy.public-key", gateway.public_key,
            "--RemoteProcessProxy.port-range", "0..0",
            "--RemoteProcessProxy.spark-context-initialization-mode", "none",
            "--RemoteProcessProxy.cluster-type", "distributed",
            "--ip", LOOPBACK]
    launcher, info, kc = launched(gateway, launch, connect, args=args, kernel_id=kid)
    run_one_plus_one(kc)


@pytest.mark.parametrize("names", ["eg-address-key", "plain-address-key"])
def test_environment_only(gateway, launch, connect, names):
    """Everything from the environment, as a container's bootstrap gives it (both spellings of the address,
    key and range), with the options a kernelspec adds that pyc ignores, and options without a value (one
    followed by another option, one at the end)."""
    kid = new_kernel_id()
    if names == "eg-address-key":
        env = {"EG_RESPONSE_ADDRESS": gateway.response_address, "EG_PUBLIC_KEY": gateway.public_key,
               "PORT_RANGE": "42000..43999"}
    else:
        env = {"RESPONSE_ADDRESS": gateway.response_address, "PUBLIC_KEY": gateway.public_key,
               "EG_PORT_RANGE": "42000..43999"}
    env.update(KERNEL_ID=kid, PYC_GATEWAY_IP=LOOPBACK)
    args = ["--spark-context-initialization-mode", "none", "--cluster-type", "kubernetes",
            "--kernel-class-name", "ipykernel.ipkernel.IPythonKernel",
            "--RemoteProcessProxy.cluster-type", "--RemoteProcessProxy.spark-context-initialization-mode"]
    launcher, info, kc = launched(gateway, launch, connect, args=args, env=env, kernel_id=kid)
    ports = {k: info[k] for k in PORT_KEYS + ("comm_port",)}
    assert all(42000 <= p <= 43999 for p in ports.values()), "ports outside PORT_RANGE 42000..43999: %r" % ports
    run_one_plus_one(kc)


def test_arguments_win_over_the_environment(gateway, launch, connect):
    """An argument wins over its environment variable: the payload goes to the argument's address, encrypted
    to the argument's key, with the argument's kernel id; the environment's port range (too small) is not
    used."""
    other = FakeGateway(private_key=fakegateway.new_private_key())
    try:
        kid = new_kernel_id()
        env = {"KERNEL_ID": new_kernel_id(), "RESPONSE_ADDRESS": other.response_address,
               "PUBLIC_KEY": other.public_key, "PORT_RANGE": "40000..40010"}
        launcher = launch(new_style_args(gateway, kid, port_range="0..0"), env=env)
        info = receive(gateway, launcher, kid)
        connect(info, LOOPBACK)
        time.sleep(0.3)
        assert other.received == [], "the environment's gateway got a payload"
    finally:
        other.close()


def test_plain_names_win_over_eg_names(gateway, launch, connect):
    other = FakeGateway(private_key=fakegateway.new_private_key())
    try:
        kid = new_kernel_id()
        env = {"KERNEL_ID": kid, "RESPONSE_ADDRESS": gateway.response_address, "PUBLIC_KEY": gateway.public_key,
               "EG_RESPONSE_ADDRESS": other.response_address, "EG_PUBLIC_KEY": other.public_key,
               "PYC_GATEWAY_IP": LOOPBACK}
        launcher = launch([], env=env)
        receive(gateway, launcher, kid)
        time.sleep(0.3)
        assert other.received == [], "EG_RESPONSE_ADDRESS's gateway got a payload"
    finally:
        other.close()


@pytest.mark.parametrize("how", ["opt=value", "env"])
def test_a_full_pem_public_key_is_accepted(gateway, launch, connect, how):
    """A full PEM text (header, footer, newlines) works as the key, given as --public-key=PEM or in PUBLIC_KEY.
    (`--public-key PEM` as two words is not tried: the PEM begins with dashes, so an argparse-like parser, as
    upstream's is, takes it for an option.)"""
    pem = gateway.private_key.publickey().export_key("PEM").decode()
    kid = new_kernel_id()
    args = ["--kernel-id", kid, "--response-address", gateway.response_address, "--ip", LOOPBACK]
    env = None
    if how == "env":
        env = {"PUBLIC_KEY": pem}
    else:
        args.append("--public-key=" + pem)
    launcher, info, kc = launched(gateway, launch, connect, args=args, env=env, kernel_id=kid)
    run_one_plus_one(kc)


def test_payload_delivery_is_retried_until_the_gateway_listens(launch, connect):
    """Connect failures are retried: a gateway whose response port starts listening 1.5 s after the launch
    still gets the payload (once)."""
    late = FakeGateway(listen=False)
    try:
        kid = new_kernel_id()
        launcher = launch(new_style_args(late, kid))
        time.sleep(1.5)
        assert launcher.proc.poll() is None, "the launcher gave up at once" + launcher.describe()
        late.start_listening()
        info = receive(late, launcher, kid)
        run_one_plus_one(connect(info, LOOPBACK))
        assert len(late.received) == 1
    finally:
        late.close()


# ---- 4: the communication port ----------------------------------------------------------------------------------


def test_comm_port_signals_and_shutdown(gateway, launch, connect):
    """{"signum": 0} is a liveness poll; unknown requests and signals outside the allowlist are ignored;
    {"signum": 2} interrupts a running cell; a control-channel shutdown_request then {"shutdown": 1} (what a
    gateway sends at shutdown) end kernel and launcher (exit 0), close the comm port and leave TMPDIR empty."""
    launcher, info, kc = launched(gateway, launch, connect)
    comm = info["comm_port"]

    send_listener_request(LOOPBACK, comm, {"signum": 0})
    run_one_plus_one(kc)
    assert launcher.proc.poll() is None and pyctest.pid_alive(info["pid"])

    # Not JSON, JSON of no known request, and SIGILL (4, not in the allowlist: it would kill the kernel).
    send_listener_request(LOOPBACK, comm, b"this is not json")
    send_listener_request(LOOPBACK, comm, {"hello": 1})
    send_listener_request(LOOPBACK, comm, {"signum": 4})
    time.sleep(0.5)
    assert pyctest.pid_alive(info["pid"]), "the kernel died after an ignored request" + launcher.describe()
    run_one_plus_one(kc)

    msg_id = start_sleeping_cell(kc)
    t0 = time.monotonic()
    send_listener_request(LOOPBACK, comm, {"signum": int(signal.SIGINT)})
    reply = pyctest.get_reply(kc, msg_id, timeout=10)
    took = time.monotonic() - t0
    assert reply["content"]["status"] == "error", reply["content"]
    assert reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
    assert took < 5, "the interrupt took %.1f s" % took
    pyctest.iopub_for(kc, msg_id, check=False)
    run_one_plus_one(kc)

    gateway_shutdown(kc, launcher, info, LOOPBACK, timeout=10)
    assert_tmpdir_empty(launcher)
    assert_no_leftovers(launcher, info["kernel_id"])


def test_comm_port_shutdown_alone_ends_the_kernel(gateway, launch, connect):
    """{"shutdown": 1} with no shutdown_request: the comm port stops listening at once, and the kernel is
    ended (SIGTERM after a 5 s grace, a clean exit): launcher exit 0 within the grace plus a few seconds."""
    launcher, info, kc = launched(gateway, launch, connect)
    comm = info["comm_port"]
    send_listener_request(LOOPBACK, comm, {"shutdown": 1}, shutdown_socket=True)
    assert wait_refused(LOOPBACK, comm, 2.0), "the comm port still listens after {\"shutdown\": 1}"
    assert_exits(launcher, 0, timeout=15.0, why=" after {\"shutdown\": 1} (5 s grace, then SIGTERM)")
    assert wait_gone(info["pid"], 5), "the kernel outlived its launcher"
    assert_tmpdir_empty(launcher)


# ---- 5: failures -----------------------------------------------------------------------------------------------


def test_a_killed_kernel_ends_the_launcher(gateway, launch, connect):
    launcher, info, kc = launched(gateway, launch, connect)
    os.kill(info["pid"], signal.SIGKILL)
    assert_exits(launcher, 128 + signal.SIGKILL, why=" after the kernel's SIGKILL")
    assert connection_refused(LOOPBACK, info["comm_port"]), "the comm port still accepts connections"
    assert_no_leftovers(launcher)


def _pem_file(tmp_path, gateway):
    path = tmp_path / "gateway-public.pem"
    path.write_bytes(gateway.private_key.publickey().export_key("PEM"))
    return str(path)


def _ec_key(tmp_path, gateway):
    from Cryptodome.PublicKey import ECC

    return base64.b64encode(ECC.generate(curve="P-256").public_key().export_key(format="DER")).decode()


def _without(option):
    def args(tmp_path, gateway):
        a = new_style_args(gateway, new_kernel_id())
        i = a.index(option)
        return a[:i] + a[i + 2:]
    return args


def _with(option, value):
    def args(tmp_path, gateway):
        v = value(tmp_path, gateway) if callable(value) else value
        a = new_style_args(gateway, new_kernel_id())
        if option in a:
            a[a.index(option) + 1] = v
        else:
            a += [option, v]
        return a
    return args


USAGE_ERRORS = {
    "no-kernel-id": _without("--kernel-id"),
    "no-public-key": _without("--public-key"),
    "key-notakey": _with("--public-key", "notakey"),
    "key-file-path": _with("--public-key", _pem_file),
    "key-not-der": _with("--public-key", base64.b64encode(b"hello world, not a key").decode()),
    "key-ec-not-rsa": _with("--public-key", _ec_key),
    "range-too-small": _with("--port-range", "40000..40010"),
    "range-not-a-range": _with("--port-range", "abc"),
    "range-reversed": _with("--port-range", "41000..40000"),
    "address-nohostport": _with("--response-address", "nohostport"),
    "address-bad-port": _with("--response-address", "127.0.0.1:notaport"),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_bad_arguments_stop_the_launcher_before_anything_starts(gateway, launch, tmp_path, case):
    args = USAGE_ERRORS[case](tmp_path, gateway)
    launcher = launch(args)
    assert_exits(launcher, EXIT_USAGE, why=" for %s" % case)
    assert any(line.startswith("pyc-kernel gateway-launch: ") for line in launcher.log().splitlines()), (
        "no message on stderr" + launcher.describe())
    assert_no_leftovers(launcher)
    assert_tmpdir_empty(launcher)
    time.sleep(0.2)
    assert gateway.received == [], "a payload was sent"


def test_an_undeliverable_payload_stops_the_kernel(launch):
    """Nothing listens at the response address (the port is bound but not listening, so connections are
    refused): the launcher retries for PYC_GATEWAY_RESPONSE_TIMEOUT (2 s), stops the kernel, exits 1, and no
    kernel is left."""
    deaf = FakeGateway(listen=False)
    try:
        kid = new_kernel_id()
        launcher = launch(new_style_args(deaf, kid), env={"PYC_GATEWAY_RESPONSE_TIMEOUT": "2"})
        took = assert_exits(launcher, EXIT_FAILURE, timeout=10.0, why=" with nothing listening")
        assert took >= 1.5, "the launcher gave up after %.1f s, before PYC_GATEWAY_RESPONSE_TIMEOUT" % took
        assert_no_leftovers(launcher, kid)
    finally:
        deaf.close()


def test_port_range_holds_every_port(gateway, launch, connect):
    kid = new_kernel_id()
    launcher = launch(new_style_args(gateway, kid, port_range="40000..41000"))
    info = receive(gateway, launcher, kid)
    ports = {k: info[k] for k in PORT_KEYS + ("comm_port",)}
    assert all(40000 <= p <= 41000 for p in ports.values()), "ports outside 40000..41000: %r" % ports
    run_one_plus_one(connect(info, LOOPBACK))


def test_pull_mode_without_a_response_address(launch, connect):
    """No --response-address: the kernel runs locally and the launcher logs its connection file's path."""
    kid = new_kernel_id()
    launcher = launch(["--kernel-id", kid, "--public-key", fakegateway.public_key_string(
        fakegateway.shared_private_key()), "--ip", LOOPBACK])
    deadline = time.monotonic() + fakegateway.START_TIMEOUT
    info = None
    while info is None and time.monotonic() < deadline and launcher.proc.poll() is None:
        for word in launcher.log().split():
            word = word.strip("'\"")
            if word.startswith("/") and word.endswith(".json") and os.path.exists(word):
                try:
                    with open(word) as f:
                        candidate = json.load(f)
                except (OSError, ValueError):
                    continue
                if "shell_port" in candidate:
                    info = candidate
        time.sleep(0.1)
    assert info is not None, "no connection file path in the launcher's log" + launcher.describe()
    launcher.adopt_kernel(info.get("pid"))
    for pid in pyctest.processes_naming(launcher.tmpdir):
        if pid != launcher.pid:
            launcher.adopt_kernel(pid)
    run_one_plus_one(connect(info, LOOPBACK))


# ---- signals to the launcher, the kernel's own SIGTERM -------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_to_the_launcher_ends_the_kernel(gateway, launch, connect, sig):
    """Forwarded to the kernel as SIGTERM; the kernel exits cleanly (0), and the launcher exits with its
    status (gateway.h)."""
    launcher, info, kc = launched(gateway, launch, connect)
    launcher.signal(sig)
    assert_exits(launcher, 0, why=" after %s" % sig.name)
    assert wait_gone(info["pid"], 5), "the kernel outlived its launcher"
    assert connection_refused(LOOPBACK, info["comm_port"])
    assert_tmpdir_empty(launcher)
    assert_no_leftovers(launcher)


def test_sigint_to_the_launcher_is_ignored(gateway, launch, connect):
    launcher, info, kc = launched(gateway, launch, connect)
    launcher.signal(signal.SIGINT)
    time.sleep(1.0)
    assert launcher.proc.poll() is None, "SIGINT ended the launcher" + launcher.describe()
    assert pyctest.pid_alive(info["pid"])
    run_one_plus_one(kc)
    send_listener_request(LOOPBACK, info["comm_port"], {"signum": 0})


def test_the_kernel_exits_cleanly_on_sigterm(gateway, launch, connect, tmp_path):
    """SIGTERM to the kernel itself: atexit handlers run, the kernel exits 0, the launcher follows with 0."""
    launcher, info, kc = launched(gateway, launch, connect)
    marker = str(tmp_path / "atexit-ran")
    reply, msgs = pyctest.execute(kc, "import atexit; atexit.register(lambda: open(%r, 'w').write('ran'))" % marker)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert not os.path.exists(marker)
    os.kill(info["pid"], signal.SIGTERM)
    assert_exits(launcher, 0, why=" after SIGTERM to the kernel")
    assert wait_gone(info["pid"], 5)
    assert os.path.exists(marker), "the kernel's atexit handler did not run" + launcher.describe()
    with open(marker) as f:
        assert f.read() == "ran"
    assert_tmpdir_empty(launcher)
