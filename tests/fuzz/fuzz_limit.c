/*
 * fuzz_limit.c -- libFuzzer target for the text parsers of the limits and checkpoints: the duration and size
 * parsers (limit.c), a request's metadata.pyc (limit.c), and a checkpoint file (checkpoint.c).
 *
 * The input is used three ways.  As a NUL-terminated string it goes to both value parsers, whose results
 * must be finite and non-negative when accepted.  As JSON, when it parses, it is a cell's metadata, whose
 * limits must never be looser than the kernel's.  As a checkpoint file it must either be refused with a
 * message or split into cells whose total length is at most the input's.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "limit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    double secs;
    size_t bytes;
    if (pyc_limits_parse_seconds(text, &secs, NULL) == 0 && (!isfinite(secs) || secs < 0))
        abort();
    (void)pyc_limits_parse_bytes(text, &bytes, NULL);

    json_t *md = json_loadb((const char *)data, size, 0, NULL);
    if (md != NULL) {
        pyc_limits_t l;
        pyc_cell_limits_t c;
        pyc_limits_init(&l);
        l.cell_timeout = 10;
        l.output_bytes = 1000;
        if (pyc_limits_for_cell(&l, md, &c, NULL) == 0 &&
            (c.timeout > 10 || c.timeout <= 0 || c.output_bytes > 1000 || c.output_bytes == 0))
            abort();
        json_decref(md);
    }

    char **cells;
    size_t n;
    pyc_error_t err;
    if (pyc_checkpoint_parse((const char *)data, size, &cells, &n, &err) == 0) {
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += strlen(cells[i]);
        if (total > size)
            abort();
        pyc_checkpoint_free_cells(cells, n);
    } else if (err.text[0] == '\0' || cells != NULL) {
        abort();
    }
    free(text);
    return 0;
}
