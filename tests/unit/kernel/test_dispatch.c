/*
 * test_dispatch.c -- cmocka tests of the kernel object through its io seam (io.h): a fake io records every
 * message the kernel sends and serves the requests a test queues, and the interpreter is fake_py.c's script.
 * No socket, no Python: the rules of dispatch are checked in milliseconds.
 *
 * Checked: busy first and idle last for every request, with the request as parent; replies on the channel the
 * request came from; execution_count; silent cells; the abort of queued execute requests after an error (and
 * the answer of other queued requests, in order); BadRequest; control-thread requests; the output cap with
 * its notice; and metadata.pyc of every execute_reply.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "fake_py.h"
#include "kernel.h"
#include "wire.h"

/* ---- the fake io ------------------------------------------------------------------------------------- */

#define MAX_SENT 256

/* The completer warm-up's pause in this test (the kernel's is PYC_COMPLETE_WARM_QUIET_MS). */
#define WARM_QUIET_MS 200

typedef struct sent {
    int chan;
    pyc_msg_t *msg;              /* decoded */
} sent_t;

typedef struct fake_io {
    pyc_io_t io;
    pthread_mutex_t lock;
    sent_t sent[MAX_SENT];
    int n_sent;
    pyc_msg_t *pending[16];      /* what next_pending hands out, in order */
    int n_pending;
} fake_io_t;

static fake_io_t fio;
static pyc_auth_t *auth;
static pyc_kernel_t *kernel;

/* Storage of a decoded sent message: a copy of its frames. */
typedef struct copy {
    size_t n;
    pyc_frame_t views[];
} copy_t;

static void
copy_free(void *p)
{
    copy_t *c = p;
    for (size_t i = 0; i < c->n; i++)
        free((void *)c->views[i].data);
    free(c);
}

static int
io_send(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n)
{
    fake_io_t *f = (fake_io_t *)io;
    copy_t *c = malloc(sizeof *c + n * sizeof(pyc_frame_t));
    c->n = n;
    for (size_t i = 0; i < n; i++) {
        void *d = malloc(frames[i].size + 1);
        memcpy(d, frames[i].data, frames[i].size);
        c->views[i] = (pyc_frame_t){d, frames[i].size};
        pyc_outframe_drop(&frames[i]);
    }
    pyc_msg_t *m = NULL;
    pyc_error_t err;
    /* iopub frames start with the topic, replies with the request's identities: both decode the same. */
    if (pyc_wire_decode(c->views, n, NULL, &m, &err) < 0)
        fail_msg("the kernel sent a message that does not decode: %s", err.text);
    pyc_msg_set_owner(m, c, copy_free);
    pthread_mutex_lock(&f->lock);
    if (f->n_sent == MAX_SENT)
        fail_msg("more than %d messages sent", MAX_SENT);
    f->sent[f->n_sent++] = (sent_t){chan, m};
    pthread_mutex_unlock(&f->lock);
    return 0;
}

static pyc_msg_t *
io_next_pending(pyc_io_t *io)
{
    fake_io_t *f = (fake_io_t *)io;
    if (f->n_pending == 0)
        return NULL;
    pyc_msg_t *m = f->pending[0];
    memmove(f->pending, f->pending + 1, (size_t)(f->n_pending - 1) * sizeof f->pending[0]);
    f->n_pending--;
    return m;
}

static pyc_msg_t *
io_recv_stdin(pyc_io_t *io, int timeout_ms)
{
    (void)io;
    (void)timeout_ms;
    return NULL;
}

/* ---- requests ---------------------------------------------------------------------------------------- */

static int request_seq;

/* A request as a client sends it: [identity, delimiter, signature, header, parent, metadata, content]. */
static pyc_msg_t *
request(const char *msg_type, json_t *content, json_t *metadata)
{
    char id[32], header[256];
    snprintf(id, sizeof id, "req-%d", ++request_seq);
    snprintf(header, sizeof header,
             "{\"msg_id\":\"%s\",\"msg_type\":\"%s\",\"session\":\"s\",\"username\":\"u\",\"date\":\"\","
             "\"version\":\"5.3\"}", id, msg_type);
    if (content == NULL)
        content = json_object();
    if (metadata == NULL)
        metadata = json_object();
    char *c = json_dumps(content, JSON_COMPACT);
    char *md = json_dumps(metadata, JSON_COMPACT);
    json_decref(content);
    json_decref(metadata);
    pyc_frame_t dicts[4] = {{header, strlen(header)}, {"{}", 2}, {md, strlen(md)}, {c, strlen(c)}};
    char sig[PYC_AUTH_MAX_HEX + 1];
    assert_int_equal(pyc_wire_sign(auth, dicts, sig), 0);
    size_t n = 7;
    copy_t *cp = malloc(sizeof *cp + n * sizeof(pyc_frame_t));
    const pyc_frame_t src[7] = {{"client", 6}, {PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN}, {sig, strlen(sig)},
                                dicts[0], dicts[1], dicts[2], dicts[3]};
    cp->n = n;
    for (size_t i = 0; i < n; i++) {
        void *d = malloc(src[i].size + 1);
        memcpy(d, src[i].data, src[i].size);
        cp->views[i] = (pyc_frame_t){d, src[i].size};
    }
    free(c);
    free(md);
    pyc_msg_t *m = NULL;
    pyc_error_t err;
    if (pyc_wire_decode(cp->views, n, auth, &m, &err) < 0)
        fail_msg("test request does not decode: %s", err.text);
    pyc_msg_set_owner(m, cp, copy_free);
    return m;
}

static pyc_msg_t *
execute_request(const char *code, json_t *extra)
{
    json_t *c = json_pack("{s:s}", "code", code);
    if (extra != NULL) {
        json_object_update(c, extra);
        json_decref(extra);
    }
    return request("execute_request", c, NULL);
}

/* ---- what was sent ------------------------------------------------------------------------------------ */

static void
clear_sent(void)
{
    for (int i = 0; i < fio.n_sent; i++)
        pyc_msg_destroy(&fio.sent[i].msg);
    fio.n_sent = 0;
}

static const char *
parent_id(const pyc_msg_t *m)
{
    return json_string_value(json_object_get(m->parent_header, "msg_id"));
}

static const char *
status_of(const pyc_msg_t *m)
{
    return strcmp(m->msg_type, "status") == 0
               ? json_string_value(json_object_get(m->content, "execution_state"))
               : NULL;
}

/* The messages sent with the request id as parent, as "chan:type" words joined by spaces ("iopub:busy" for a
 * status), into out. */
static const char *
trace_of(const char *req_id, char *out, size_t cap)
{
    static const char *const chans[] = {"shell", "iopub", "stdin", "control", "hb"};
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < fio.n_sent; i++) {
        const pyc_msg_t *m = fio.sent[i].msg;
        const char *p = parent_id(m);
        if (p == NULL || strcmp(p, req_id) != 0)
            continue;
        const char *st = status_of(m);
        len += (size_t)snprintf(out + len, cap - len, "%s%s:%s", len > 0 ? " " : "", chans[fio.sent[i].chan],
                                st != NULL ? st : m->msg_type);
    }
    return out;
}

static const pyc_msg_t *
find_sent(const char *req_id, const char *msg_type)
{
    for (int i = 0; i < fio.n_sent; i++) {
        const pyc_msg_t *m = fio.sent[i].msg;
        const char *p = parent_id(m);
        if (p != NULL && strcmp(p, req_id) == 0 && strcmp(m->msg_type, msg_type) == 0)
            return m;
    }
    return NULL;
}

/* Handles a request on the main thread (as the request loop does) and returns its id. */
static const char *
handle(pyc_msg_t *m, int chan, char *id, size_t cap)
{
    snprintf(id, cap, "%s", m->msg_id);
    pyc_kernel_handle(kernel, chan, m);
    assert_int_equal(fake_py_depth(), 0);
    return id;
}

/* ---- set-up ------------------------------------------------------------------------------------------- */

static int
setup(void **state)
{
    (void)state;
    pyc_error_t err;
    setenv("PYC_HISTORY_FILE", ":memory:", 1);
    memset(&fio, 0, sizeof fio);
    pthread_mutex_init(&fio.lock, NULL);
    fio.io = (pyc_io_t){.send = io_send, .next_pending = io_next_pending, .recv_stdin = io_recv_stdin};
    auth = pyc_auth_new("hmac-sha256", "key", 3, 0, &err);
    assert_non_null(auth);
    pyc_connfile_t cf = {.transport = "tcp", .ip = "127.0.0.1", .ports = {1, 2, 3, 4, 5},
                         .signature_scheme = "hmac-sha256"};
    pyc_limits_t limits;
    pyc_limits_init(&limits);
    limits.output_bytes = 1000;
    pyc_kernel_config_t kc = {.io = &fio.io, .auth = auth, .cf = &cf, .limits = &limits,
                              .complete_warm_quiet_ms = WARM_QUIET_MS};
    kernel = pyc_kernel_new(&kc, &err);
    if (kernel == NULL)
        fail_msg("pyc_kernel_new: %s", err.text);
    pyc_py_host_t host;
    pyc_kernel_py_host(kernel, &host);
    fake_py_set_host(&host);
    pyc_kernel_starting(kernel);
    clear_sent();
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    pyc_kernel_destroy(&kernel);
    clear_sent();
    while (fio.n_pending > 0)
        pyc_msg_destroy(&fio.pending[--fio.n_pending]);
    pyc_auth_destroy(&auth);
    pthread_mutex_destroy(&fio.lock);
    return 0;
}

/* ---- tests -------------------------------------------------------------------------------------------- */

static void
test_busy_reply_idle(void **state)
{
    (void)state;
    char id[64], trace[1024];
    handle(request("kernel_info_request", NULL, NULL), PYC_CHAN_SHELL, id, sizeof id);
    assert_string_equal(trace_of(id, trace, sizeof trace), "iopub:busy shell:kernel_info_reply iopub:idle");
    const pyc_msg_t *r = find_sent(id, "kernel_info_reply");
    assert_string_equal(json_string_value(json_object_get(r->content, "implementation")), "pyc");
    /* The reply goes back to the identity that asked. */
    assert_int_equal(r->n_idents, 1);
    assert_memory_equal(r->idents[0].data, "client", 6);

    /* On control, through the main thread too (a request the control thread hands on). */
    handle(request("complete_request", json_pack("{s:s}", "code", "ab"), NULL), PYC_CHAN_CONTROL, id, sizeof id);
    assert_string_equal(trace_of(id, trace, sizeof trace), "iopub:busy control:complete_reply iopub:idle");
}

/* The completer is warmed once, idle, after the first complete_request and a pause of the requests (here
 * WARM_QUIET_MS): not before (a kernel whose frontend never completes does not pay for jedi), not while
 * requests keep coming, and not twice. */
static void
test_completer_warmed_once_after_the_first_completion(void **state)
{
    (void)state;
    char id[64];
    int before = fake_py_warm_ups;
    handle(request("kernel_info_request", NULL, NULL), PYC_CHAN_SHELL, id, sizeof id);
    handle(execute_request("print:1", NULL), PYC_CHAN_SHELL, id, sizeof id);
    assert_int_equal(pyc_kernel_idle(kernel), -1);         /* nothing to wait for */
    assert_int_equal(fake_py_warm_ups, before);
    handle(request("complete_request", json_pack("{s:s}", "code", "pri"), NULL), PYC_CHAN_SHELL, id, sizeof id);
    assert_non_null(find_sent(id, "complete_reply"));
    int again = pyc_kernel_idle(kernel);                    /* the pause has not come yet: ask again then */
    assert_true(again > 0 && again <= WARM_QUIET_MS);
    assert_int_equal(fake_py_warm_ups, before);
    /* A request in the pause starts it over. */
    usleep(WARM_QUIET_MS * 600);
    handle(request("kernel_info_request", NULL, NULL), PYC_CHAN_SHELL, id, sizeof id);
    again = pyc_kernel_idle(kernel);
    assert_true(again > WARM_QUIET_MS / 2 && again <= WARM_QUIET_MS);
    assert_int_equal(fake_py_warm_ups, before);
    usleep((useconds_t)again * 1000 + 5000);
    assert_int_equal(pyc_kernel_idle(kernel), -1);
    assert_int_equal(fake_py_warm_ups, before + 1);
    assert_int_equal(fake_py_depth(), 0);
    handle(request("complete_request", json_pack("{s:s}", "code", "os.pa"), NULL), PYC_CHAN_SHELL, id,
           sizeof id);
    assert_int_equal(pyc_kernel_idle(kernel), -1);
    assert_int_equal(fake_py_warm_ups, before + 1);
}

static void
test_unknown_and_bad_requests(void **state)
{
    (void)state;
    char id[64], trace[1024];
    handle(request("no_such_request", NULL, NULL), PYC_CHAN_SHELL, id, sizeof id);
    assert_string_equal(trace_of(id, trace, sizeof trace), "iopub:busy iopub:idle");

    handle(request("execute_request", json_pack("{s:i}", "code", 5), NULL), PYC_CHAN_SHELL, id, sizeof id);
    assert_string_equal(trace_of(id, trace, sizeof trace), "iopub:busy shell:execute_reply iopub:idle");
    const pyc_msg_t *r = find_sent(id, "execute_reply");
    assert_string_equal(json_string_value(json_object_get(r->content, "status")), "error");
    assert_string_equal(json_string_value(json_object_get(r->content, "ename")), "BadRequest");
    json_t *pmd = json_object_get(r->metadata, "pyc");
    assert_string_equal(json_string_value(json_object_get(pmd, "outcome")), "bad_request");

    handle(request("complete_request", json_object(), NULL), PYC_CHAN_SHELL, id, sizeof id);
    r = find_sent(id, "complete_reply");
    assert_string_equal(json_string_value(json_object_get(r->content, "ename")), "BadRequest");
}

static void
test_execute_counts_and_outputs(void **state)
{
    (void)state;
    char id[64], trace[1024];
    handle(execute_request("print:5 result", NULL), PYC_CHAN_SHELL, id, sizeof id);
    assert_string_equal(trace_of(id, trace, sizeof trace),
                        "iopub:busy iopub:execute_input iopub:stream iopub:execute_result shell:execute_reply "
                        "iopub:idle");
    const pyc_msg_t *r = find_sent(id, "execute_reply");
    assert_string_equal(json_string_value(json_object_get(r->content, "status")), "ok");
    assert_int_equal(json_integer_value(json_object_get(r->content, "execution_count")), 1);
    json_t *pmd = json_object_get(r->metadata, "pyc");
    assert_string_equal(json_string_value(json_object_get(pmd, "outcome")), "ok");
    assert_string_equal(json_string_value(json_object_get(pmd, "state")), "intact");
    assert_false(json_is_true(json_object_get(pmd, "output_dropped")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(pmd, "output"), "messages")), 2);

    /* Silent: no execute_input, no output, no count. */
    handle(execute_request("print:5 result", json_pack("{s:b}", "silent", 1)), PYC_CHAN_SHELL, id, sizeof id);
    assert_string_equal(trace_of(id, trace, sizeof trace), "iopub:busy shell:execute_reply iopub:idle");
    r = find_sent(id, "execute_reply");
    assert_int_equal(json_integer_value(json_object_get(r->content, "execution_count")), 1);

    /* store_history false: runs, does not count. */
    handle(execute_request("ok", json_pack("{s:b}", "store_history", 0)), PYC_CHAN_SHELL, id, sizeof id);
    r = find_sent(id, "execute_reply");
    assert_int_equal(json_integer_value(json_object_get(r->content, "execution_count")), 1);
    handle(execute_request("ok", NULL), PYC_CHAN_SHELL, id, sizeof id);
    r = find_sent(id, "execute_reply");
    assert_int_equal(json_integer_value(json_object_get(r->content, "execution_count")), 2);
}

static void
test_error_aborts_queued_execute_requests(void **state)
{
    (void)state;
    char id[64], trace[1024];
    char q1[64], q2[64], q3[64];
    pyc_msg_t *a = execute_request("ok", NULL), *b = request("kernel_info_request", NULL, NULL),
              *c = execute_request("ok", NULL);
    snprintf(q1, sizeof q1, "%s", a->msg_id);
    snprintf(q2, sizeof q2, "%s", b->msg_id);
    snprintf(q3, sizeof q3, "%s", c->msg_id);
    fio.pending[0] = a;
    fio.pending[1] = b;
    fio.pending[2] = c;
    fio.n_pending = 3;
    int before = fake_py_executed;
    handle(execute_request("error", NULL), PYC_CHAN_SHELL, id, sizeof id);
    assert_int_equal(fake_py_executed, before + 1);     /* the queued cells did not run */
    assert_string_equal(trace_of(id, trace, sizeof trace),
                        "iopub:busy iopub:execute_input iopub:error shell:execute_reply iopub:idle");
    const pyc_msg_t *r = find_sent(id, "execute_reply");
    assert_string_equal(json_string_value(json_object_get(r->content, "ename")), "ValueError");
    assert_string_equal(json_string_value(json_object_get(json_object_get(r->metadata, "pyc"), "outcome")), "error");

    assert_string_equal(trace_of(q1, trace, sizeof trace), "iopub:busy shell:execute_reply iopub:idle");
    r = find_sent(q1, "execute_reply");
    assert_string_equal(json_string_value(json_object_get(r->content, "status")), "aborted");
    assert_string_equal(json_string_value(json_object_get(json_object_get(r->metadata, "pyc"), "outcome")),
                        "aborted");
    assert_string_equal(trace_of(q2, trace, sizeof trace), "iopub:busy shell:kernel_info_reply iopub:idle");
    assert_string_equal(trace_of(q3, trace, sizeof trace), "iopub:busy shell:execute_reply iopub:idle");
    /* In order: the error's idle, then q1, q2, q3. */
    int order[4] = {-1, -1, -1, -1};
    const char *ids[4] = {id, q1, q2, q3};
    for (int i = 0; i < fio.n_sent; i++) {
        for (int j = 0; j < 4; j++) {
            const char *p = parent_id(fio.sent[i].msg);
            if (order[j] < 0 && p != NULL && strcmp(p, ids[j]) == 0)
                order[j] = i;
        }
    }
    assert_true(order[0] < order[1] && order[1] < order[2] && order[2] < order[3]);

    /* After the queue is drained, cells run again. */
    handle(execute_request("ok", NULL), PYC_CHAN_SHELL, id, sizeof id);
    r = find_sent(id, "execute_reply");
    assert_string_equal(json_string_value(json_object_get(r->content, "status")), "ok");
}

static void
test_error_without_stop_on_error_aborts_nothing(void **state)
{
    (void)state;
    char id[64];
    pyc_msg_t *a = execute_request("ok", NULL);
    fio.pending[0] = a;
    fio.n_pending = 1;
    handle(execute_request("error", json_pack("{s:b}", "stop_on_error", 0)), PYC_CHAN_SHELL, id, sizeof id);
    assert_int_equal(fio.n_pending, 1);          /* still waiting, to be run as usual */
}

static void
test_output_cap_and_notice(void **state)
{
    (void)state;
    char id[64], trace[1024];
    /* The kernel's cap is 1000 bytes, its notice included: 1500 printed are cut to 1000 less the notice,
     * which follows. */
    const size_t notice = strlen("\n[pyc] output limit reached: the rest of this cell's output was dropped "
                                 "(limit: 1000 bytes)\n");
    handle(execute_request("print:1500", NULL), PYC_CHAN_SHELL, id, sizeof id);
    assert_string_equal(trace_of(id, trace, sizeof trace),
                        "iopub:busy iopub:execute_input iopub:stream iopub:stream shell:execute_reply iopub:idle");
    const pyc_msg_t *s = find_sent(id, "stream");
    assert_int_equal(strlen(json_string_value(json_object_get(s->content, "text"))), 1000 - notice);
    const pyc_msg_t *r = find_sent(id, "execute_reply");
    json_t *pmd = json_object_get(r->metadata, "pyc");
    assert_true(json_is_true(json_object_get(pmd, "output_dropped")));
    json_t *out = json_object_get(pmd, "output");
    assert_int_equal(json_integer_value(json_object_get(out, "bytes")), 1000);
    assert_int_equal(json_integer_value(json_object_get(out, "dropped_bytes")), 500 + notice);
    /* A request can only tighten it: 10 bytes for this cell; 5000 would not loosen it. */
    json_t *md = json_pack("{s:{s:i}}", "pyc", "output_limit", 10);
    handle(request("execute_request", json_pack("{s:s}", "code", "print:50"), md), PYC_CHAN_SHELL, id, sizeof id);
    s = find_sent(id, "stream");
    assert_int_equal(strlen(json_string_value(json_object_get(s->content, "text"))), 10);
    md = json_pack("{s:{s:i}}", "pyc", "output_limit", 5000);
    handle(request("execute_request", json_pack("{s:s}", "code", "print:1500"), md), PYC_CHAN_SHELL, id, sizeof id);
    s = find_sent(id, "stream");
    assert_int_equal(strlen(json_string_value(json_object_get(s->content, "text"))), 1000 - notice);
}

static void
test_outcomes(void **state)
{
    (void)state;
    char id[64];
    handle(execute_request("interrupted", NULL), PYC_CHAN_SHELL, id, sizeof id);
    json_t *pmd = json_object_get(find_sent(id, "execute_reply")->metadata, "pyc");
    assert_string_equal(json_string_value(json_object_get(pmd, "outcome")), "interrupted");
    assert_true(json_is_true(json_object_get(pmd, "interrupted")));
    assert_false(json_is_true(json_object_get(pmd, "timed_out")));
    assert_true(json_is_null(json_object_get(pmd, "limit")));
    /* MemoryError counts as a cap hit only under a memory cap (none here). */
    handle(execute_request("memory", NULL), PYC_CHAN_SHELL, id, sizeof id);
    pmd = json_object_get(find_sent(id, "execute_reply")->metadata, "pyc");
    assert_false(json_is_true(json_object_get(pmd, "memory_cap_hit")));
    assert_string_equal(json_string_value(json_object_get(pmd, "outcome")), "error");
    assert_true(json_real_value(json_object_get(pmd, "wall_time")) >= 0);
}

static void
test_control_thread_requests(void **state)
{
    (void)state;
    char trace[1024];
    pyc_msg_t *m = request("kernel_info_request", NULL, NULL);
    char id[64];
    snprintf(id, sizeof id, "%s", m->msg_id);
    assert_true(pyc_kernel_control(kernel, m));  /* answered (and freed) there */
    assert_string_equal(trace_of(id, trace, sizeof trace), "iopub:busy control:kernel_info_reply iopub:idle");
    m = execute_request("ok", NULL);
    assert_false(pyc_kernel_control(kernel, m)); /* for the main thread */
    pyc_msg_destroy(&m);
    m = request("shutdown_request", json_pack("{s:b}", "restart", 1), NULL);
    snprintf(id, sizeof id, "%s", m->msg_id);
    assert_true(pyc_kernel_control(kernel, m));
    assert_string_equal(trace_of(id, trace, sizeof trace),
                        "iopub:busy control:shutdown_reply iopub:shutdown_reply iopub:idle");
    bool restart = false;
    assert_true(pyc_kernel_quitting(kernel, &restart));
    assert_true(restart);
}

/* An io without route_shell (this fake, an isolated cell's pipe) has no subshells: create_subshell_request gets
 * an error reply on control, list an empty list, and a shell request that names a subshell an error reply of
 * its own type between busy and idle. */
static void
test_subshells_without_routing(void **state)
{
    (void)state;
    char trace[1024], id[64];
    pyc_msg_t *m = request("create_subshell_request", NULL, NULL);
    snprintf(id, sizeof id, "%s", m->msg_id);
    assert_true(pyc_kernel_control(kernel, m));
    assert_string_equal(trace_of(id, trace, sizeof trace), "iopub:busy control:create_subshell_reply iopub:idle");
    m = request("list_subshell_request", NULL, NULL);
    snprintf(id, sizeof id, "%s", m->msg_id);
    assert_true(pyc_kernel_control(kernel, m));
    assert_string_equal(trace_of(id, trace, sizeof trace), "iopub:busy control:list_subshell_reply iopub:idle");
    m = execute_request("ok", NULL);
    json_object_set_new(m->header, "subshell_id", json_string("nope"));
    snprintf(id, sizeof id, "%s", m->msg_id);
    pyc_kernel_handle(kernel, PYC_CHAN_SHELL, m);
    assert_string_equal(trace_of(id, trace, sizeof trace), "iopub:busy shell:execute_reply iopub:idle");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_busy_reply_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_completer_warmed_once_after_the_first_completion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_and_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_execute_counts_and_outputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_aborts_queued_execute_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_without_stop_on_error_aborts_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_cap_and_notice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outcomes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_control_thread_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subshells_without_routing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
