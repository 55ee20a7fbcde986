/*
 * jsontext.c -- a jansson tree as compact JSON text (jsontext.h says why and what exactly).
 */
#include "jsontext.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A real as the jansson the program runs with writes it: jansson 2.14 writes "%.17g" (0.1 is
 * 0.10000000000000001), later versions the shortest text that reads back the same (0.1).  Reals are rare in
 * the kernel's own messages, so jansson formats each (into a stack buffer: no allocation). */
static int
real_text(pyc_buf_t *b, const json_t *j)
{
    char num[64];
    size_t n = json_dumpb(j, num, sizeof num, JSON_ENCODE_ANY);
    if (n == 0 || n > sizeof num)
        return -1;
    return pyc_buf_add(b, num, n);
}

static int
text_at(pyc_buf_t *b, const json_t *j, int depth)
{
    char num[64];
    int n;
    if (depth > PYC_JSON_TEXT_MAX_DEPTH)
        return -1;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *value;
        bool first = true;
        if (pyc_buf_add(b, "{", 1) < 0)
            return -1;
        json_object_foreach ((json_t *)j, key, value) {
            if ((!first && pyc_buf_add(b, ",", 1) < 0) || pyc_buf_add_json_string(b, key, strlen(key)) < 0 ||
                pyc_buf_add(b, ":", 1) < 0 || text_at(b, value, depth + 1) < 0)
                return -1;
            first = false;
        }
        return pyc_buf_add(b, "}", 1);
    }
    case JSON_ARRAY: {
        size_t size = json_array_size(j);
        if (pyc_buf_add(b, "[", 1) < 0)
            return -1;
        for (size_t i = 0; i < size; i++) {
            if ((i > 0 && pyc_buf_add(b, ",", 1) < 0) || text_at(b, json_array_get(j, i), depth + 1) < 0)
                return -1;
        }
        return pyc_buf_add(b, "]", 1);
    }
    case JSON_STRING:
        return pyc_buf_add_json_string(b, json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
        n = snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(j));
        return pyc_buf_add(b, num, (size_t)n);
    case JSON_REAL:
        return real_text(b, j);
    case JSON_TRUE:
        return pyc_buf_add(b, "true", 4);
    case JSON_FALSE:
        return pyc_buf_add(b, "false", 5);
    case JSON_NULL:
        return pyc_buf_add(b, "null", 4);
    }
    return -1;
}

int
pyc_json_text(pyc_buf_t *b, const json_t *j)
{
    size_t start = b->len;
    if (j == NULL || text_at(b, j, 0) < 0) {
        b->len = start;
        if (b->data != NULL)
            b->data[start] = '\0';
        return -1;
    }
    return 0;
}

char *
pyc_json_text_dup(const json_t *j, size_t *len)
{
    pyc_buf_t b;
    pyc_buf_init(&b, SIZE_MAX / 2);
    if (pyc_json_text(&b, j) < 0 || pyc_buf_reserve(&b, 0) < 0) {
        pyc_buf_free(&b);
        return NULL;
    }
    return pyc_buf_detach(&b, len);
}
