#!/bin/sh
# autogen.sh -- regenerate the autotools files (configure, Makefile.in) from a git checkout.
set -e
cd "$(dirname "$0")"
mkdir -p m4
autoreconf -fi
