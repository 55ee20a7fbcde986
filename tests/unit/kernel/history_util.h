/*
 * history_util.h -- what the history tests share (history_util.c).
 */
#ifndef PYC_TEST_HISTORY_UTIL_H
#define PYC_TEST_HISTORY_UTIL_H

#include <jansson.h>

#include "history.h"

/* Writes "a/b" into out (PATH_MAX bytes), failing the test when it does not fit. */
void join(char *out, const char *a, const char *b);
/* Opens path, failing the test with the error sentence when it cannot. */
pyc_history_t *open_ok(const char *path);
/* Records cell `line`, failing the test on an error. */
void add_ok(pyc_history_t *h, int line, const char *source, const char *output);
/* Parses JSON text the test wrote, failing the test when it does not parse. */
json_t *parse(const char *text);
/* Sends request (JSON text) and checks that the reply is exactly {"status": "ok", "history": <history>}. */
void expect_history(pyc_history_t *h, const char *request, const char *history);
/* Sends request and checks that the reply is an error with that ename whose evalue contains `contains`. */
void expect_error(pyc_history_t *h, const char *request, const char *ename, const char *contains);

#endif
