/*
 * fuzz_dap.c -- libFuzzer target for the DAP framing parser (dap.c) that reads debugpy's adapter.
 *
 * The input is parsed as a stream, message after message, as pyc_dap_next consumes it.  Each accepted
 * message must lie inside the input, with a header of at most PYC_DAP_MAX_HEADER bytes and a body of at most
 * the given limit; a refused header stops the stream, an incomplete one asks for more bytes.
 */
#include <stdint.h>
#include <stdlib.h>

#include "dap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    size_t left = size;
    const size_t max_body = 1 << 16;
    for (;;) {
        const char *body;
        size_t blen, used;
        int r = pyc_dap_frame(p, left, max_body, &body, &blen, &used);
        if (r <= 0)
            break;
        if (used > left || blen > max_body || body < p || body + blen != p + used || used - blen > PYC_DAP_MAX_HEADER)
            abort();
        p += used;
        left -= used;
    }
    return 0;
}
