"""The kernel image's recipe, its bootstrap script and the gateway-side kernelspecs (issue 16), checked without a
Docker daemon, a registry or a cluster.

The image (deploy/image/Dockerfile) cannot be built on this project's CI machines: they have no Docker daemon.
What a build would prove is checked here piece by piece instead:

  - the Dockerfile, parsed: Debian bookworm bases, a final stage that runs as uid 1000 / gid 100, tini as the
    entrypoint, the bootstrap as the command, copied in and executable, WORKDIR and KERNEL_LANGUAGE;
  - its packages against Debian 12 here: every package either stage installs exists (`apt-cache show`), so a
    renamed package fails; every library configure.ac requires has its pkg-config file in a package the build
    stage installs (with dependencies); every shared library the built pyc-kernel and pyc link comes from a
    package the runtime stage installs (with dependencies);
  - the build context: Dockerfile.dockerignore leaves out no file that git tracks;
  - bootstrap-kernel.sh: shellcheck, then runs under dash and bash --posix with a fake pyc-kernel that prints
    its argv and environment as JSON: the variables and their EG_ fallbacks, the 0..0 default, a missing
    variable (exit 2, named), KERNEL_PYC_* -> PYC_* (and an operator's PYC_* winning), KERNEL_WORKING_DIR,
    exec (no extra process between tini and the launcher); then once with the real pyc-kernel, whose
    gateway-launch must accept the arguments the bootstrap gives it;
  - deploy/kernelspecs/*/kernel.json: valid JSON (and a valid kernelspec for jupyter_client when it is
    installed), interrupt_mode "message", the provisioner or process proxy each gateway looks for, the four
    placeholders right after the options that carry them, and the launch script's path in the kernelspec's own
    directory; the SSH kernelspec's argv is accepted by the real pyc-kernel.

What stays unchecked without Docker: that the build stage really compiles in a bookworm container, and that the
image starts in a cluster (README, "Running on a cluster").  Tests skip, with the reason, what a missing tool
(apt-cache, dpkg, pkg-config, readelf, shellcheck, git, openssl) or a host other than Debian 12 cannot check.
"""

import base64
import json
import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys

import pytest

SRCDIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCKERFILE = os.path.join(SRCDIR, "deploy", "image", "Dockerfile")
DOCKERIGNORE = DOCKERFILE + ".dockerignore"
BOOTSTRAP_REL = "deploy/image/bootstrap-kernel.sh"
BOOTSTRAP = os.path.join(SRCDIR, BOOTSTRAP_REL)
BOOTSTRAP_IN_IMAGE = "/usr/local/bin/bootstrap-kernel.sh"
KERNELSPECS = os.path.join(SRCDIR, "deploy", "kernelspecs")
CONFIGURE_AC = os.path.join(SRCDIR, "configure.ac")

#: The kernelspecs and what each gateway needs in it: (provisioner name, process proxy class, launch script).
SPECS = {
    "pyc_kubernetes_gp": ("kubernetes-provisioner", None, "launch_kubernetes.py"),
    "pyc_docker_gp": ("docker-provisioner", None, "launch_docker.py"),
    "pyc_kubernetes_eg": (None, "enterprise_gateway.services.processproxies.k8s.KubernetesProcessProxy",
                          "launch_kubernetes.py"),
    "pyc_distributed": ("distributed-provisioner",
                        "enterprise_gateway.services.processproxies.distributed.DistributedProcessProxy", None),
}

#: The placeholders the gateways substitute, and the option (new spelling) that carries each.
PLACEHOLDERS = {"kernel_id": "--kernel-id", "port_range": "--port-range",
                "response_address": "--response-address", "public_key": "--public-key"}


def _built(name):
    """The built program `name` (pyc-kernel or pyc): $PYC_KERNEL's directory, else build/, or None."""
    kernel = os.environ.get("PYC_KERNEL") or os.path.join(SRCDIR, "build", "pyc-kernel")
    path = os.path.join(os.path.dirname(kernel), name)
    return path if os.access(path, os.X_OK) else None


# ---- the Dockerfile, parsed ---------------------------------------------------------------------------------

def parse_dockerfile(path):
    """The instructions of a Dockerfile as a list of stages, each a list of (INSTRUCTION, arguments): line
    continuations joined, comments and parser directives left out (a comment line inside a continued
    instruction is dropped, as Docker drops it)."""
    stages = []
    current = None
    pending = ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.lstrip().startswith("#"):
                continue
            if not pending and not line.strip():
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            text = (pending + line).strip()
            pending = ""
            if not text:
                continue
            word, _, args = text.partition(" ")
            word = word.upper()
            args = args.strip()
            if word == "FROM":
                current = []
                stages.append(current)
            assert current is not None, "%s: %s before the first FROM" % (path, word)
            current.append((word, args))
    assert not pending, "%s ends inside a continued line" % path
    return stages


def stage_from(stage):
    """(image, name) of a stage's FROM line."""
    words = [w for w in stage[0][1].split() if not w.startswith("--")]
    name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
    return words[0], name


def instructions(stage, word):
    return [args for w, args in stage if w == word]


def exec_form(args):
    """The JSON array of an ENTRYPOINT/CMD in exec form; fails for the shell form, which would put a shell
    between tini and the launcher."""
    try:
        value = json.loads(args)
    except ValueError:
        pytest.fail("not in exec (JSON array) form: %s" % args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def apt_installed(stage):
    """The packages `apt-get install` installs in a stage's RUN lines."""
    packages = []
    for run in instructions(stage, "RUN"):
        for command in re.split(r"&&|\|\||;|\|", run):
            words = shlex.split(command)
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):   # VAR=value before the command
                words.pop(0)
            if words[:1] == ["env"]:
                words = words[1:]
                while words and "=" in words[0]:
                    words.pop(0)
            if len(words) >= 2 and words[0] in ("apt-get", "apt") and "install" in words:
                after = words[words.index("install") + 1:]
                packages += [w for w in after if not w.startswith("-")]
    return packages


@pytest.fixture(scope="module")
def stages():
    assert os.path.isfile(DOCKERFILE), "no %s" % DOCKERFILE
    parsed = parse_dockerfile(DOCKERFILE)
    assert len(parsed) >= 2, "the recipe is multi-stage: a build stage and a runtime stage"
    return parsed


@pytest.fixture(scope="module")
def final(stages):
    return stages[-1]


def test_the_dockerfile_opens_with_what_it_is_for():
    with open(DOCKERFILE) as f:
        head = f.read(2000)
    assert "docker build -f deploy/image/Dockerfile -t pyc-kernel:" in head


def test_every_stage_is_debian_bookworm(stages):
    names = set()
    for stage in stages:
        image, name = stage_from(stage)
        if image in names:
            continue          # FROM an earlier stage
        assert re.match(r"^(docker\.io/(library/)?)?debian:bookworm", image), "FROM %s is not Debian 12" % image
        if name:
            names.add(name)


def test_the_build_stage_builds_and_installs_pyc(stages):
    runs = " ".join(" ".join(instructions(s, "RUN")) for s in stages[:-1])
    assert re.search(r"autogen\.sh|autoreconf", runs), "the build stage regenerates configure"
    assert re.search(r"configure\b[^&;]*--prefix=/usr/local", runs)
    assert re.search(r"\bmake\b", runs)
    assert re.search(r"make install DESTDIR=/out", runs)


def test_the_final_stage_copies_only_what_was_installed(stages, final):
    build_names = {stage_from(s)[1] for s in stages[:-1]} - {None}
    copies = instructions(final, "COPY")
    from_build = [c for c in copies if re.search(r"--from=(\S+)", c)]
    assert from_build, "the runtime stage copies pyc from the build stage"
    for c in from_build:
        assert re.search(r"--from=(\S+)", c).group(1) in build_names
        assert "/out/usr/local" in c, c
    assert not instructions(final, "RUN") or all("configure" not in r for r in instructions(final, "RUN"))


def test_the_final_stage_runs_as_uid_1000_gid_100(final):
    users = instructions(final, "USER")
    assert users, "the final stage sets USER (a kernel must not run as root)"
    user = users[-1].strip()
    if user == "1000:100":
        return
    # A name: it must be a user the stage creates with uid 1000 and gid 100, and USER must not name a group
    # other than 100.
    name, _, group = user.partition(":")
    assert group in ("", "100", "users"), "USER %s: group must be 100 (users)" % user
    created = False
    for run in instructions(final, "RUN"):
        for command in re.split(r"&&|;", run):
            words = shlex.split(command)
            if words[:1] != ["useradd"] or words[-1] != name:
                continue
            opts = dict(zip(words, words[1:]))
            uid = opts.get("-u") or opts.get("--uid")
            gid = opts.get("-g") or opts.get("--gid")
            created = uid == "1000" and gid in ("100", "users")
    assert created, "USER %s: no `useradd -u 1000 -g 100 %s` in the final stage" % (user, name)


def test_the_user_is_jovyan_with_a_home(final):
    found = [m for run in instructions(final, "RUN") for m in re.finditer(r"useradd\s+([^&;]*)", run)]
    assert len(found) == 1, "the final stage creates the image's user, once"
    words = shlex.split(found[0].group(1))
    opts = dict(zip(words, words[1:]))
    assert words[-1] == "jovyan"
    assert (opts.get("-u") or opts.get("--uid")) == "1000"
    assert (opts.get("-g") or opts.get("--gid")) in ("100", "users")
    assert "-m" in words or "--create-home" in words
    assert instructions(final, "WORKDIR")[-1] == "/home/jovyan"


def test_tini_is_the_entrypoint(final):
    entry = exec_form(instructions(final, "ENTRYPOINT")[-1])
    assert entry == ["/usr/bin/tini", "--"], entry
    assert "tini" in apt_installed(final), "the runtime stage installs Debian's tini"


def test_the_command_is_the_bootstrap(final):
    cmd = exec_form(instructions(final, "CMD")[-1])
    assert cmd == [BOOTSTRAP_IN_IMAGE], cmd


def test_the_bootstrap_is_copied_in_and_executable(final):
    copies = [c for c in instructions(final, "COPY") if BOOTSTRAP_REL in c.split()]
    assert copies, "the final stage copies %s" % BOOTSTRAP_REL
    words = copies[-1].split()
    dest = words[-1]
    assert dest in (BOOTSTRAP_IN_IMAGE, os.path.dirname(BOOTSTRAP_IN_IMAGE) + "/"), dest
    chmod = [w.split("=", 1)[1] for w in words if w.startswith("--chmod=")]
    chmod_run = any(re.search(r"chmod\s+(\S*x\S*|[0-7]*[1357][0-7]{0,2})\s+\S*bootstrap-kernel\.sh", r)
                    for r in instructions(final, "RUN"))
    if chmod:
        assert int(chmod[0], 8) & 0o111 == 0o111, "--chmod=%s leaves it not executable by all" % chmod[0]
    elif not chmod_run:
        # COPY keeps the mode of the file in the build context.
        assert os.stat(BOOTSTRAP).st_mode & 0o111 == 0o111, "%s is not executable" % BOOTSTRAP_REL
    with open(BOOTSTRAP) as f:
        assert f.readline().strip() == "#!/bin/sh"


def test_the_environment_says_python(final):
    env = " ".join(instructions(final, "ENV"))
    assert re.search(r"(^|\s)KERNEL_LANGUAGE=python(\s|$)", env), env


def test_the_kernelspec_is_installed_system_wide(stages):
    runs = " ".join(" ".join(instructions(s, "RUN")) for s in stages[:-1])
    assert "share/jupyter/kernels/pyc/kernel.json" in runs, "the build checks make install wrote the kernelspec"
    copies = " ".join(instructions(stages[-1], "COPY"))
    assert re.search(r"/out/usr/local/?\s+/usr/local/?(\s|$)", copies), "/usr/local of the build is copied whole"


# ---- the packages, against Debian 12 -------------------------------------------------------------------------

def _debian12():
    try:
        with open("/etc/os-release") as f:
            text = f.read()
    except OSError:
        return False
    return re.search(r"^VERSION_CODENAME=\"?bookworm\"?$", text, re.M) is not None


def _apt_lists():
    lists = "/var/lib/apt/lists"
    return os.path.isdir(lists) and any("_Packages" in n for n in os.listdir(lists))


needs_apt = pytest.mark.skipif(
    shutil.which("apt-cache") is None or not _debian12() or not _apt_lists(),
    reason="needs apt-cache with Debian 12 (bookworm) package lists (apt-get update)")
needs_dpkg = pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs dpkg")


def _closure(packages):
    """The packages and everything they depend on (Depends and Pre-Depends), by name."""
    out = subprocess.run(
        ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
         "--no-breaks", "--no-replaces", "--no-enhances"] + list(packages),
        capture_output=True, text=True, check=True).stdout
    return {line.strip().strip("<>") for line in out.splitlines() if line and not line[0].isspace()}


def _owners(paths):
    """{path: the Debian package that holds the file (its path as given, resolved, or with /usr toggled), or
    None}.  One `dpkg -S` for every candidate of every path (each call reads dpkg's whole file list: 0.1 s,
    where one call per library took 3 s for pyc-kernel's), then a search by file name for those not found."""
    candidates = {}
    for path in paths:
        c = [path, os.path.realpath(path)]
        c += [p[len("/usr"):] if p.startswith("/usr/") else "/usr" + p for p in list(c)]
        candidates[path] = c
    held = {}
    everything = sorted({c for cs in candidates.values() for c in cs})
    out = subprocess.run(["dpkg", "-S"] + everything, capture_output=True, text=True).stdout
    for line in out.splitlines():
        pkgs, sep, file = line.partition(": ")
        if sep:
            held[file.strip()] = pkgs.split(",")[0].split(":")[0].strip()
    owners = {}
    for path, cs in candidates.items():
        owners[path] = next((held[c] for c in cs if c in held), None)
        if owners[path] is None:
            r = subprocess.run(["dpkg", "-S", "*/" + os.path.basename(path)], capture_output=True, text=True)
            if r.returncode == 0:
                owners[path] = r.stdout.split(":", 1)[0].strip()
    return owners


@needs_apt
def test_every_package_installed_exists_in_debian_12(stages):
    packages = sorted({p for s in stages for p in apt_installed(s)})
    assert packages, "no apt-get install found"
    # One call for all (apt-cache reads its lists once: 0.3 s); package by package only to name what is missing.
    r = subprocess.run(["apt-cache", "show"] + packages, capture_output=True, text=True)
    shown = set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))
    if r.returncode == 0 and shown >= set(packages):
        return
    missing = [p for p in packages
               if subprocess.run(["apt-cache", "show", p], capture_output=True, text=True).returncode != 0]
    assert not missing, "not Debian 12 packages (renamed?): %s" % (missing or sorted(set(packages) - shown))


def _required_modules():
    """The pkg-config modules configure.ac requires: PKG_CHECK_MODULES with no action-if-not-found."""
    with open(CONFIGURE_AC) as f:
        text = f.read()
    default_embed = re.search(r"PYTHON_EMBED=(python3-embed)\b", text)
    modules = []
    for m in re.finditer(r"^\s*PKG_CHECK_MODULES\((.*)\)\s*$", text, re.M):
        args = re.findall(r"\[([^\]]*)\]", m.group(1))
        if len(args) != 2:
            continue          # optional: it has actions of its own (cmocka, readline)
        module = args[1].split()[0]
        if module == "$PYTHON_EMBED":
            module = default_embed.group(1) if default_embed else "python3-embed"
        modules.append(module)
    return modules


@needs_apt
@needs_dpkg
@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="needs pkg-config")
def test_the_build_stage_has_every_library_configure_requires(stages):
    modules = _required_modules()
    assert {"libzmq", "jansson", "libcrypto", "python3-embed", "sqlite3", "libsodium"} <= set(modules), modules
    have = _closure([p for s in stages[:-1] for p in apt_installed(s)])
    for tool in ("autoconf", "automake", "pkg-config", "make", "gcc"):
        assert tool in have, "the build stage lacks %s" % tool
    lacking = []
    pc_files = {}
    for module in modules:
        r = subprocess.run(["pkg-config", "--variable=pcfiledir", module], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip("%s.pc is not installed here, so its package cannot be named" % module)
        pc_files[module] = os.path.join(r.stdout.strip(), module + ".pc")
    owners = _owners(pc_files.values())
    for module, pc in pc_files.items():
        owner = owners[pc]
        assert owner, "no package holds %s.pc here" % module
        if owner not in have:
            lacking.append("%s (%s)" % (module, owner))
    assert not lacking, "the build stage does not install: %s" % lacking


def _needed(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _resolved(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"^\s*(\S+) => (/\S+)", out, re.M))


@needs_apt
@needs_dpkg
@pytest.mark.skipif(shutil.which("readelf") is None or shutil.which("ldd") is None, reason="needs readelf and ldd")
def test_the_runtime_stage_has_every_library_pyc_links(final):
    binaries = [b for b in (_built("pyc-kernel"), _built("pyc")) if b]
    if not binaries:
        pytest.skip("pyc-kernel is not built ($PYC_KERNEL, build/)")
    have = _closure(apt_installed(final))
    lacking = []
    for binary in binaries:
        paths = _resolved(binary)
        names = _needed(binary)
        # `pyc attach` dlopens libreadline by the SONAME configure found (config.h's READLINE_SONAME).
        config_h = os.path.join(os.path.dirname(binary), "config.h")
        if os.path.basename(binary) == "pyc" and os.path.isfile(config_h):
            with open(config_h) as f:
                names += re.findall(r'#define READLINE_SONAME "([^"]+)"', f.read())
        wanted = {name: paths.get(name) or "/lib/x86_64-linux-gnu/" + name for name in names}
        owners = _owners(wanted.values())
        for name, path in wanted.items():
            owner = owners[path]
            assert owner, "%s: no package holds %s" % (binary, name)
            if owner not in have:
                lacking.append("%s: %s (%s)" % (os.path.basename(binary), name, owner))
    assert not lacking, "the runtime stage does not install: %s" % lacking


@needs_apt
def test_the_runtime_stage_has_the_interpreter_the_kernel_names(final):
    # configure records <exec_prefix>/bin/pythonX.Y as sys.executable; the embedded libpython is the same X.Y.
    pkgs = apt_installed(final)
    libpython = [p for p in pkgs if re.match(r"^libpython3\.\d+$", p)]
    assert len(libpython) == 1, pkgs
    assert libpython[0][3:] in pkgs, "the runtime stage installs %s beside %s" % (libpython[0][3:], libpython[0])
    assert not [p for p in pkgs if p.endswith("-dev")], "no -dev package in the runtime stage"


# ---- the build context ----------------------------------------------------------------------------------------

def _ignore_regex(pattern):
    """A .dockerignore pattern as a regex over paths relative to the context (Go filepath.Match plus **)."""
    p = pattern.strip().rstrip("/")
    if p.startswith("/"):
        p = p[1:]
    out = ""
    i = 0
    while i < len(p):
        if p.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif p.startswith("**", i):
            out += ".*"
            i += 2
        elif p[i] == "*":
            out += "[^/]*"
            i += 1
        elif p[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(p[i])
            i += 1
    return re.compile("^" + out + "(?:/.*)?$")


@pytest.mark.skipif(shutil.which("git") is None or not os.path.exists(os.path.join(SRCDIR, ".git")),
                    reason="needs git and a git checkout")
def test_the_build_context_keeps_every_tracked_file():
    with open(DOCKERIGNORE) as f:
        patterns = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    assert ".git" in patterns and any(p.startswith("build") for p in patterns), patterns
    assert not [p for p in patterns if p.startswith("!")], "negations are not handled by this check"
    regexes = [(p, _ignore_regex(p)) for p in patterns]
    tracked = subprocess.run(["git", "-C", SRCDIR, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
    tracked = [t for t in tracked if t]
    assert BOOTSTRAP_REL in tracked or os.path.exists(BOOTSTRAP)
    tracked.append(BOOTSTRAP_REL)       # not committed yet while issue 16 is under way
    dropped = ["%s (by %s)" % (t, p) for t in tracked for p, rx in regexes if rx.match(t)]
    assert not dropped, "Dockerfile.dockerignore leaves out files the build may need: %s" % dropped[:10]


# ---- bootstrap-kernel.sh ------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_shellcheck_finds_nothing_in_the_bootstrap():
    r = subprocess.run(["shellcheck", "--shell=sh", BOOTSTRAP], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


FAKE_LAUNCHER = r'''#!%s
"""A fake pyc-kernel: prints what it was started with, as JSON."""
import json, os, sys
json.dump({"argv": sys.argv[1:], "pid": os.getpid(), "cwd": os.getcwd(), "home": os.environ.get("HOME"),
           "jpy_parent_pid": os.environ.get("JPY_PARENT_PID"),
           "pyc": {k: v for k, v in os.environ.items() if k.startswith("PYC_") and k != "PYC_KERNEL_PROGRAM"}},
          sys.stdout)
'''

SHELLS = [("shebang", [])]
if shutil.which("dash"):
    SHELLS.append(("dash", [shutil.which("dash")]))
if shutil.which("bash"):
    SHELLS.append(("bash-posix", [shutil.which("bash"), "--posix"]))

KID = "1bf2d3c4-0000-4000-8000-00000000abcd"
ADDR = "10.1.2.3:8877"
KEY = "MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQ" + "A" * 178   # a key's shape; the fake does not read it


@pytest.fixture(params=SHELLS, ids=[s[0] for s in SHELLS])
def bootstrap(request, tmp_path):
    """Runs the bootstrap under one shell with a clean environment plus `env`, the fake pyc-kernel as
    PYC_KERNEL_PROGRAM.  Returns (exit status, the fake's JSON or None, stderr, pid of the process)."""
    fake = tmp_path / "fake-pyc-kernel"
    fake.write_text(FAKE_LAUNCHER % sys.executable)
    fake.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    shell = request.param[1]

    def run(env, cwd=None):
        full = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "PYC_KERNEL_PROGRAM": str(fake)}
        full.update(env)
        full = {k: v for k, v in full.items() if v is not None}
        proc = subprocess.Popen(shell + [BOOTSTRAP], env=full, cwd=cwd or str(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=30)
        data = json.loads(out) if out.strip() else None
        return proc.returncode, data, err, proc.pid

    run.home = str(home)
    run.tmp = tmp_path
    return run


def _argv(kid, addr, key, ports):
    return ["gateway-launch", "--kernel-id", kid, "--response-address", addr, "--public-key", key,
            "--port-range", ports]


def test_the_environment_becomes_the_launchers_arguments(bootstrap):
    rc, data, err, pid = bootstrap({"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY,
                                    "PORT_RANGE": "40000..41000"})
    assert rc == 0, err
    assert data["argv"] == _argv(KID, ADDR, KEY, "40000..41000")
    assert data["pid"] == pid, "the bootstrap execs the launcher (tini's child must be the launcher)"
    assert err == ""


def test_the_eg_prefixed_variables_are_the_fallbacks(bootstrap):
    rc, data, err, _ = bootstrap({"KERNEL_ID": KID, "EG_RESPONSE_ADDRESS": ADDR, "EG_PUBLIC_KEY": KEY,
                                  "EG_PORT_RANGE": "50000..51000"})
    assert rc == 0, err
    assert data["argv"] == _argv(KID, ADDR, KEY, "50000..51000")


def test_the_unprefixed_variables_win_over_the_eg_ones(bootstrap):
    rc, data, err, _ = bootstrap({"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "EG_RESPONSE_ADDRESS": "10.9.9.9:1",
                                  "PUBLIC_KEY": KEY, "EG_PUBLIC_KEY": "other", "PORT_RANGE": "40000..41000",
                                  "EG_PORT_RANGE": "1..2"})
    assert rc == 0, err
    assert data["argv"] == _argv(KID, ADDR, KEY, "40000..41000")


def test_the_port_range_defaults_to_any_port(bootstrap):
    rc, data, err, _ = bootstrap({"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY})
    assert rc == 0, err
    assert data["argv"] == _argv(KID, ADDR, KEY, "0..0")
    rc, data, err, _ = bootstrap({"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY, "PORT_RANGE": ""})
    assert data["argv"][-1] == "0..0"


@pytest.mark.parametrize("missing", ["KERNEL_ID", "RESPONSE_ADDRESS", "PUBLIC_KEY"])
@pytest.mark.parametrize("how", ["unset", "empty"])
def test_a_missing_variable_is_named_and_exit_2(bootstrap, missing, how):
    env = {"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY}
    env[missing] = None if how == "unset" else ""
    rc, data, err, _ = bootstrap(env)
    assert rc == 2
    assert data is None, "the launcher must not start"
    assert missing in err and "required" in err, err


def test_kernel_pyc_variables_become_pyc_settings(bootstrap):
    tricky = "it's \"$(touch %s/pwned)\" `id`\nKERNEL_PYC_FORGED=1 *" % bootstrap.tmp
    rc, data, err, _ = bootstrap({"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY,
                                  "KERNEL_PYC_MEMORY_LIMIT": "512M", "KERNEL_PYC_IDLE_TIMEOUT": "1h",
                                  "KERNEL_PYC_CELL_TIMEOUT": "", "KERNEL_PYC_HISTORY_FILE": tricky,
                                  "KERNEL_OTHER": "x", "PYC_IPYTHON": "0"})
    assert rc == 0, err
    assert data["pyc"] == {"PYC_MEMORY_LIMIT": "512M", "PYC_IDLE_TIMEOUT": "1h", "PYC_CELL_TIMEOUT": "",
                           "PYC_HISTORY_FILE": tricky, "PYC_IPYTHON": "0"}
    assert not (bootstrap.tmp / "pwned").exists(), "a value was run as a command"


def test_an_operators_pyc_setting_wins_over_the_clients(bootstrap):
    rc, data, err, _ = bootstrap({"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY,
                                  "PYC_MEMORY_LIMIT": "2G", "KERNEL_PYC_MEMORY_LIMIT": "64G",
                                  "KERNEL_PYC_KERNEL_PROGRAM": "/bin/false"})
    assert rc == 0, err
    assert data["pyc"]["PYC_MEMORY_LIMIT"] == "2G"
    assert "KERNEL_PYC_MEMORY_LIMIT ignored" in err
    assert data["argv"][0] == "gateway-launch", "a client cannot choose the program"


def test_kernel_working_dir_is_where_the_kernel_starts(bootstrap):
    work = bootstrap.tmp / "work dir"
    work.mkdir()
    base = {"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY}
    rc, data, err, _ = bootstrap(dict(base, KERNEL_WORKING_DIR=str(work)))
    assert rc == 0, err
    assert data["cwd"] == str(work)
    rc, data, err, _ = bootstrap(base)
    assert data["cwd"] == bootstrap.home, "without KERNEL_WORKING_DIR the kernel starts in HOME"
    rc, data, err, _ = bootstrap(dict(base, KERNEL_WORKING_DIR=str(bootstrap.tmp / "absent")))
    assert rc == 0
    assert data["cwd"] == str(bootstrap.tmp) and "KERNEL_WORKING_DIR" in err


def test_a_home_that_does_not_exist_is_replaced_by_the_users(bootstrap):
    # The gateway's HOME reaches the pod with the rest of its environment.
    own = pwd.getpwuid(os.getuid()).pw_dir
    if not os.path.isdir(own):
        pytest.skip("this user's home %s does not exist" % own)
    rc, data, err, _ = bootstrap({"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY,
                                  "HOME": "/nonexistent/gateway-home"})
    assert rc == 0, err
    assert data["home"] == own and data["cwd"] == own


def test_what_pyc_does_not_use_is_ignored(bootstrap):
    base = {"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY}
    rc, data, err, _ = bootstrap(dict(base, KERNEL_LANGUAGE="scala",
                                      KERNEL_CLASS_NAME="ipykernel.ipkernel.IPythonKernel",
                                      KERNEL_SPARK_CONTEXT_INIT_MODE="none", JPY_PARENT_PID="4242"))
    assert rc == 0, err
    assert data["argv"] == _argv(KID, ADDR, KEY, "0..0")
    assert err == ""
    assert data["jpy_parent_pid"] is None, "the gateway host's JPY_PARENT_PID does not reach the launcher"


def test_a_spark_context_mode_gets_a_warning(bootstrap):
    rc, data, err, _ = bootstrap({"KERNEL_ID": KID, "RESPONSE_ADDRESS": ADDR, "PUBLIC_KEY": KEY,
                                  "KERNEL_SPARK_CONTEXT_INIT_MODE": "lazy"})
    assert rc == 0
    assert "KERNEL_SPARK_CONTEXT_INIT_MODE" in err and "Spark" in err
    assert data["argv"] == _argv(KID, ADDR, KEY, "0..0")


# ---- against the real launcher ------------------------------------------------------------------------------

def _gateway_launch_available():
    kernel = _built("pyc-kernel")
    if kernel is None:
        return None
    r = subprocess.run([kernel, "gateway-launch", "--help"], capture_output=True, text=True)
    return kernel if r.returncode == 0 and "gateway-launch" in r.stdout + r.stderr else None


def _public_key():
    """A gateway's public key as the gateways pass it: base64 DER SubjectPublicKeyInfo of an RSA-1024 key."""
    if shutil.which("openssl"):
        pem = subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"],
                             capture_output=True, check=True).stdout
        der = subprocess.run(["openssl", "pkey", "-pubout", "-outform", "DER"], input=pem, capture_output=True,
                             check=True).stdout
        return base64.b64encode(der).decode()
    try:
        from Cryptodome.PublicKey import RSA
    except ImportError:
        pytest.skip("needs openssl or python3-pycryptodome to make an RSA key")
    return base64.b64encode(RSA.generate(1024).publickey().export_key("DER")).decode()


@pytest.fixture(scope="module")
def launcher():
    kernel = _gateway_launch_available()
    if kernel is None:
        pytest.skip("pyc-kernel gateway-launch is not built")
    return kernel, _public_key()


def test_the_real_launcher_takes_what_the_bootstrap_gives(launcher, tmp_path):
    # A valid key and a range too small to use: the launcher must parse every argument, decode the key, and
    # stop at the range with exit 2 before it starts anything.
    kernel, key = launcher
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path), "PYC_KERNEL_PROGRAM": kernel,
           "KERNEL_ID": KID, "RESPONSE_ADDRESS": "127.0.0.1:9", "PUBLIC_KEY": key, "PORT_RANGE": "40000..40010"}
    r = subprocess.run([BOOTSTRAP], env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert "40000..40010" in r.stderr, r.stderr


def test_the_real_launcher_takes_the_ssh_kernelspecs_argv(launcher, tmp_path):
    kernel, key = launcher
    spec = _spec("pyc_distributed")
    values = {"kernel_id": KID, "port_range": "40000..40010", "response_address": "127.0.0.1:9",
              "public_key": key}
    argv = [re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), a) for a in spec["argv"]]
    argv[0] = kernel
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    r = subprocess.run(argv, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert "40000..40010" in r.stderr, r.stderr


# ---- the gateway-side kernelspecs ---------------------------------------------------------------------------

def _spec(name):
    with open(os.path.join(KERNELSPECS, name, "kernel.json")) as f:
        return json.load(f)


def test_the_kernelspec_directories_are_the_expected_ones():
    found = {d for d in os.listdir(KERNELSPECS) if os.path.isdir(os.path.join(KERNELSPECS, d))}
    assert found == set(SPECS), found
    with open(os.path.join(KERNELSPECS, "README.md")) as f:
        readme = f.read()
    for name in SPECS:
        assert name in readme, "deploy/kernelspecs/README.md does not say how %s is installed" % name


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_kernelspec_says_message_interrupts_and_python(name):
    spec = _spec(name)
    assert spec["interrupt_mode"] == "message"
    assert spec["language"] == "python"
    assert "pyc" in spec["display_name"]
    assert isinstance(spec.get("env", {}), dict)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_kernelspec_names_its_provisioner_or_process_proxy(name):
    provisioner, proxy, _ = SPECS[name]
    meta = _spec(name)["metadata"]
    if provisioner:
        assert meta["kernel_provisioner"]["provisioner_name"] == provisioner
        config = meta["kernel_provisioner"].get("config", {})
        assert config.get("launch_timeout") == 30
    else:
        assert "kernel_provisioner" not in meta, "Enterprise Gateway's kernelspec names no provisioner"
    if proxy:
        assert meta["process_proxy"]["class_name"] == proxy
        config = meta["process_proxy"].get("config", {})
    else:
        assert "process_proxy" not in meta
    if name != "pyc_distributed":
        assert re.match(r"^[\w.\-/]+(:[\w.\-]+)?$", config.get("image_name", "")), "a container kernelspec " \
            "names its image"
        assert config["image_name"].rsplit("/", 1)[-1].startswith("pyc-kernel:")


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_kernelspecs_argv_carries_the_four_placeholders(name):
    argv = _spec(name)["argv"]
    assert "{connection_file}" not in " ".join(argv), "a connection file would name a file of the gateway's host"
    for placeholder, option in PLACEHOLDERS.items():
        token = "{%s}" % placeholder
        assert argv.count(token) == 1, "%s: %s once in argv" % (name, token)
        before = argv[argv.index(token) - 1]
        assert before in (option, "--RemoteProcessProxy." + option[2:]), "%s: %s follows %s" % (name, token, before)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_kernelspecs_argv_runs_the_right_program(name):
    argv = _spec(name)["argv"]
    script = SPECS[name][2]
    if script:
        # The gateway's own launch script, in the kernelspec's directory where its installer writes it.
        assert argv[0] == "python"
        assert argv[1] == "/usr/local/share/jupyter/kernels/%s/scripts/%s" % (name, script)
    else:
        assert os.path.isabs(argv[0]) and os.path.basename(argv[0]) == "pyc-kernel"
        assert argv[1] == "gateway-launch"


def test_enterprise_gateways_kernelspec_uses_its_spelling():
    argv = _spec("pyc_kubernetes_eg")["argv"]
    assert all(a.startswith("--RemoteProcessProxy.") for a in argv[2::2]), argv


@pytest.mark.parametrize("name", sorted(SPECS))
def test_jupyter_client_reads_the_kernelspec(name):
    kernelspec = pytest.importorskip("jupyter_client.kernelspec")
    spec = kernelspec.KernelSpec.from_resource_dir(os.path.join(KERNELSPECS, name))
    assert spec.interrupt_mode == "message"
    assert spec.argv == _spec(name)["argv"]
