"""pyc_build -- the build backend (PEP 517) behind `python -m pip install --no-build-isolation <pyc source>`.

pip runs it with the interpreter of the environment it installs into, so the wheel it makes is built against
that very interpreter: ./configure PYTHON=<sys.executable> (configure.ac derives python-X.Y-embed from it),
make, make install DESTDIR=<staging>, all in a temporary folder, never in the source tree.  Autotools stays
the one build; this file only drives it and packs what `make install` installed:

    pyc-X.Y.Z.data/scripts/pyc-kernel, pyc                  -> ENV/bin (pip copies them as they are)
    pyc-X.Y.Z.data/data/share/jupyter/kernels/pyc/          -> ENV/share/jupyter/kernels/pyc, as ipykernel's
                                                               `install --sys-prefix` puts its kernelspec
    pyc_client/                                             -> ENV's site-packages
    pyc-X.Y.Z.dist-info/entry_points.txt                    the pyc-handshake-provisioner entry point that
                                                               `make install` writes beside pyc_client

The kernelspec names no absolute path: a wheel can be cached by pip and installed into another environment.
Its argv is "{resource_dir}/../../../../bin/pyc-kernel --python-env {resource_dir}/../../../.." (jupyter_client
7 and 8 put the kernelspec's folder in for {resource_dir}), so the kernel is the program installed beside the
kernelspec and runs in the environment they were installed into (kernel/install.h, pyc_install_python_env).

Pure standard library, no setuptools: a Python 3.12 virtual environment has none, and pip's build isolation
would need an index (hence --no-build-isolation, which this backend does not need but pip's default does).
A system library that is missing stops the build before configure with one sentence that names its Debian
package.  `pip install -e` is refused: pyc is a compiled program.

Also a command, for `make dist`'s PKG-INFO: python3 pybuild/pyc_build.py --pkg-info
"""

import base64
import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

NAME = "pyc"
SRCDIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where configure installs, below the DESTDIR of the staging: no path of the built programs depends on it.
PREFIX = "/pyc"
SUMMARY = "A Jupyter kernel for Python, written in C"

# The system libraries configure.ac asks pkg-config for (PKG_CHECK_MODULES; keep the two lists alike): module,
# minimum version, what to call it, and the Debian package with its headers and .pc file.
LIBRARIES = [
    ("libzmq", "4.3.3", "libzmq", "libzmq3-dev"),
    ("jansson", "2.12", "jansson", "libjansson-dev"),
    ("libcrypto", "1.1.1", "OpenSSL", "libssl-dev"),
    ("sqlite3", "3.31", "SQLite", "libsqlite3-dev"),
    ("libsodium", "1.0.12", "libsodium", "libsodium-dev"),
]


class Refusal(SystemExit):
    """A build that cannot work, said in one sentence: pip shows it as the hook's output, without a traceback."""


# ---- metadata ---------------------------------------------------------------------------------------------

def version():
    """pyc's version, from AC_INIT in configure.ac (the one place it is written)."""
    with open(os.path.join(SRCDIR, "configure.ac")) as f:
        m = re.search(r"AC_INIT\(\[pyc\],\s*\[([^\]]+)\]", f.read())
    if m is None:
        raise Refusal("pyc_build: configure.ac has no AC_INIT([pyc], [VERSION])")
    return m.group(1)


def metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n"
            "Classifier: Framework :: Jupyter\nClassifier: Operating System :: POSIX :: Linux\n"
            "Classifier: Programming Language :: C\nClassifier: Programming Language :: Python :: 3\n"
            "Description-Content-Type: text/plain\n\n"
            "pyc runs Python cells for Jupyter like ipykernel does, but the kernel is a C program with an\n"
            "embedded CPython.  Installed with pip into an environment, it brings the pyc-kernel and pyc\n"
            "programs, the pyc_client package and the kernelspec `pyc`, which runs that environment's Python.\n"
            % (NAME, version(), SUMMARY))


def dist_info():
    return "%s-%s.dist-info" % (NAME, version())


def wheel_tag():
    """cpXY-cpXY<abiflags>-<platform> of the interpreter running this: the programs embed its libpython."""
    if sys.implementation.name != "cpython":
        raise Refusal("pyc embeds CPython; this interpreter is %s" % sys.implementation.name)
    xy = "%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    if plat == "linux_x86_64" and sys.maxsize <= 2 ** 32:
        plat = "linux_i686"              # a 32-bit interpreter on a 64-bit kernel
    return "cp%s" % xy, "cp%s%s" % (xy, getattr(sys, "abiflags", "")), plat


# ---- what the build needs ---------------------------------------------------------------------------------

def build_env():
    """The environment of configure and make: the interpreter's own pkg-config folder after the user's, so
    that a conda-style Python's python-X.Y-embed.pc is found; in a prefix outside the linker's default
    folders, its lib/ as the programs' run path (the kernel links libpython and the libraries found there)."""
    env = dict(os.environ)
    libpc = sysconfig.get_config_var("LIBPC")
    if libpc and os.path.isdir(libpc):
        env["PKG_CONFIG_PATH"] = os.pathsep.join(p for p in (env.get("PKG_CONFIG_PATH"), libpc) if p)
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    system = {"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/lib/" + multiarch, "/usr/lib/" + multiarch}
    if libdir and os.path.isdir(libdir) and libdir.rstrip("/") not in system:
        env["LDFLAGS"] = ("%s -Wl,-rpath,%s" % (env.get("LDFLAGS", ""), libdir)).strip()
    env.pop("MAKEFLAGS", None)           # pip's own make jobs, if any, are not ours
    return env


def _and(words):
    return words[0] if len(words) == 1 else "%s and %s" % (", ".join(words[:-1]), words[-1])


def check_requirements(env, need_autotools=False):
    """Every program and library configure will look for, asked first so that what is missing is said in one
    sentence naming its Debian packages, not in configure's words after a minute of building."""
    missing, packages = [], []

    def need(what, package):
        missing.append(what)
        if package not in packages:
            packages.append(package)

    cc = shlex.split(env.get("CC", ""))[:1] or ["cc"]
    if shutil.which(cc[0], path=env.get("PATH")) is None:
        need("a C compiler", "build-essential")
    if shutil.which("make", path=env.get("PATH")) is None:
        need("make", "build-essential")
    if need_autotools:
        for tool in ("autoreconf", "automake"):
            if shutil.which(tool, path=env.get("PATH")) is None:
                need("autoconf and automake (this source has no ./configure yet)", "autoconf automake")
                break
    pkgconfig = env.get("PKG_CONFIG") or "pkg-config"
    if shutil.which(pkgconfig, path=env.get("PATH")) is None:
        need("pkg-config", "pkg-config")
        raise Refusal("pyc needs %s: apt-get install %s" % (_and(missing), " ".join(packages)))
    xy = "%d.%d" % sys.version_info[:2]
    libs = LIBRARIES + [("python-%s-embed" % xy, "3.9", "Python %s" % xy, "python%s-dev" % xy)]
    for module, least, what, package in libs:
        ok = subprocess.run([pkgconfig, "--exists", "%s >= %s" % (module, least)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        if ok:
            continue
        found = subprocess.run([pkgconfig, "--modversion", module], env=env, capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip():
            need("%s %s or newer (pkg-config finds %s)" % (what, least, found.stdout.strip()), package)
        else:
            need("%s's headers" % what, package)
    if missing:
        raise Refusal("pyc needs %s: apt-get install %s" % (_and(missing), " ".join(packages)))


# ---- the build --------------------------------------------------------------------------------------------

def _run(step, argv, cwd, env):
    """Runs one step of the build, its output going where pip collects the backend's."""
    print("pyc_build: %s" % " ".join(shlex.quote(a) for a in argv), flush=True)
    if subprocess.run(argv, cwd=cwd, env=env).returncode != 0:
        raise Refusal("pyc_build: %s failed; its output is above" % step)


def _export_tree(dest):
    """A copy of the source tree to run autogen.sh in, so that the source tree, which its developers build
    from themselves, gets no file written: in a git checkout the files git knows and the new ones it does not
    ignore, else everything but build trees."""
    os.makedirs(dest)
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=SRCDIR,
                             capture_output=True, check=True).stdout
        names = [n.decode() for n in out.split(b"\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for root, dirs, files in os.walk(SRCDIR):
            rel = os.path.relpath(root, SRCDIR)
            dirs[:] = [d for d in dirs if not (rel == "." and (d.startswith(("build", "_build", ".")))
                                               or d in ("__pycache__", "node_modules"))]
            names += [os.path.normpath(os.path.join(rel, f)) for f in files]
    for name in names:
        src = os.path.join(SRCDIR, name)
        if not os.path.lexists(src):
            continue                     # deleted in the work tree
        os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), os.path.join(dest, name))
        else:
            shutil.copy2(src, os.path.join(dest, name))
    return dest


def _jobs():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _source(tmp, env):
    """The checks, then the folder with ./configure to build from: the source tree itself (a release tarball,
    or a checkout its developer ran autogen.sh in), else a copy of it in tmp, given a configure there."""
    have_configure = os.path.exists(os.path.join(SRCDIR, "configure"))
    check_requirements(env, need_autotools=not have_configure)
    if have_configure:
        return SRCDIR
    src = _export_tree(os.path.join(tmp, "src"))
    _run("autogen.sh", ["sh", os.path.join(src, "autogen.sh")], src, env)
    return src


def build_and_stage(tmp, config_settings):
    """configure, make and make install into tmp/stage; returns the staged PREFIX folder."""
    env = build_env()
    src = _source(tmp, env)
    build = os.path.join(tmp, "build")
    stage = os.path.join(tmp, "stage")
    os.makedirs(build)
    extra = shlex.split((config_settings or {}).get("configure-args", ""))
    _run("configure", [os.path.join(src, "configure"), "--prefix=" + PREFIX, "PYTHON=" + sys.executable] + extra,
         build, env)
    _run("make", ["make", "-j%d" % _jobs()], build, env)
    # pythondir: the pyc_client package into one known folder, whatever configure chose for this interpreter.
    _run("make install", ["make", "install", "DESTDIR=" + stage, "pythondir=%s/platlib" % PREFIX], build, env)
    return stage + PREFIX


def kernelspec_argv(path):
    """kernel.json with the relative argv of this file's top comment (the rest as `make install` wrote it)."""
    import json
    with open(path) as f:
        spec = json.load(f)
    up = "{resource_dir}/../../../.."
    spec["argv"] = [up + "/bin/pyc-kernel", "--python-env", up, "-f", "{connection_file}"]
    return (json.dumps(spec, indent=1) + "\n").encode()


# ---- the wheel --------------------------------------------------------------------------------------------

class _Wheel:
    """A wheel being written: every file's RECORD line, and its mode kept (pip sets the executable bits of
    what the zip says is executable)."""

    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.records = []

    def add(self, arcname, data, mode=0o644):
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (stat.S_IFREG | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

    def add_file(self, arcname, path):
        with open(path, "rb") as f:
            data = f.read()
        self.add(arcname, data, 0o755 if os.stat(path).st_mode & 0o111 else 0o644)

    def close(self, record_name):
        info = zipfile.ZipInfo(record_name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (stat.S_IFREG | 0o644) << 16
        self.records.append("%s,," % record_name)
        self.zip.writestr(info, "".join(r + "\n" for r in self.records), zipfile.ZIP_DEFLATED)
        self.zip.close()


def write_wheel(staged, wheel_directory):
    py, abi, plat = wheel_tag()
    data = "%s-%s.data" % (NAME, version())
    info = dist_info()
    name = "%s-%s-%s-%s-%s.whl" % (NAME, version(), py, abi, plat)
    path = os.path.join(wheel_directory, name)
    w = _Wheel(path)
    try:
        bindir = os.path.join(staged, "bin")
        for prog in sorted(os.listdir(bindir)):
            w.add_file("%s/scripts/%s" % (data, prog), os.path.join(bindir, prog))
        specdir = os.path.join(staged, "share", "jupyter", "kernels", "pyc")
        for f in sorted(os.listdir(specdir)):
            arc = "%s/data/share/jupyter/kernels/pyc/%s" % (data, f)
            if f == "kernel.json":
                w.add(arc, kernelspec_argv(os.path.join(specdir, f)))
            else:
                w.add_file(arc, os.path.join(specdir, f))
        platlib = os.path.join(staged, "platlib")
        entry_points = None
        for entry in sorted(os.listdir(platlib)):
            full = os.path.join(platlib, entry)
            if entry.endswith(".dist-info"):
                # `make install`'s pyc_client-X.dist-info only carries the provisioner's entry point, which
                # this wheel's own dist-info carries instead (two would declare it twice).
                ep = os.path.join(full, "entry_points.txt")
                if os.path.exists(ep):
                    with open(ep, "rb") as f:
                        entry_points = f.read()
                continue
            for root, dirs, files in os.walk(full):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for f in sorted(files):
                    if not f.endswith((".pyc", ".pyo")):
                        p = os.path.join(root, f)
                        w.add_file(os.path.relpath(p, platlib).replace(os.sep, "/"), p)
        w.add("%s/METADATA" % info, metadata().encode())
        w.add("%s/WHEEL" % info, ("Wheel-Version: 1.0\nGenerator: pyc_build %s\nRoot-Is-Purelib: false\n"
                                  "Tag: %s-%s-%s\n" % (version(), py, abi, plat)).encode())
        if entry_points:
            w.add("%s/entry_points.txt" % info, entry_points)
        w.add("%s/top_level.txt" % info, b"pyc_client\n")
        w.close("%s/RECORD" % info)
    except BaseException:
        w.zip.close()
        os.unlink(path)
        raise
    return name


# ---- the PEP 517 hooks ------------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, dist_info())
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(metadata())
    return dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """The whole build, in a temporary folder removed afterwards.  config_settings "configure-args" adds words
    to configure's command line (pip install --config-settings=configure-args=--without-readline ...)."""
    tmp = tempfile.mkdtemp(prefix="pyc-build-")
    try:
        return write_wheel(build_and_stage(tmp, config_settings), wheel_directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_sdist(sdist_directory, config_settings=None):
    """The release tarball, as `make dist` makes it (configure, with the same checks, in a temporary folder)."""
    tmp = tempfile.mkdtemp(prefix="pyc-sdist-")
    try:
        env = build_env()
        src = _source(tmp, env)
        build = os.path.join(tmp, "build")
        os.makedirs(build)
        _run("configure", [os.path.join(src, "configure"), "PYTHON=" + sys.executable], build, env)
        _run("make dist", ["make", "dist"], build, env)
        name = "%s-%s.tar.gz" % (NAME, version())
        shutil.move(os.path.join(build, name), os.path.join(sdist_directory, name))
        return name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    raise Refusal("pyc cannot be installed in editable mode (-e): it is a compiled program; install it with "
                  "python -m pip install --no-build-isolation <this folder>, or build it in place with autotools "
                  "(README.md, Development)")


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    build_editable(None)


if __name__ == "__main__":
    if sys.argv[1:] == ["--pkg-info"]:
        sys.stdout.write(metadata())
    else:
        sys.exit("usage: %s --pkg-info   (the PKG-INFO of a release tarball)" % sys.argv[0])
