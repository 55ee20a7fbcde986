#!/bin/sh
# Runs the pytest suites (tests/integration, tests/clients, tests/cli, tests/gateway) against the built
# pyc-kernel and pyc.
# `make check` exports PYC_KERNEL, PYC_CLI, PYC_PYTHON, PYC_SRCDIR and PYTEST_ARGS (tests/env.am).
#
# The suites run in PYC_TEST_JOBS processes (pytest-xdist; each module's tests stay in one process, which
# keeps a module's shared kernel).  The default is three per CPU, at most 8: most of a test's time is spent
# waiting -- for a deadline, a heartbeat, a kernel's answer -- not computing, and the whole run is bounded by
# the CPUs only from about three workers per CPU on (measured on 2 cores: 265 s with 2 workers, 126 s with 6,
# the same 128 s when tests rather than modules are spread).  The slow tests (load and soak tests, which
# measure) and a sanitizer build's run (each process several times slower) keep 2.  The in-interpreter
# package's own tests run beside them, in the background.  Tests marked "slow" -- load tests, whole notebooks, soak
# tests -- run only when PYC_TEST_SLOW=1 (`make check-slow`), and then only they run.
#
# Calibration against ipykernel:
#   PYC_TEST_ARGV='["/usr/bin/python3","-m","ipykernel_launcher","-f","{connection_file}"]' tests/pytest.sh
set -u

srcdir=${PYC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
python=${PYC_PYTHON:-/usr/bin/python3}
PYC_SRCDIR=$srcdir
PYC_PYTHON=$python
export PYC_SRCDIR PYC_PYTHON

if [ -z "${PYC_TEST_ARGV:-}" ]; then
    if [ -z "${PYC_KERNEL:-}" ] || [ ! -x "$PYC_KERNEL" ]; then
        echo "pytest.sh: PYC_KERNEL (${PYC_KERNEL:-unset}) is not an executable pyc-kernel" >&2
        exit 1
    fi
fi

# Bytecode of the test modules stays out of the source tree.
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE

# Screenshots and other artifacts of the client tests.
PYC_ARTIFACTS_DIR=${PYC_ARTIFACTS_DIR:-$(pwd)/artifacts}
export PYC_ARTIFACTS_DIR
mkdir -p "$PYC_ARTIFACTS_DIR"

if [ "${PYC_TEST_SLOW:-}" = 1 ]; then
    mark=slow
else
    mark="not slow"
fi
cpus=$(nproc 2>/dev/null || echo 2)
jobs=$((cpus * 3))
[ "$jobs" -gt 8 ] && jobs=8
if [ "$mark" = slow ] || [ -n "${PYC_SANITIZER_LOGS:-}" ]; then
    jobs=2
fi
jobs=${PYC_TEST_JOBS:-$jobs}
parallel=""
if [ "$jobs" -gt 1 ] && "$python" -c "import xdist" 2>/dev/null; then
    parallel="-n $jobs --dist loadfile"
fi

# The in-interpreter package's own tests (a fake _pyc module; no kernel), in the default run unless
# PYTEST_ARGS narrows it: in the background, their output shown after the main suites'.
rc_py=0
py_pid=""
py_log=""
if [ -z "${PYTEST_ARGS:-}" ] && [ "$mark" != slow ]; then
    py_log=$(mktemp)
    # At a lower priority: while the main suites' workers start and collect, the CPUs are theirs, and these
    # tests fill the time the workers spend waiting.
    nice -n 10 "$python" -m pytest -p no:cacheprovider -q --timeout=120 "$srcdir/tests/python" >"$py_log" 2>&1 &
    py_pid=$!
fi

# The suites, as the positional parameters (paths with blanks stay whole).
set -- "$srcdir/tests/integration" "$srcdir/tests/clients" "$srcdir/tests/cli" "$srcdir/tests/gateway"

# The test modules' rewritten asserts are kept under the build dir (conftest.py): when none are yet, one
# process rewrites them (3 s) before the workers start, instead of every worker doing it at once.
if [ -n "$parallel" ] && [ -n "${PYC_BUILDDIR:-}" ] && [ ! -d "$PYC_BUILDDIR/tests/pytest-cache" ]; then
    "$python" -m pytest -p no:cacheprovider -q --collect-only "$@" >/dev/null 2>&1
fi

# shellcheck disable=SC2086 # PYTEST_ARGS and parallel are lists of words
"$python" -m pytest -p no:cacheprovider -q -ra --timeout=180 $parallel -m "$mark" ${PYTEST_ARGS:-} "$@"
rc=$?
if [ -n "$py_pid" ]; then
    wait "$py_pid"
    rc_py=$?
    echo "---- tests/python (the in-interpreter package, a fake _pyc):"
    cat "$py_log"
    rm -f "$py_log"
fi
if [ "$rc" -eq 5 ]; then
    echo "pytest.sh: no tests were collected" >&2
    exit 1
fi
[ "$rc" -eq 0 ] && rc=$rc_py
exit "$rc"
