#!/bin/sh
# Runs the pytest suites (tests/integration, tests/clients, tests/cli, tests/gateway) against the built
# pyc-kernel and pyc.
# `make check` exports PYC_KERNEL, PYC_CLI, PYC_PYTHON, PYC_SRCDIR and PYTEST_ARGS (tests/env.am).
#
# The suites run in PYC_TEST_JOBS processes (pytest-xdist, default 2; each module's tests stay in one
# process, which keeps a module's shared kernel).  Tests marked "slow" -- load tests, whole notebooks, soak
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
jobs=${PYC_TEST_JOBS:-2}
parallel=""
if [ "$jobs" -gt 1 ] && "$python" -c "import xdist" 2>/dev/null; then
    parallel="-n $jobs --dist loadfile"
fi

# The in-interpreter package's own tests (a fake _pyc module; no kernel), in the default run unless
# PYTEST_ARGS narrows it.
rc_py=0
if [ -z "${PYTEST_ARGS:-}" ] && [ "$mark" != slow ]; then
    "$python" -m pytest -p no:cacheprovider -q --timeout=120 "$srcdir/tests/python"
    rc_py=$?
fi

# shellcheck disable=SC2086 # PYTEST_ARGS and parallel are lists of words
"$python" -m pytest -p no:cacheprovider -q -ra --timeout=180 $parallel -m "$mark" ${PYTEST_ARGS:-} \
    "$srcdir/tests/integration" "$srcdir/tests/clients" "$srcdir/tests/cli" "$srcdir/tests/gateway"
rc=$?
if [ "$rc" -eq 5 ]; then
    echo "pytest.sh: no tests were collected" >&2
    exit 1
fi
[ "$rc" -eq 0 ] && rc=$rc_py
exit "$rc"
