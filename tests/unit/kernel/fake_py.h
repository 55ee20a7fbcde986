/*
 * fake_py.h -- the scripted interpreter of the kernel's unit tests (fake_py.c): py.h's functions, plus what a
 * test needs to drive them.
 */
#ifndef PYC_FAKE_PY_H
#define PYC_FAKE_PY_H

#include <stdio.h>

#include "py.h"

/* The kernel's host callbacks, for the scripted cells to print and display through. */
void fake_py_set_host(const pyc_py_host_t *h);

/* How many pyc_py_enter calls are not balanced by pyc_py_leave (0 between requests). */
int fake_py_depth(void);

extern int fake_py_executed;
extern int fake_py_warm_ups; /* pyc_py_complete_warm_up calls */

#endif
