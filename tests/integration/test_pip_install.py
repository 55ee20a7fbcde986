"""pyc installed with pip into a Python environment, as ipykernel is (README, "Environments"): pyproject.toml's
in-tree backend (pybuild/pyc_build.py) builds the source with autotools against the environment's python and
installs the programs, pyc_client and the kernelspec into the environment; its kernel runs that environment.

- The kernelspec's --python-env (kernel/install.h), with the built pyc-kernel and hand-written kernelspecs: the
  environment the kernelspec lies in, named as given (a "..", not a resolved link); a kernelspec reached through
  a link to another environment's folder runs that one; a prefix that is no environment (pip install --user's
  ~/.local) leaves the built-in interpreter; a pyvenv.cfg that cannot be used is refused (exit 2).
- A missing system library ends `pip install` with the one sentence naming its Debian package (a fake
  pkg-config that knows no libzmq).
- slow (make check-slow; the build takes a minute or two): `python -m pip install --no-build-isolation
  --no-index <source>` into a venv made with --system-site-packages (jupyter_client is Debian's); the venv's
  `jupyter kernelspec list` shows pyc in the venv's share/jupyter/kernels; jupyter_client run by the venv's
  python starts it, and a cell reports the venv's sys.prefix and sys.executable; `pip uninstall pyc` leaves
  none of the files.

Every process a test starts runs in a session of its own and is killed by its pid (pip's and make's children
with their process group) when it outlives its time.
"""

import json
import os
import signal
import subprocess
import sys

import pytest

import pyctest
from pyctest import PYC_KERNEL, PYC_PYTHON, PYC_SRCDIR, Kernel, eval_value, pyc_only

pytestmark = [pyc_only,
              pytest.mark.skipif(not os.path.exists(PYC_PYTHON), reason="no interpreter to make environments with")]


def run(argv, timeout, env=None, cwd=None):
    """subprocess.run in a process group of its own, killed whole (by the group of the pid we started) when it
    outlives timeout."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd,
                         start_new_session=True)
    pyctest.register_pid(p.pid)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        pytest.fail("%s outlived %d s; its output ends:\n%s" % (argv[:4], timeout, out[-3000:]))
    return subprocess.CompletedProcess(argv, p.returncode, out, None)


def make_venv(path, system_site=False, pip=True):
    args = [PYC_PYTHON, "-m", "venv", str(path)] + (["--system-site-packages"] if system_site else []) + \
        ([] if pip else ["--without-pip"])
    p = run(args, 180)
    if p.returncode != 0:
        pytest.skip("python3 -m venv does not work here (Debian: apt-get install python3-venv): %s" % p.stdout[-300:])
    return path


def isolated_env(tmp_path, **extra):
    """The environment of what runs in the venv: no JUPYTER_PATH (the suite's own kernelspecs named pyc are
    there), fresh Jupyter user dirs and HOME (pip's cache), no pip configuration file of the machine's."""
    env = pyctest.child_env(**extra)
    env.pop("JUPYTER_PATH", None)
    for var, sub in (("HOME", "home"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython")):
        env[var] = str(tmp_path / "jupyter" / sub)
        os.makedirs(env[var], exist_ok=True)
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


# ---- --python-env, with the built pyc-kernel -------------------------------------------------------------

def spec_in(prefix, name):
    """A kernelspec as pip installs it, in PREFIX/share/jupyter/kernels/NAME, naming the built pyc-kernel."""
    kdir = prefix / "share" / "jupyter" / "kernels" / name
    kdir.mkdir(parents=True)
    up = "{resource_dir}/../../../.."
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [PYC_KERNEL, "--python-env", up, "-f", "{connection_file}"],
        "display_name": name, "language": "python", "interrupt_mode": "signal"}))
    return kdir


def start_from(kernels_dir, name):
    from jupyter_client.kernelspec import KernelSpecManager

    return Kernel(name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels_dir)]))


def test_python_env_is_the_environment_the_kernelspec_lies_in(tmp_path):
    env = make_venv(tmp_path / "env", pip=False)
    spec_in(env, "pyc-in-env")
    k = start_from(env / "share" / "jupyter" / "kernels", "pyc-in-env")
    try:
        assert eval_value(k.kc, "__import__('sys').prefix") == repr(str(env))
        assert eval_value(k.kc, "__import__('sys').executable") == repr(str(env / "bin" / "python3"))
        assert eval_value(k.kc, "__import__('os').environ['PATH'].split(':')[0]") == repr(str(env / "bin"))
    finally:
        k.shutdown(now=True)


def test_python_env_through_a_link_is_where_the_link_leads(tmp_path):
    """A kernelspec folder that is a link into an environment: "{resource_dir}/../../../.." read by name would
    be the folder holding the link, which the kernel program (found by the same path) is not in."""
    env = make_venv(tmp_path / "env", pip=False)
    kdir = spec_in(env, "pyc-linked")
    other = tmp_path / "other" / "share" / "jupyter" / "kernels"
    other.mkdir(parents=True)
    os.symlink(kdir, other / "pyc-linked")
    k = start_from(other, "pyc-linked")
    try:
        assert eval_value(k.kc, "__import__('sys').prefix") == repr(str(env))
    finally:
        k.shutdown(now=True)


def test_python_env_that_is_no_environment_keeps_the_built_interpreter(tmp_path):
    """pip install --user puts the kernelspec under ~/.local, which is no environment: the kernel runs the
    interpreter it was built for."""
    userbase = tmp_path / "local"
    spec_in(userbase, "pyc-user")
    k = start_from(userbase / "share" / "jupyter" / "kernels", "pyc-user")
    try:
        prefix = eval_value(k.kc, "__import__('sys').prefix")
        assert prefix == eval_value(k.kc, "__import__('sys').base_prefix")
        assert str(userbase) not in prefix
    finally:
        k.shutdown(now=True)


def test_python_env_with_an_unusable_pyvenv_cfg_is_refused(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyvenv.cfg").write_text("home = /nowhere\n")
    p = run([PYC_KERNEL, "--python-env", str(broken), "-f", str(tmp_path / "never-read.json")], 30)
    assert p.returncode == 2, p.stdout
    assert "--python-env" in p.stdout and str(broken) in p.stdout, p.stdout
    p = run([PYC_KERNEL, "--python-env", str(tmp_path / "missing"), "-f", str(tmp_path / "never-read.json")], 30)
    assert p.returncode == 2 and "No such file" in p.stdout, p.stdout


# ---- pip install ------------------------------------------------------------------------------------------

FAKE_PKG_CONFIG = """#!/bin/sh
# pkg-config that has never heard of libzmq
for a in "$@"; do case "$a" in libzmq*) exit 1 ;; esac; done
exec pkg-config "$@"
"""


def test_a_missing_library_is_named_with_its_debian_package(tmp_path):
    venv = make_venv(tmp_path / "venv", system_site=True)
    fake = tmp_path / "fake-pkg-config"
    fake.write_text(FAKE_PKG_CONFIG)
    fake.chmod(0o755)
    env = isolated_env(tmp_path, PKG_CONFIG=str(fake))
    p = run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-build-isolation", "--no-index", PYC_SRCDIR],
            300, env=env, cwd=str(tmp_path))
    assert p.returncode != 0, p.stdout[-3000:]
    lines = [line.strip() for line in p.stdout.splitlines()]
    assert "pyc needs libzmq's headers: apt-get install libzmq3-dev" in lines, p.stdout[-3000:]
    assert not (venv / "bin" / "pyc-kernel").exists()


KERNEL_SCRIPT = r"""
import json, sys
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="pyc", startup_timeout=60)
print(json.dumps({"kernel_pid": km.provisioner.process.pid}), flush=True)
try:
    out = []
    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
    reply = kc.execute_interactive("import sys, json; print(json.dumps([sys.prefix, sys.executable]))",
                                   output_hook=hook, timeout=60)
    print(json.dumps({"status": reply["content"]["status"], "cell": json.loads("".join(out)),
                      "resource_dir": km.kernel_spec.resource_dir, "argv": km.kernel_spec.argv}), flush=True)
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=False)
"""


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_pip_install_into_a_venv_then_uninstall(tmp_path):
    venv = make_venv(tmp_path / "venv", system_site=True)
    py = str(venv / "bin" / "python")
    env = isolated_env(tmp_path, PATH="%s:%s" % (venv / "bin", os.environ.get("PATH", "")), VIRTUAL_ENV=str(venv))
    p = run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", PYC_SRCDIR], 1200, env=env,
            cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout[-5000:]

    site = run([py, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"], 60, env=env).stdout.strip()
    installed = [venv / "bin" / "pyc-kernel", venv / "bin" / "pyc",
                 venv / "share" / "jupyter" / "kernels" / "pyc" / "kernel.json",
                 venv / "share" / "jupyter" / "kernels" / "pyc" / "logo-64x64.png",
                 os.path.join(site, "pyc_client", "__init__.py"), os.path.join(site, "pyc_client", "_digest.py")]
    for path in installed:
        assert os.path.exists(path), path
    for prog in ("pyc-kernel", "pyc"):
        assert os.access(venv / "bin" / prog, os.X_OK), prog
    p = run([str(venv / "bin" / "pyc-kernel"), "--version"], 30, env=env)
    assert p.returncode == 0 and p.stdout.startswith("pyc-kernel "), p.stdout
    # pyc_client and its provisioner's entry point, for the venv's python
    p = run([py, "-c", "import pyc_client, importlib.metadata as m; print(pyc_client.__file__); "
                       "print([e.value for e in m.distribution('pyc').entry_points])"], 60, env=env)
    assert p.returncode == 0 and p.stdout.startswith(site), p.stdout
    assert "pyc_client._provisioner:HandshakeProvisioner" in p.stdout, p.stdout
    assert "pyc_client._template:TemplateProvisioner" in p.stdout, p.stdout

    # The environment's Jupyter sees the kernelspec in the environment's data dir (`jupyter kernelspec list`;
    # Debian's /usr/bin/jupyter-kernelspec would run the system's python, so the venv's runs the app itself).
    p = run([py, "-m", "jupyter_client.kernelspecapp", "list", "--json"], 60, env=env)
    assert p.returncode == 0, p.stdout
    specs = json.loads(p.stdout[p.stdout.index("{"):])["kernelspecs"]
    assert specs["pyc"]["resource_dir"] == str(venv / "share" / "jupyter" / "kernels" / "pyc"), specs

    # A kernel started by the environment's jupyter_client runs the environment's Python.
    script = tmp_path / "start_kernel.py"
    script.write_text(KERNEL_SCRIPT)
    proc = subprocess.Popen([py, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    pyctest.register_pid(proc.pid)
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for r in results:
        if "kernel_pid" in r:
            pyctest.register_pid(r["kernel_pid"])
            if pyctest.pid_alive(r["kernel_pid"]):
                pyctest.kill_pid(r["kernel_pid"])
                pytest.fail("the kernel outlived its shutdown")
    assert proc.returncode == 0 and len(results) == 2, "stdout:\n%s\nstderr:\n%s" % (out, err[-3000:])
    cell = results[1]
    assert cell["status"] == "ok", cell
    assert cell["cell"] == [str(venv), str(venv / "bin" / "python3")], cell
    assert cell["resource_dir"] == str(venv / "share" / "jupyter" / "kernels" / "pyc"), cell

    p = run([py, "-m", "pip", "uninstall", "-y", "pyc"], 300, env=env)
    assert p.returncode == 0, p.stdout
    for path in installed:
        assert not os.path.exists(path), path
    assert not (venv / "share" / "jupyter" / "kernels" / "pyc").exists()
    assert not os.path.exists(os.path.join(site, "pyc_client"))
    assert not [n for n in os.listdir(site) if n.startswith("pyc-")], os.listdir(site)
    # The environment's Jupyter no longer lists the environment's pyc (a pyc installed system-wide, as README's
    # quick start does under /usr/local, may still be listed: it is not this one).
    p = run([py, "-m", "jupyter_client.kernelspecapp", "list", "--json"], 60, env=env)
    left = json.loads(p.stdout[p.stdout.index("{"):])["kernelspecs"].get("pyc")
    assert left is None or not left["resource_dir"].startswith(str(venv)), left


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
