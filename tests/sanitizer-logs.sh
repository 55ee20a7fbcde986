#!/bin/sh
# Runs last in a sanitizer build's `make check`: fails when AddressSanitizer, LeakSanitizer or UBSan wrote a
# report for any process of the run (kernels started by the pytest suites included; their stderr is not
# shown by the harness, so the reports go to files under $PYC_SANITIZER_LOGS).  Reports are printed, then
# moved aside so that the next run starts clean.
set -u
dir=${PYC_SANITIZER_LOGS:?}
# Three warnings are expected and are not reports: test_buf asks for 2^62 bytes on purpose
# (allocator_may_return_null=1); LeakSanitizer in a forked kernel still lists the parent's threads,
# which do not exist in the child ("Running thread N was not suspended"); and the exit-time leak check's
# symbolizer dying under it ("Can't read from symbolizer"; seen once in CI, 2026-12-05): LeakSanitizer starts
# llvm-symbolizer as a child, in the kernel's process group, to match the suppressions, and jupyter_client
# kills that whole group with SIGKILL when a shutdown takes longer than it waits, which a leak check under
# ASan can.  A file that holds nothing else is removed: a report, if the check got that far, is in the file
# too and keeps it.
for f in $(find "$dir" -maxdepth 1 -type f 2>/dev/null); do
    if ! grep -v -e "WARNING: AddressSanitizer failed to allocate 0x" \
            -e "Running thread [0-9]* was not suspended. False leaks are possible." \
            -e "WARNING: Can't read from symbolizer at fd [0-9]*" "$f" | grep -q .; then
        rm -f "$f"
    fi
done
reports=$(find "$dir" -maxdepth 1 -type f 2>/dev/null | sort)
if [ -z "$reports" ]; then
    echo "sanitizer-logs: no reports"
    exit 0
fi
for f in $reports; do
    echo "==== $f"
    head -c 20000 "$f"
done
aside="$dir/reported-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$aside"
mv $reports "$aside"/
echo "sanitizer-logs: $(echo "$reports" | wc -l) report(s), moved to $aside"
exit 1
