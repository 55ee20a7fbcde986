/*
 * fuzz_execreq.c -- libFuzzer target for the decoding of an execute_request (execreq.c), which reads what any
 * client with the key sends.
 *
 * The input, when it parses as JSON, is used twice: as the request's content (with no metadata), and as its
 * metadata (with a fixed content whose code starts with the input's "code" member when there is one).  The
 * decoder must either refuse with a message or give a request whose code lies inside its source (it only
 * moves past first lines), whose store_history is false when silent, and whose limits are never looser than
 * the kernel's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "execreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(json_t *content, json_t *metadata)
{
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.cell_timeout = 10;
    l.output_bytes = 1000;
    pyc_execreq_t r;
    if (pyc_execreq_decode(&r, content, metadata, &l) < 0) {
        if (r.refused == NULL || r.refused[0] == '\0')
            abort();
        return;
    }
    if (r.refused != NULL || r.source == NULL || r.code < r.source || r.code > r.source + strlen(r.source))
        abort();
    if (r.silent && r.store_history)
        abort();
    if (r.limits.timeout > 10 || r.limits.timeout <= 0 || r.limits.output_bytes > 1000 ||
        r.limits.output_bytes == 0 || r.isolate_timeout < 0)
        abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (j == NULL)
        return 0;
    check(j, NULL);
    json_t *code = json_object_get(j, "code");
    json_t *dflt = json_string("%%isolate 1s\nx");
    json_t *content = json_pack("{s:O}", "code", json_is_string(code) ? code : dflt);
    check(content, j);
    json_decref(content);
    json_decref(dflt);
    json_decref(j);
    return 0;
}
