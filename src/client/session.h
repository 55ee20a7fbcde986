/*
 * session.h -- the named sessions of the `pyc` command: names, files, process identity, `cp` sides.
 *
 * A session NAME is a pyc kernel whose connection file is <runtime dir>/pyc-NAME.json, mode 0600, where the
 * runtime dir is Jupyter's (paths.h).  Beside the members every connection file has, pyc writes three that
 * jupyter_client and pyc-kernel ignore:
 *     "pid"        the kernel's process id
 *     "pid_start"  that process's start time in clock ticks after boot (field 22 of /proc/PID/stat), so that a
 *                  pid reused by an unrelated process is never taken for the kernel (and never killed)
 *     "created"    when the session was made, in seconds since the epoch
 * Two more files may sit beside it: pyc-NAME.lock (flock(2)ed while a `new`, `fork`, `kill` of NAME runs; its
 * holder writes which) and pyc-NAME.log (the kernel's stdout and stderr).
 *
 * Everything here is free of sockets; the parsers are pure and unit-tested (tests/unit/client/test_session.c).
 */
#ifndef PYC_SESSION_H
#define PYC_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "connfile.h"
#include "error.h"
#include "proc.h"

/* Names: 1 to 80 characters of a-z, 0-9, '_' and '-'. */
#define PYC_SESSION_NAME_MAX 80

/* Returns 0 when name is a valid session name, else -1 with err saying what is wrong with it. */
int pyc_session_name_check(const char *name, pyc_error_t *err);

/* Writes "<dir>/pyc-<name><suffix>" into out (cap bytes).  Returns 0, or -1 when it does not fit. */
int pyc_session_path(char *out, size_t cap, const char *dir, const char *name, const char *suffix);

/* When file_name (a directory entry, not a path) is "pyc-NAME.json" with a valid NAME, copies NAME into
 * name_out (PYC_SESSION_NAME_MAX + 1 bytes) and returns true. */
bool pyc_session_name_of_file(const char *file_name, char *name_out);

/* ---- a session's connection file ------------------------------------------------------------------------- */

typedef struct pyc_session_file {
    pyc_connfile_t cf;           /* the connection: key owned, freed by pyc_session_file_clear */
    long pid;                    /* 0 when the file names none (a file pyc did not write) */
    unsigned long long pid_start;/* 0 when unknown */
    double created;              /* seconds since the epoch; 0 when unknown */
} pyc_session_file_t;

/* Parses the text of a connection file with pyc's extra members.  Returns 0, or -1 with err (out then holds
 * nothing to free).  Extra members of the wrong type count as absent. */
int pyc_session_file_parse(const char *text, size_t len, pyc_session_file_t *out, pyc_error_t *err);

/* Reads and parses path (at most 1 MiB).  Returns 0, or -1 with err, whose code is PYC_ENOENT when the file
 * does not exist (no session of that name) and another code when it exists but cannot be used: PYC_EINVAL
 * for a symbolic link, a file that is not regular (a FIFO is refused without blocking) or one over 1 MiB,
 * connfile.c's codes for its content. */
int pyc_session_file_load(const char *path, pyc_session_file_t *out, pyc_error_t *err);

/* Writes the connection of sf and its extra members to path, mode 0600, atomically (a temporary file in the
 * same directory, then rename(2)).  Returns 0 or -1 with err. */
int pyc_session_file_write(const char *path, const pyc_session_file_t *sf, pyc_error_t *err);

/* Frees what parse/load allocated.  Safe to call twice. */
void pyc_session_file_clear(pyc_session_file_t *sf);

/* ---- `pyc cp` sides -------------------------------------------------------------------------------------- */

enum { PYC_SIDE_FILE, PYC_SIDE_STDIO, PYC_SIDE_SESSION };

typedef struct pyc_side {
    int kind;                    /* PYC_SIDE_* */
    char session[PYC_SESSION_NAME_MAX + 1];  /* for PYC_SIDE_SESSION */
    char var[256];               /* for PYC_SIDE_SESSION: "" means the whole namespace */
    const char *path;            /* for PYC_SIDE_FILE: points into the argument */
} pyc_side_t;

/* Parses one side of `pyc cp`, as scp does:
 *   1) "-" is stdin or stdout;
 *   2) "NAME:VAR" and "NAME:" (NAME a valid session name) are a session's variable or its whole namespace;
 *      VAR must look like a Python identifier (ASCII letters, digits, '_', or any non-ASCII byte, not
 *      starting with a digit; the kernel makes the final check);
 *   3) anything else is a file path, except that a path with a ':' and no '/' before it is refused as
 *      ambiguous (a mistyped session name would otherwise become a file): write "./A:B" for such a file.
 * Returns 0, or -1 with err. */
int pyc_side_parse(const char *arg, pyc_side_t *out, pyc_error_t *err);

#endif
