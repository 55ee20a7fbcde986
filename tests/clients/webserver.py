"""What the client tests that drive a Jupyter server (the Notebook and JupyterLab pages in Chromium,
@jupyterlab/services from Node) share: prerequisites, ports, the server's REST API, the browser drivers
(tests/clients/browser/*.mjs), and the processes they start, each ended by pid at the end (the servers'
kernels and Chromium's helpers included)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from pyctest import child_env, descendants_of, kill_pid, pid_alive, register_pid

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

BROWSER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")
CHROMIUM = os.environ.get("PYC_CHROMIUM", "/usr/bin/chromium")


def require(ok, what):
    """Skip (or, in CI, fail) when a prerequisite of a client test is missing."""
    if ok:
        return
    if IN_CI:
        pytest.fail("%s (CI is set, so a missing prerequisite is a failure; .ci/deps installs it)" % what)
    pytest.skip("%s; run .ci/deps to install it" % what)


def free_port():
    """A port for a server the test starts: from this worker's band (tests/testports.py), which no other
    process of the run is given, so the server does not lose it before it binds it ("port ... is already in
    use", seen in CI)."""
    import testports

    return testports.free_port()


def marked_pids(marker):
    """Pids (other than this one) whose command line contains marker."""
    key = marker.encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                if key in f.read():
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


class Watched:
    """Processes started by this module: each pid, and every process found under it while it ran, is
    registered with pyctest and killed by pid at the end."""

    def __init__(self, marker=None):
        # marker: a path unique to this run; a process whose command line holds it is ours even when it has
        # left the tree (Chromium's crashpad handlers are reparented to init, their --database is in $HOME)
        self.marker = marker
        self.roots = []
        self.seen = set()

    def start(self, argv, env=None, **kw):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=env or child_env(), **kw)
        register_pid(p.pid)
        self.roots.append(p)
        return p

    def scan(self):
        found = [c for p in self.roots if p.poll() is None for c in descendants_of(p.pid)]
        if self.marker is not None:
            found += marked_pids(self.marker)
        for c in found:
            if c not in self.seen:
                self.seen.add(c)
                register_pid(c)

    def wait(self, p, timeout):
        """Wait for p while scanning for new descendants; returns False on timeout."""
        deadline = time.monotonic() + timeout
        while p.poll() is None:
            self.scan()
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, p, grace=10.0):
        """SIGTERM (a Jupyter server then shuts its kernels down), then SIGKILL by pid."""
        self.scan()
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                kill_pid(p.pid)
        p.poll()

    def close(self):
        for p in reversed(self.roots):
            self.stop(p)
        self.scan()
        deadline = time.monotonic() + 3
        while any(pid_alive(c) for c in self.seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        for c in self.seen:
            kill_pid(c)


def api_call(base, token, method, path, timeout=2.0):
    """A call to the server's REST API with the token; returns its JSON answer (None when it has no body, as
    a DELETE's)."""
    req = urllib.request.Request(base + path, method=method, headers={"Authorization": "token " + token})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read().decode()
    return json.loads(body) if body else None


def api_get(base, token, path, timeout=2.0):
    return api_call(base, token, "GET", path, timeout)


def wait_server(proc, base, token, log_path, timeout=30.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            return api_get(base, token, "/api/kernelspecs")
        except Exception as e:  # not listening yet
            last = e
            time.sleep(0.1)
    with open(log_path, errors="replace") as f:
        log = f.read()[-3000:]
    pytest.fail("the server did not answer at %s (%s; exit %s):\n%s" % (base, last, proc.poll(), log))


# ---- the browser tests ------------------------------------------------------------------------------------


def require_browser():
    """node, Chromium and playwright-core (npm ci in tests/clients/browser)."""
    require(shutil.which("node") is not None, "node is not installed")
    require(os.access(CHROMIUM, os.X_OK), "Chromium is not installed (%s; Debian package chromium)" % CHROMIUM)
    require(
        os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")),
        "playwright-core is not installed (npm ci in %s)" % BROWSER_DIR,
    )


def artifacts_dir(tmp_path_factory):
    """Where screenshots go: $PYC_ARTIFACTS_DIR, or <pytest tmp dir>/artifacts."""
    d = os.environ.get("PYC_ARTIFACTS_DIR") or str(tmp_path_factory.getbasetemp() / "artifacts")
    os.makedirs(d, exist_ok=True)
    print("artifacts dir: %s" % d)
    return d


#: JupyterLab 4 settings (for JupyterLab and Notebook 7) of the browser tests: every cell in the DOM (the
#: default windowing attaches only the cells in view, and the tests read them all), and no news toast.
#: The completer keeps its defaults (providerTimeout 1000 ms): the tests see what a user sees.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


def lab_env(tmp, extra_settings=None):
    """The environment of a JupyterLab 4 based server: its user settings (LAB_SETTINGS, and extra_settings)
    and workspaces in tmp, so that nothing of the user's or of an earlier run is restored."""
    settings = os.path.join(str(tmp), "lab-user-settings")
    for name, values in dict(LAB_SETTINGS, **(extra_settings or {})).items():
        path = os.path.join(settings, name + ".jupyterlab-settings")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(values, f)
    workspaces = os.path.join(str(tmp), "lab-workspaces")
    os.makedirs(workspaces, exist_ok=True)
    return child_env(JUPYTERLAB_SETTINGS_DIR=settings, JUPYTERLAB_WORKSPACES_DIR=workspaces)


def start_jupyter(watched, argv, base, token, log_path, env=None):
    """Starts a Jupyter server (argv) with its output in log_path; returns it once it answers, after
    checking that it sees the pyc kernelspec."""
    with open(log_path, "wb") as log:
        server = watched.start(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    specs = wait_server(server, base, token, log_path)
    assert "pyc" in specs.get("kernelspecs", {}), "the server does not see the pyc kernelspec: %s" % specs
    return server


def run_driver(watched, script, cfg, tmp, limit):
    """Runs node BROWSER_DIR/script with cfg (written to tmp/config.json) and returns the JSON it printed
    last, with its stderr under "stderr"; fails the test when it does not finish within limit seconds or
    prints no JSON."""
    cfg_path = os.path.join(str(tmp), "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    out_path = os.path.join(str(tmp), "node-stdout.txt")
    err_path = os.path.join(str(tmp), "node-stderr.txt")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        # HOME of its own, so that Chromium's crash database (and so its crashpad handlers) carry the marker
        home = os.path.join(str(tmp), "browser-home")
        os.makedirs(home, exist_ok=True)
        node = watched.start(
            ["node", script, cfg_path], cwd=BROWSER_DIR, env=child_env(HOME=home), stdout=out, stderr=err
        )
        finished = watched.wait(node, limit)
    if not finished:
        watched.stop(node, grace=3)
    with open(out_path, errors="replace") as f:
        stdout = f.read()
    with open(err_path, errors="replace") as f:
        stderr = f.read()
    if not finished:
        pytest.fail("%s did not finish within %d s\nstdout: %s\nstderr: %s" % (script, limit, stdout, stderr[-3000:]))
    try:
        result = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        pytest.fail("%s printed no JSON (exit %s)\nstdout: %s\nstderr: %s" % (script, node.returncode, stdout, stderr))
    result["stderr"] = stderr
    return result


def widgets_labextension():
    """ipywidgets 8's JupyterLab extension (for JupyterLab 4 and Notebook 7): None when it is not installed,
    else whether it carries ipywidgets' stylesheet.  Debian testing's python3-jupyterlab-widgets 8.1.5-8
    ships it without (13's 8.1.5-6 has it, in a chunk of its own; the Notebook 6 nbextension of the same
    source package has it too), so every widget is drawn unstyled, a slider with no track and a progress bar
    of height 0, whatever the kernel."""
    from jupyter_core.paths import jupyter_path

    for d in jupyter_path("labextensions"):
        ext = os.path.join(d, "@jupyter-widgets", "jupyterlab-manager")
        if not os.path.isfile(os.path.join(ext, "package.json")):
            continue
        static = os.path.join(ext, "static")
        for name in sorted(os.listdir(static)) if os.path.isdir(static) else []:
            if name.endswith(".js"):
                with open(os.path.join(static, name), errors="replace") as f:
                    if ".widget-slider .noUi-base" in f.read():
                        return True
        return False
    return None


def check_widget(w, what, at, css):
    """A slider or progress bar widget as the page shows it (w from a driver's "widgets"): drawn (its track
    and handle/fill have a size), its handle or fill's end at `at` (0..1) of its track.  css: False when the
    installed extension is known to lack ipywidgets' stylesheet (widgets_labextension): the view must still
    be at `at` (its attributes and inline styles), and the test is then an expected failure for as long as
    the widget is not drawn."""
    g = w["drawn"]
    track, knob = g["track"], g["knob"]
    drawn = bool(track and track["width"] > 50 and track["height"] > 0 and knob and knob["width"] > 0
                 and knob["height"] > 0)
    assert g["modelAt"] is not None and abs(g["modelAt"] - at) < 0.02, "the %s's view is not at %s: %s" % (what, at, w)
    if css is False:
        assert not drawn, "the %s is drawn although the widgets extension has no stylesheet: drop this xfail" % what
        pytest.xfail("Debian's python3-jupyterlab-widgets lacks ipywidgets' CSS: the %s is not drawn (%s)" % (what, w))
    assert drawn, "the %s is not drawn (no size: ipywidgets' stylesheet missing?): %s" % (what, w)
    assert g["at"] is not None and abs(g["at"] - at) < 0.1, "the %s is not at %s of its track: %s" % (what, at, w)
