"""The kernel in the user's Python environment (issue 20), with real virtual environments made here
(`python3 -m venv`, with and without --system-site-packages): `pyc-kernel install` run from inside one
records it; a cell then sees the environment's sys.prefix and sys.executable, imports what only the
environment has, and subprocesses, multiprocessing and `!python` agree with it; `%pip install` of a wheel
built here (no network) imports in the next cell; an environment of another Python version is refused at
install and at start, with the message checked; `--no-env` and `--python` choose explicitly.

The install-from-the-environment flow against ipykernel (`ENV/bin/python -m ipykernel install`) runs in an
environment with the system's site-packages, where ipykernel is importable.
"""

import json
import os
import subprocess
import sys
import zipfile

import pytest

import pyctest
from pyctest import IS_PYC, PYC_KERNEL, PYC_PYTHON, TIMEOUT, Kernel, eval_value, execute, pyc_only

pytestmark = pytest.mark.skipif(not os.path.exists(PYC_PYTHON), reason="no interpreter to make environments with")


def make_venv(path, system_site=False, with_pip=True):
    """A venv at path; with_pip False leaves pip out (3 s less to make it), for a test that runs no pip in it."""
    args = [PYC_PYTHON, "-m", "venv", str(path)] + (["--system-site-packages"] if system_site else []) + \
        ([] if with_pip else ["--without-pip"])
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        pytest.skip("python3 -m venv does not work here: %s" % p.stderr[-300:])
    site = subprocess.run([str(path / "bin" / "python3"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, timeout=60).stdout.strip()
    with open(os.path.join(site, "only_in_env.py"), "w") as f:
        f.write("WHERE = %r\n" % str(path))
    return path


def install_from(env, name, *extra):
    """`pyc-kernel install --user --name NAME` as run from a shell where env is activated."""
    shell_env = pyctest.child_env(VIRTUAL_ENV=str(env), PATH="%s/bin:%s" % (env, os.environ.get("PATH", "")))
    return subprocess.run([PYC_KERNEL, "install", "--user", "--name", name] + list(extra), capture_output=True,
                          text=True, timeout=30, env=shell_env)


def wheel(tmp_path, name="pycdemo", version="0.1"):
    """A pure-Python wheel written by hand (a zip with a dist-info): pip installs it without any network."""
    path = tmp_path / ("%s-%s-py3-none-any.whl" % (name, version))
    info = "%s-%s.dist-info" % (name, version)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("%s/__init__.py" % name, "ANSWER = 42\n")
        z.writestr("%s/METADATA" % info, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
        z.writestr("%s/WHEEL" % info, "Wheel-Version: 1.0\nGenerator: pyc-tests\nRoot-Is-Purelib: true\n"
                                       "Tag: py3-none-any\n")
        z.writestr("%s/RECORD" % info, "")
    return path


@pyc_only
@pytest.mark.parametrize("system_site", [False, True], ids=["isolated", "system-site-packages"])
def test_a_kernel_in_a_virtual_environment(tmp_path, system_site):
    """A kernel installed from an activated venv runs in it: sys.prefix, sys.executable, the venv's own
    modules, its subprocesses and `!` commands.  The isolated venv also runs multiprocessing's spawn and
    `%pip install`; the one with the system's site-packages checks what differs (numpy, a Debian package, is
    visible) and is made without pip (3 s less)."""
    env = make_venv(tmp_path / "env", system_site, with_pip=not system_site)
    p = install_from(env, "pyc-venv-test")
    assert p.returncode == 0, p.stderr
    assert str(env) in p.stdout                 # it says so
    k = Kernel("pyc-venv-test")
    try:
        kc = k.kc
        assert eval_value(kc, "__import__('sys').prefix") == repr(str(env))
        assert eval_value(kc, "__import__('sys').executable") == repr(str(env / "bin" / "python3"))
        assert eval_value(kc, "__import__('only_in_env').WHERE") == repr(str(env))
        # numpy is a Debian package: visible only with the system's site-packages
        reply, _ = execute(kc, "import numpy", check=False)
        assert reply["content"]["status"] == ("ok" if system_site else "error")
        out = "import subprocess, sys\nprint(subprocess.check_output([sys.executable, '-c', " \
              "'import sys; print(sys.prefix)'], text=True).strip())"
        reply, msgs = execute(kc, out)
        assert pyctest.stream_text(msgs).strip() == str(env)
        reply, msgs = execute(kc, "!python -c 'import sys; print(sys.prefix)'")
        assert pyctest.stream_text(msgs).strip() == str(env)
        info = k.kernel_info()["pyc"]["environment"]
        assert info["prefix"] == str(env) and info["venv"] is True
        if system_site:
            return
        reply, msgs = execute(kc, "import multiprocessing as mp\nctx = mp.get_context('spawn')\n"
                                  "with ctx.Pool(1) as pool:\n    print(pool.apply(eval, (\"__import__('sys').prefix\",)))")
        assert reply["content"]["status"] == "ok", reply["content"]
        assert pyctest.stream_text(msgs).strip() == str(env)
        # %pip installs where the kernel imports from, and the package imports in the next cell
        whl = wheel(tmp_path)
        reply, msgs = execute(kc, "%%pip install --no-index --no-deps %s" % whl, timeout=120)
        assert reply["content"]["status"] == "ok", pyctest.stream_text(msgs, "stderr")
        assert eval_value(kc, "__import__('pycdemo').ANSWER") == "42"
    finally:
        k.shutdown(now=True)


@pyc_only
def test_pip_on_the_system_interpreter_says_what_to_do(kernel):
    """On Debian's python3 (externally managed, PEP 668) %pip install explains instead of leaving pip's refusal
    alone."""
    import sysconfig

    if not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")):
        pytest.skip("the system interpreter is not externally managed here")
    reply, msgs = execute(kernel.kc, "%pip install --no-index nothing-at-all-here", timeout=120)
    err = pyctest.stream_text(msgs, "stderr")
    assert "externally managed" in err and "venv" in err


@pyc_only
def test_another_python_version_is_refused(tmp_path):
    env = make_venv(tmp_path / "old", with_pip=False)
    cfg = env / "pyvenv.cfg"
    cfg.write_text("\n".join("version = 3.9.2" if line.startswith("version") else line
                             for line in cfg.read_text().splitlines()) + "\n")
    p = install_from(env, "pyc-old")
    assert p.returncode != 0
    # the suite runs under the interpreter pyc-kernel was built for (configure's PYTHON)
    embedded = "embeds Python %d.%d" % sys.version_info[:2]
    assert "Python 3.9" in p.stderr and embedded in p.stderr and "./configure PYTHON=" in p.stderr, p.stderr
    # and at start, when an environment is named by hand: the kernel ends with the same sentence
    conn = tmp_path / "c.json"
    from jupyter_client.connect import write_connection_file

    write_connection_file(str(conn), ip="127.0.0.1", key=b"k")
    s = subprocess.run([PYC_KERNEL, "-f", str(conn)], capture_output=True, text=True, timeout=TIMEOUT,
                       env=pyctest.child_env(PYC_PYTHON_EXE=str(env / "bin" / "python3")))
    assert s.returncode == 2 and "Python 3.9" in s.stderr and "./configure PYTHON=" in s.stderr, s.stderr


@pyc_only
def test_no_env_and_python_choose(tmp_path):
    env = make_venv(tmp_path / "env", with_pip=False)
    p = install_from(env, "pyc-noenv", "--no-env")
    assert p.returncode == 0, p.stderr
    spec = json.load(open(os.path.join(os.environ["JUPYTER_DATA_DIR"], "kernels", "pyc-noenv", "kernel.json")))
    assert "PYC_PYTHON_EXE" not in spec.get("env", {})
    p = subprocess.run([PYC_KERNEL, "install", "--user", "--name", "pyc-chosen", "--python", str(env / "bin" / "python3")],
                       capture_output=True, text=True, timeout=30, env=pyctest.child_env())
    assert p.returncode == 0, p.stderr
    spec = json.load(open(os.path.join(os.environ["JUPYTER_DATA_DIR"], "kernels", "pyc-chosen", "kernel.json")))
    assert spec["env"]["PYC_PYTHON_EXE"] == str(env / "bin" / "python3")
    p = subprocess.run([PYC_KERNEL, "install", "--user", "--name", "x", "--python", str(tmp_path)],
                       capture_output=True, text=True, timeout=30, env=pyctest.child_env())
    assert p.returncode != 0 and "not a Python environment" in p.stderr, p.stderr


def test_install_from_the_environment_like_ipykernel(tmp_path):
    """The flow a venv user knows, with ipykernel: ENV/bin/python -m ipykernel install --user --name ENV; and
    pyc's: pyc-kernel install --user --name ENV from the activated environment.  Both kernels report the
    environment's prefix."""
    env = make_venv(tmp_path / "env", system_site=True, with_pip=False)
    if IS_PYC:
        p = install_from(env, "env-kernel")
    else:
        p = subprocess.run([str(env / "bin" / "python3"), "-m", "ipykernel", "install", "--user", "--name",
                            "env-kernel"], capture_output=True, text=True, timeout=120, env=pyctest.child_env())
    assert p.returncode == 0, p.stderr
    k = Kernel("env-kernel")
    try:
        assert eval_value(k.kc, "__import__('sys').prefix") == repr(str(env))
        assert eval_value(k.kc, "__import__('only_in_env').WHERE") == repr(str(env))
    finally:
        k.shutdown(now=True)
