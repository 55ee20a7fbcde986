/*
 * thisshell.c -- which shell the calling thread serves: a subshell's thread is bound to its subshell
 * (pyc__subshell_bind_thread, by subshell.c when the thread starts), every other thread serves the main shell.
 * publish.c, host.c and handlers.c ask it for the request a thread answers, its output gate, its
 * allow_stdin and whether it is stopping, without depending on the subshells' machinery.
 */
#include "subshellint.h"

/* The subshell whose thread this is; NULL on every other thread. */
static _Thread_local pyc__subshell_t *here;

void
pyc__subshell_bind_thread(pyc__subshell_t *s)
{
    here = s;
}

const pyc_msg_t *
pyc__subshell_request(void)
{
    return here != NULL ? here->current : NULL;
}

pyc_outgate_t *
pyc__subshell_gate(void)
{
    return here != NULL ? &here->out : NULL;
}

bool
pyc__subshell_stopping(void)
{
    return here != NULL && atomic_load(&here->stop);
}

bool
pyc__subshell_allow_stdin(void)
{
    return here != NULL && here->allow_stdin;
}
