#!/bin/sh
# Runs last in a sanitizer build's `make check`: fails when AddressSanitizer, LeakSanitizer or UBSan wrote a
# report for any process of the run (kernels started by the pytest suites included; their stderr is not
# shown by the harness, so the reports go to files under $PYC_SANITIZER_LOGS).  Reports are printed, then
# moved aside so that the next run starts clean.
set -u
dir=${PYC_SANITIZER_LOGS:?}
# test_buf asks for 2^62 bytes on purpose (allocator_may_return_null=1); the warning that this allocation
# failed is expected and is the only line such a file holds.
for f in $(find "$dir" -maxdepth 1 -type f 2>/dev/null); do
    if ! grep -qv "WARNING: AddressSanitizer failed to allocate 0x" "$f"; then
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
