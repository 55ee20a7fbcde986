/*
 * fuzz_connfile.c -- libFuzzer target for pyc_connfile_parse and pyc_connfile_endpoint.
 *
 * The input is the whole connection file, bytes as they are.  A file that parses must hold what the header
 * promises (a known transport, a non-empty ip, ports in 0..65535, a NUL-terminated key of keylen bytes), and
 * every channel's endpoint must fit a buffer sized for the longest ip, CURVE keys are both there or both absent
 * and round-trip through Z85, an allow-list only comes with keys; the harness aborts otherwise.  Each
 * endpoint is also made into a small buffer, which may fail but must not write past it.  A refused file must
 * leave nothing to free.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "connfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pyc_connfile_t cf;
    pyc_error_t err;

    if (pyc_connfile_parse((const char *)data, size, &cf, &err) != 0) {
        if (cf.key != NULL || cf.curve_allowed != NULL || err.text[0] == '\0')
            abort();
        return 0;
    }
    if ((strcmp(cf.transport, "tcp") != 0 && strcmp(cf.transport, "ipc") != 0) || cf.ip[0] == '\0')
        abort();
    if (cf.key == NULL || cf.key[cf.keylen] != '\0')
        abort();
    if ((cf.curve_publickey[0] == '\0') != (cf.curve_secretkey[0] == '\0') ||
        (cf.curve_restricted && !pyc_connfile_curve(&cf)))
        abort();
    if (pyc_connfile_curve(&cf)) {
        unsigned char bin[PYC_CURVE_KEY_BYTES];
        char text[PYC_CURVE_KEY_TEXT + 1];
        if (pyc_z85_key(cf.curve_secretkey, strlen(cf.curve_secretkey), bin, "k", NULL) != 0 ||
            pyc_z85_encode(bin, sizeof bin, text) != PYC_CURVE_KEY_TEXT || strcmp(text, cf.curve_secretkey) != 0)
            abort();
    }
    for (int c = 0; c < PYC_CHAN_COUNT; c++) {
        /* "ipc://" + 255 bytes of ip + "-65535" + NUL is the longest endpoint. */
        char ep[6 + sizeof cf.ip + 6], small[12];
        if (cf.ports[c] < 0 || cf.ports[c] > 65535)
            abort();
        if (pyc_connfile_endpoint(&cf, c, ep, sizeof ep) != 0)
            abort();
        if (strncmp(ep, cf.transport, 3) != 0 || memcmp(ep + 6, cf.ip, strlen(cf.ip)) != 0)
            abort();
        (void)pyc_connfile_endpoint(&cf, c, small, sizeof small);
        if (memchr(small, '\0', sizeof small) == NULL)
            abort();
    }
    pyc_connfile_clear(&cf);
    pyc_connfile_clear(&cf);
    return 0;
}
