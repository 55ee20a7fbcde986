/*
 * fuzz_lastline.c -- libFuzzer target for the scan of a cell's last statement (lastline.h), which reads the
 * text of every execute_request before Python sees it.
 *
 * The input is scanned from an exact-size copy (a read past its end shows under the sanitizers), with and
 * without PYC_LASTLINE_NESTED_FSTRINGS, for both questions.  The flag only ever takes a "not an expression"
 * away and turns a ';' answer into "not understood" at most, the ';' answer is one of 1, 0 and -1, and no
 * answer may depend on what lies in memory after the text; the harness aborts otherwise.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lastline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    bool plain = pyc_lastline_not_expression(copy, size, 0);
    bool nested = pyc_lastline_not_expression(copy, size, PYC_LASTLINE_NESTED_FSTRINGS);
    if (nested && !plain)
        abort();
    int semi = pyc_lastline_semicolon(copy, size, 0);
    int semi_nested = pyc_lastline_semicolon(copy, size, PYC_LASTLINE_NESTED_FSTRINGS);
    if (semi < -1 || semi > 1 || (semi_nested != semi && semi_nested != -1))
        abort();
    copy[size] = '=';            /* a byte just past the text must change nothing */
    if (pyc_lastline_not_expression(copy, size, 0) != plain || pyc_lastline_semicolon(copy, size, 0) != semi)
        abort();
    free(copy);
    return 0;
}
