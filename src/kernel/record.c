/*
 * record.c -- see record.h.
 */
#include "record.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "buf.h"
#include "wire.h"

static int
read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

int
pyc_record_write(int fd, uint32_t type, uint32_t chan, const pyc_frame_t *frames, size_t n)
{
    uint32_t hdr[3] = {type, chan, (uint32_t)n};
    if (pyc_write_all(fd, hdr, sizeof hdr) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t size = frames[i].size;
        if (pyc_write_all(fd, &size, sizeof size) < 0 || pyc_write_all(fd, frames[i].data, frames[i].size) < 0)
            return -1;
    }
    return 0;
}

void
pyc_record_free(pyc_outframe_t *frames, size_t n)
{
    for (size_t i = 0; frames != NULL && i < n; i++)
        free(frames[i].owned);
    free(frames);
}

int
pyc_record_read(int fd, uint32_t *type, uint32_t *chan, pyc_outframe_t **frames, size_t *n)
{
    uint32_t hdr[3];
    *frames = NULL;
    *n = 0;
    if (read_all(fd, hdr, sizeof hdr) < 0 || hdr[2] > PYC_WIRE_MAX_FRAMES)
        return -1;
    pyc_outframe_t *f = calloc(hdr[2] + 1, sizeof *f);
    if (f == NULL)
        return -1;
    for (uint32_t i = 0; i < hdr[2]; i++) {
        uint64_t size;
        char *data;
        if (read_all(fd, &size, sizeof size) < 0 || size > PYC_RECORD_MAX_FRAME ||
            (data = malloc(size + 1)) == NULL) {
            pyc_record_free(f, i);
            return -1;
        }
        if (read_all(fd, data, size) < 0) {
            free(data);
            pyc_record_free(f, i);
            return -1;
        }
        data[size] = '\0';       /* a JSON frame can be parsed in place */
        f[i] = (pyc_outframe_t){data, size, data, NULL};
    }
    *type = hdr[0];
    *chan = hdr[1];
    *frames = f;
    *n = hdr[2];
    return 0;
}
