#!/bin/sh
# replay.sh -- runs the fuzz targets once over their seed corpora, as regression tests for `make check`.
#
# Without --enable-fuzzing the targets are linked with tests/fuzz/driver.c, which runs each file once and
# prints "N inputs ok".  The corpus files are passed one by one rather than as directories, so a libFuzzer
# build of the targets also just replays them instead of starting to fuzz.
#
# Environment (exported by `make check`): PYC_SRCDIR, the absolute top source directory, and PYC_FUZZ_DIR,
# the build directory holding the fuzz targets.  Run by hand, they default to the source tree
# this script is in and to ./tests/fuzz.
set -u

srcdir=${PYC_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
fuzzdir=${PYC_FUZZ_DIR:-tests/fuzz}
status=0

for target in wire connfile limit zmtp dap events lastline execreq; do
    bin=$fuzzdir/fuzz_$target
    corpus=$srcdir/tests/fuzz/corpus/$target
    if [ ! -x "$bin" ]; then
        echo "replay.sh: $bin is not built" >&2
        status=1
        continue
    fi
    # NAME.err beside an input is the sentence it must be refused with (test_zmtp_codec checks it), not an input.
    set --
    for f in "$corpus"/*; do
        case $f in
        *.err) ;;
        *) [ -f "$f" ] && set -- "$@" "$f" ;;
        esac
    done
    if [ $# -eq 0 ]; then
        echo "replay.sh: no corpus files in $corpus" >&2
        status=1
        continue
    fi
    if "$bin" "$@"; then
        echo "replay.sh: fuzz_$target: $# corpus files ok"
    else
        echo "replay.sh: fuzz_$target failed on the corpus in $corpus" >&2
        status=1
    fi
done
exit $status
