#!/bin/sh
# check-layers.sh -- a test of `make check` (and `make check-layers`): the build's libraries keep their order
# and no objects form a circle (tests/check_layers.py says how).
# Environment (exported by `make check`): PYC_BUILDDIR, PYC_SRCDIR, PYC_PYTHON.
set -u
srcdir=${PYC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${PYC_BUILDDIR:-.}
exec "${PYC_PYTHON:-/usr/bin/python3}" "$srcdir/tests/check_layers.py" "$builddir"
