/*
 * floor_py.c -- floor-py, the least a Jupyter kernel in C on pyc's libraries can do per request: the floor that
 * bench/bench_floor.py measures pyc against (issue 22, "performance at the floor").  It is not a product.
 *
 *     floor-py -f CONNECTION_FILE
 *
 * One thread of its own (libzmq adds its I/O thread, as in pyc), the same libraries as pyc-kernel: libzmq,
 * jansson, OpenSSL's SHA-256 for HMAC-SHA256 (with the key's ipad/opad states made once, as pyc does) and
 * the embedded CPython of python3-embed.  It binds the five sockets of the connection file and waits in one
 * zmq_poll with no timeout, so an idle floor-py never wakes.  It answers:
 *
 *   1) kernel_info_request (shell or control): a kernel_info_reply, enough for jupyter_client's wait_for_ready;
 *   2) execute_request: verify the signature, parse the four JSON parts, publish status busy and execute_input,
 *      compile the code with Py_file_input and run it in one persistent __main__ dict (no execute_result, no
 *      captured output: an expression's value is dropped; an exception gives an error reply and an `error`
 *      message with ename and evalue, no traceback), send execute_reply, publish status idle;
 *   3) shutdown_request (shell or control): a shutdown_reply, then exit;
 *   4) heartbeat: echoes every ping.
 * Every other request gets busy and idle and no reply.  A message with a bad signature is dropped.  Every
 * message it sends is signed; its parent header is the request's header frame as received.
 *
 * The profile behind it (shared review "performance-2026-12", section 5): 5 HMACs cost ~3 us, 4 json_loadb
 * 6-11 us, a signed 7-frame iopub message ~2 us of the sender's CPU sent back to back, ~10 us sent alone; so a
 * `pass` request costs ~45-75 us pipelined and ~130-180 us one at a time, most of it libzmq and CPython.
 */
#define OPENSSL_API_COMPAT 0x10100000L
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <zmq.h>

#include "config.h"

#define MAX_FRAMES 32           /* identities + delimiter + 5 parts + buffers; the rest is read and dropped */
#define DELIM "<IDS|MSG>"

enum { SHELL, CONTROL, STDIN, HB, IOPUB, NSOCK };

static struct {
    void *ctx, *sock[NSOCK];
    bool signing;                   /* false when the key is empty: signatures are "" */
    SHA256_CTX inner, outer;        /* SHA-256 after absorbing key^ipad and key^opad */
    char session[33];
    unsigned long long rng[2];      /* xorshift128+ for message ids */
    PyObject *globals;              /* __main__'s dict: every cell runs in it */
    long count;                     /* execution_count */
    bool quit;
} K;

/* A received message: frames, where its delimiter is, and the four parsed parts (NULL when not parsed). */
typedef struct {
    zmq_msg_t f[MAX_FRAMES];
    int n, delim;
    json_t *header, *content;
    const char *msg_type;
} msg_t;

/* ---- signing and ids ------------------------------------------------------------------------------------ */

static void
hmac_init(const char *key)
{
    unsigned char k[SHA256_CBLOCK] = {0}, ipad[SHA256_CBLOCK], opad[SHA256_CBLOCK];
    size_t len = strlen(key);

    K.signing = len > 0;
    if (len > SHA256_CBLOCK)
        SHA256((const unsigned char *)key, len, k);
    else
        memcpy(k, key, len);
    for (int i = 0; i < SHA256_CBLOCK; i++) {
        ipad[i] = k[i] ^ 0x36;
        opad[i] = k[i] ^ 0x5c;
    }
    SHA256_Init(&K.inner);
    SHA256_Update(&K.inner, ipad, sizeof ipad);
    SHA256_Init(&K.outer);
    SHA256_Update(&K.outer, opad, sizeof opad);
    OPENSSL_cleanse(k, sizeof k);
}

/* Writes the 64 hex digits of HMAC-SHA256 over the n parts, and a NUL, to hex[65]. */
static void
hmac_hex(const void *const *data, const size_t *size, int n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char h[SHA256_DIGEST_LENGTH];
    SHA256_CTX c = K.inner;

    for (int i = 0; i < n; i++)
        SHA256_Update(&c, data[i], size[i]);
    SHA256_Final(h, &c);
    c = K.outer;
    SHA256_Update(&c, h, sizeof h);
    SHA256_Final(h, &c);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        hex[2 * i] = digits[h[i] >> 4];
        hex[2 * i + 1] = digits[h[i] & 15];
    }
    hex[64] = '\0';
}

static void
new_id(char out[33])
{
    unsigned long long s1 = K.rng[0], s0 = K.rng[1], r[2];

    for (int i = 0; i < 2; i++) {
        K.rng[0] = s0;
        s1 ^= s1 << 23;
        K.rng[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
        r[i] = K.rng[1] + s0;
        s1 = K.rng[0];
        s0 = K.rng[1];
    }
    snprintf(out, 33, "%016llx%016llx", r[0], r[1]);
}

/* ---- sending ------------------------------------------------------------------------------------------- */

/* Sends one signed message: the identities of req (for ROUTER replies; none on iopub), the delimiter, the
 * signature, a new header of type msg_type, req's header frame as parent, "{}" metadata and content.
 * Returns 0, or -1 when libzmq refused a frame (the message is then cut short, which the peer drops). */
static int
send_msg(void *sock, const msg_t *req, const char *msg_type, const char *content, size_t clen)
{
    char id[33], date[40], header[320], sig[65] = "";
    struct timespec ts;
    struct tm tm;

    new_id(id);
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t dl = strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(date + dl, sizeof date - dl, ".%06ldZ", ts.tv_nsec / 1000);
    int hl = snprintf(header, sizeof header,
                      "{\"msg_id\":\"%s\",\"session\":\"%s\",\"username\":\"floor\",\"date\":\"%s\","
                      "\"msg_type\":\"%s\",\"version\":\"5.3\"}", id, K.session, date, msg_type);
    const zmq_msg_t *ph = &req->f[req->delim + 2];
    const void *data[4] = {header, zmq_msg_data((zmq_msg_t *)ph), "{}", content};
    size_t size[4] = {(size_t)hl, zmq_msg_size((zmq_msg_t *)ph), 2, clen};
    if (K.signing)
        hmac_hex(data, size, 4, sig);

    if (sock != K.sock[IOPUB]) {
        for (int i = 0; i < req->delim; i++) {
            if (zmq_send(sock, zmq_msg_data((zmq_msg_t *)&req->f[i]), zmq_msg_size((zmq_msg_t *)&req->f[i]),
                         ZMQ_SNDMORE) < 0)
                return -1;
        }
    }
    if (zmq_send(sock, DELIM, sizeof DELIM - 1, ZMQ_SNDMORE) < 0 ||
        zmq_send(sock, sig, strlen(sig), ZMQ_SNDMORE) < 0)
        return -1;
    for (int i = 0; i < 4; i++) {
        if (zmq_send(sock, data[i], size[i], i < 3 ? ZMQ_SNDMORE : 0) < 0)
            return -1;
    }
    return 0;
}

static void
send_str(void *sock, const msg_t *req, const char *msg_type, const char *content)
{
    if (send_msg(sock, req, msg_type, content, strlen(content)) < 0)
        fprintf(stderr, "floor-py: sending %s: %s\n", msg_type, zmq_strerror(errno));
}

/* Sends content made by jansson; steals the reference to content. */
static void
send_json(void *sock, const msg_t *req, const char *msg_type, json_t *content)
{
    char *text = content != NULL ? json_dumps(content, JSON_COMPACT) : NULL;

    send_str(sock, req, msg_type, text != NULL ? text : "{}");
    free(text);
    json_decref(content);
}

static void
status(const msg_t *req, const char *state)
{
    char content[48];

    snprintf(content, sizeof content, "{\"execution_state\":\"%s\"}", state);
    send_str(K.sock[IOPUB], req, "status", content);
}

/* ---- the requests ------------------------------------------------------------------------------------------ */

static void
kernel_info(void *sock, const msg_t *req)
{
    char content[512];

    snprintf(content, sizeof content,
             "{\"status\":\"ok\",\"protocol_version\":\"5.3\",\"implementation\":\"floor-py\","
             "\"implementation_version\":\"0\",\"language_info\":{\"name\":\"python\",\"version\":\"%d.%d.%d\","
             "\"mimetype\":\"text/x-python\",\"file_extension\":\".py\"},\"banner\":\"floor-py\","
             "\"help_links\":[]}", PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_MICRO_VERSION);
    send_str(sock, req, "kernel_info_reply", content);
}

/* Runs the cell; on an exception fills ename and evalue (caller frees) and returns -1. */
static int
run_cell(const char *code, char **ename, char **evalue)
{
    PyObject *co = Py_CompileStringExFlags(code, "<cell>", Py_file_input, NULL, -1);
    PyObject *r = co != NULL ? PyEval_EvalCode(co, K.globals, K.globals) : NULL;

    Py_XDECREF(co);
    if (r != NULL) {
        Py_DECREF(r);
        return 0;
    }
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    PyObject *s = exc != NULL ? PyObject_Str(exc) : NULL;
    const char *value = s != NULL ? PyUnicode_AsUTF8(s) : NULL;
    *ename = strdup(type != NULL ? ((PyTypeObject *)type)->tp_name : "Error");
    *evalue = strdup(value != NULL ? value : "");
    Py_XDECREF(s);
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
    PyErr_Clear();
    return -1;
}

static void
execute(const msg_t *req)
{
    json_t *code_j = json_object_get(req->content, "code");
    const char *code = json_is_string(code_j) ? json_string_value(code_j) : "";
    char *ename = NULL, *evalue = NULL, content[160];

    K.count++;
    send_json(K.sock[IOPUB], req, "execute_input",
              json_pack("{s:s,s:I}", "code", code, "execution_count", (json_int_t)K.count));
    if (run_cell(code, &ename, &evalue) == 0) {
        snprintf(content, sizeof content, "{\"status\":\"ok\",\"execution_count\":%ld,\"user_expressions\":{},"
                                          "\"payload\":[]}", K.count);
        send_str(K.sock[SHELL], req, "execute_reply", content);
        return;
    }
    send_json(K.sock[IOPUB], req, "error",
              json_pack("{s:s,s:s,s:[]}", "ename", ename, "evalue", evalue, "traceback"));
    send_json(K.sock[SHELL], req, "execute_reply",
              json_pack("{s:s,s:I,s:s,s:s,s:[]}", "status", "error", "execution_count", (json_int_t)K.count,
                        "ename", ename, "evalue", evalue, "traceback"));
    free(ename);
    free(evalue);
}

/* Checks and parses a message received in m (delim, header, content); returns -1 to drop it. */
static int
parse(msg_t *m)
{
    m->delim = -1;
    for (int i = 0; i < m->n; i++) {
        if (zmq_msg_size(&m->f[i]) == sizeof DELIM - 1 && memcmp(zmq_msg_data(&m->f[i]), DELIM, 9) == 0) {
            m->delim = i;
            break;
        }
    }
    if (m->delim < 0 || m->n < m->delim + 6)
        return -1;
    const void *data[4];
    size_t size[4];
    for (int i = 0; i < 4; i++) {
        data[i] = zmq_msg_data(&m->f[m->delim + 2 + i]);
        size[i] = zmq_msg_size(&m->f[m->delim + 2 + i]);
    }
    if (K.signing) {
        char sig[65];
        hmac_hex(data, size, 4, sig);
        zmq_msg_t *s = &m->f[m->delim + 1];
        if (zmq_msg_size(s) != 64 || CRYPTO_memcmp(zmq_msg_data(s), sig, 64) != 0)
            return -1;
    }
    json_t *parts[4];
    for (int i = 0; i < 4; i++)
        parts[i] = json_loadb(data[i], size[i], 0, NULL);
    m->header = parts[0];
    m->content = parts[3];
    json_decref(parts[1]);
    json_decref(parts[2]);
    m->msg_type = json_string_value(json_object_get(m->header, "msg_type"));
    return json_is_object(m->content) && m->msg_type != NULL ? 0 : -1;
}

/* Reads and answers every message waiting on a ROUTER (shell or control) socket. */
static void
serve(void *sock)
{
    for (;;) {
        msg_t m = {.n = 0};
        zmq_msg_t extra;
        bool first = true, more = true;
        while (more) {
            zmq_msg_t *f = m.n < MAX_FRAMES ? &m.f[m.n] : &extra;
            zmq_msg_init(f);
            if (zmq_msg_recv(f, sock, first ? ZMQ_DONTWAIT : 0) < 0) {
                zmq_msg_close(f);
                return;     /* EAGAIN: nothing more is waiting (a later frame of a message never fails) */
            }
            first = false;
            more = zmq_msg_more(f);
            if (f == &extra)
                zmq_msg_close(f);
            else
                m.n++;
        }
        if (parse(&m) == 0) {
            status(&m, "busy");
            if (strcmp(m.msg_type, "execute_request") == 0) {
                execute(&m);
            } else if (strcmp(m.msg_type, "kernel_info_request") == 0) {
                kernel_info(sock, &m);
            } else if (strcmp(m.msg_type, "shutdown_request") == 0) {
                json_t *restart = json_object_get(m.content, "restart");
                send_str(sock, &m, "shutdown_reply", json_is_true(restart) ? "{\"status\":\"ok\",\"restart\":true}"
                                                                            : "{\"status\":\"ok\",\"restart\":false}");
                K.quit = true;
            }
            status(&m, "idle");
        }
        json_decref(m.header);
        json_decref(m.content);
        for (int i = 0; i < m.n; i++)
            zmq_msg_close(&m.f[i]);
        if (K.quit)
            return;
    }
}

static void
echo_heartbeat(void)
{
    char buf[256];
    int n;

    while ((n = zmq_recv(K.sock[HB], buf, sizeof buf, ZMQ_DONTWAIT)) >= 0)
        zmq_send(K.sock[HB], buf, n < (int)sizeof buf ? (size_t)n : sizeof buf, 0);
}

/* ---- start-up ------------------------------------------------------------------------------------------ */

static int
bind_all(const char *path)
{
    static const char *const port_names[NSOCK] = {"shell_port", "control_port", "stdin_port", "hb_port",
                                                  "iopub_port"};
    static const int types[NSOCK] = {ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_REP, ZMQ_PUB};
    json_error_t jerr;
    json_t *cf = json_load_file(path, 0, &jerr);
    int rc = -1;

    if (cf == NULL) {
        fprintf(stderr, "floor-py: %s: %s\n", path, jerr.text);
        return -1;
    }
    const char *scheme = json_string_value(json_object_get(cf, "signature_scheme"));
    const char *key = json_string_value(json_object_get(cf, "key"));
    const char *transport = json_string_value(json_object_get(cf, "transport"));
    const char *ip = json_string_value(json_object_get(cf, "ip"));
    if (scheme != NULL && key != NULL && key[0] != '\0' && strcmp(scheme, "hmac-sha256") != 0) {
        fprintf(stderr, "floor-py: only hmac-sha256 is supported, not %s\n", scheme);
        goto out;
    }
    hmac_init(key != NULL ? key : "");
    K.ctx = zmq_ctx_new();
    for (int i = 0; i < NSOCK; i++) {
        char ep[300];
        json_int_t port = json_integer_value(json_object_get(cf, port_names[i]));
        int zero = 0;
        snprintf(ep, sizeof ep, "%s://%s:%lld", transport != NULL ? transport : "tcp", ip != NULL ? ip : "127.0.0.1",
                 (long long)port);
        K.sock[i] = zmq_socket(K.ctx, types[i]);
        zmq_setsockopt(K.sock[i], ZMQ_LINGER, &zero, sizeof zero);
        if (i == IOPUB)
            zmq_setsockopt(K.sock[i], ZMQ_SNDHWM, &zero, sizeof zero);   /* a pipelined client reads late */
        if (zmq_bind(K.sock[i], ep) < 0) {
            fprintf(stderr, "floor-py: bind %s: %s\n", ep, zmq_strerror(errno));
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(cf);
    return rc;
}

static int
start_python(void)
{
    PyConfig config;
    PyStatus st;

    PyConfig_InitPythonConfig(&config);
    config.parse_argv = 0;
    st = PyConfig_SetBytesString(&config, &config.program_name, PYC_PYTHON_EXE);
    if (!PyStatus_Exception(st))
        st = PyConfig_SetBytesString(&config, &config.executable, PYC_PYTHON_EXE);
    if (!PyStatus_Exception(st))
        st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
        fprintf(stderr, "floor-py: could not start Python: %s\n", st.err_msg != NULL ? st.err_msg : "?");
        return -1;
    }
    PyObject *main_mod = PyImport_AddModule("__main__");    /* borrowed */
    K.globals = main_mod != NULL ? PyModule_GetDict(main_mod) : NULL;
    return K.globals != NULL ? 0 : -1;
}

int
main(int argc, char **argv)
{
    const char *connfile = NULL;
    int rc = 1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-f") == 0 && i + 1 < argc)
            connfile = argv[++i];
    }
    if (connfile == NULL) {
        fprintf(stderr, "usage: floor-py -f CONNECTION_FILE\n");
        return 2;
    }
    if (getrandom(K.rng, sizeof K.rng, 0) != sizeof K.rng)
        K.rng[0] = (unsigned long long)time(NULL) | 1;
    new_id(K.session);
    if (start_python() < 0 || bind_all(connfile) < 0)
        goto out;

    zmq_pollitem_t items[] = {
        {K.sock[HB], 0, ZMQ_POLLIN, 0},
        {K.sock[CONTROL], 0, ZMQ_POLLIN, 0},
        {K.sock[SHELL], 0, ZMQ_POLLIN, 0},
    };
    while (!K.quit) {
        if (zmq_poll(items, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "floor-py: zmq_poll: %s\n", zmq_strerror(errno));
            goto out;
        }
        if (items[0].revents & ZMQ_POLLIN)
            echo_heartbeat();
        if (items[1].revents & ZMQ_POLLIN)
            serve(K.sock[CONTROL]);
        if (!K.quit && (items[2].revents & ZMQ_POLLIN))
            serve(K.sock[SHELL]);
        if (PyErr_CheckSignals() < 0)   /* a SIGINT between cells: nothing to interrupt */
            PyErr_Clear();
    }
    rc = 0;
out:
    for (int i = 0; i < NSOCK; i++) {
        if (K.sock[i] != NULL)
            zmq_close(K.sock[i]);
    }
    if (K.ctx != NULL)
        zmq_ctx_term(K.ctx);
    if (Py_IsInitialized())
        Py_FinalizeEx();
    return rc;
}
