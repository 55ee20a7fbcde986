/*
 * fuzz_events.c -- libFuzzer target for the event log's reader (events.h): pyc_events_scan over the input as
 * the contents of a log file, and pyc_event_parse of the whole input as one line.
 *
 * Every event handed to the callback must hold what the header promises (seq above the cursor and at least
 * 1, a session, an event, an object that owns them), the bytes consumed must end just after a newline (or be
 * 0) and never pass the input, and a line that parses must have left nothing to free when it does not; the
 * harness aborts otherwise.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
check(void *ctx, const pyc_event_t *e)
{
    long long since = *(long long *)ctx;
    if (e->seq <= since || e->seq < 1 || e->session == NULL || e->event == NULL || !json_is_object(e->obj))
        abort();
    if (e->signal < 0 || e->signal >= 1024)
        abort();
    return e->seq == 7 ? 1 : 0;  /* exercise the early stop too */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    long long since = size > 0 ? data[0] % 4 : 0;
    int stop;
    size_t used = pyc_events_scan(buf, size, since, check, &since, &stop);
    if (used > size || (used > 0 && buf[used - 1] != '\n'))
        abort();
    if (stop != 0 && stop != 1)
        abort();
    pyc_event_t e;
    if (pyc_event_parse(buf, size, &e, NULL) == 0) {
        if (e.obj == NULL || e.seq < 1)
            abort();
        pyc_event_clear(&e);
    } else if (e.obj != NULL) {
        abort();
    }
    return 0;
}
