/*
 * attach.c -- `pyc attach NAME`: a line REPL into a live session.
 *
 * Each line is added to the block being typed; the kernel's is_complete_request says whether the block is a
 * whole cell ("complete" or "invalid": run it, the kernel reports the syntax error), or needs more lines
 * ("incomplete": a continuation prompt, pre-filled with the indent the kernel suggests).  An empty line ends
 * a block, as at Python's prompt, except inside an open bracket or triple-quoted string (block_open), where
 * it is part of the block.  Tab asks the kernel (complete_request) about the whole block up to the cursor.
 * Ctrl-C at the prompt, or while waiting for is_complete's answer, drops the block; while a cell runs it
 * sends interrupt_request.  When is_complete gets no answer within cli_connect_ms() (10 s, unless
 * PYC_CLI_CONNECT_MS says otherwise; the kernel is running another client's cell), the block is not run: the
 * prompt goes on without asking again, and an empty line sends the block, which then waits for the kernel
 * like any cell.  Ctrl-D (end of input) detaches: the session keeps running.  input() in a cell reads a line
 * from here.
 *
 * Lines are read by lineedit.c: with readline when pyc was built with it (and it loads), with line editing
 * and a history file, <Jupyter data dir>/pyc/attach_history; else with getline(3), without completion.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "paths.h"

#define PS1 ">>> "
#define PS2 "... "
#define COMPLETE_WAIT_MS 5000

/* The connection and the block typed so far, for the completion callback (readline passes no context). */
static pyc_client_t *the_client;
static pyc_buf_t the_block;

/* Waits for the reply to request `id` on shell, up to ms; NULL when none came (or a signal came: the caller
 * looks at cli_sigint_count). */
static pyc_msg_t *
shell_reply(const char *id, int ms)
{
    pyc_error_t err;
    double deadline = pyc_now_s() + ms / 1000.0;
    for (;;) {
        double left = deadline - pyc_now_s();
        pyc_msg_t *m;
        int chan;
        if (left <= 0)
            return NULL;
        int r = pyc_client_recv(the_client, (int)(left * 1000) + 1, &m, &chan, &err);
        if (r == PYC_RECV_SIGNAL)
            return NULL;
        if (r == PYC_RECV_ERROR) {
            cli_err("%s", err.text);
            return NULL;
        }
        if (r != PYC_RECV_MSG)
            continue;
        if (chan == PYC_CHAN_SHELL && pyc_client_is_child_of(m, id))
            return m;
        pyc_msg_destroy(&m);
    }
}

/* Drops the iopub output of other clients that piled up while we waited at the prompt. */
static void
drain(void)
{
    pyc_error_t err;
    pyc_msg_t *m;
    int chan;
    while (pyc_client_recv(the_client, 0, &m, &chan, &err) == PYC_RECV_MSG)
        pyc_msg_destroy(&m);
}

/* ---- completion ------------------------------------------------------------------------------------------ */

static size_t
codepoints_n(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            k++;
    }
    return k;
}

/* Byte offset of code point cp in s (or its length). */
static size_t
offset_of(const char *s, size_t cp)
{
    size_t i = 0, k = 0;
    for (; s[i] != '\0'; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (k == cp)
                return i;
            k++;
        }
    }
    return i;
}

/* The completer of the line being typed (cli_complete_fn): readline replaces the word from `start` to the
 * cursor `point`; the kernel replaces code points [cursor_start, cursor_end) of the whole block.  Each match
 * is turned into a replacement of readline's word: text the kernel keeps before the word is added, text of
 * the word the kernel replaces is checked and cut. */
static char **
complete(const char *line, int start, int point)
{
    pyc_buf_t code;
    pyc_buf_init(&code, 64u << 20);
    char **out = NULL;
    pyc_msg_t *reply = NULL;
    json_t *req = NULL;
    size_t base = codepoints_n(the_block.data != NULL ? the_block.data : "", the_block.len);
    if ((the_block.len > 0 && pyc_buf_add(&code, the_block.data, the_block.len) < 0) ||
        pyc_buf_add(&code, line, (size_t)point) < 0)
        goto out;
    size_t cursor = codepoints_n(code.data, code.len);
    if (pyc_buf_adds(&code, line + point) < 0)
        goto out;
    req = json_pack("{s:s, s:I}", "code", code.data, "cursor_pos", (json_int_t)cursor);
    char id[PYC_MSG_ID_LEN + 1];
    pyc_error_t err;
    if (req == NULL ||
        pyc_client_send(the_client, PYC_CHAN_SHELL, "complete_request", req, NULL, NULL, NULL, 0, id, &err) < 0)
        goto out;
    if ((reply = shell_reply(id, COMPLETE_WAIT_MS)) == NULL)
        goto out;
    json_t *matches = json_object_get(reply->content, "matches");
    json_t *cs = json_object_get(reply->content, "cursor_start");
    if (!json_is_array(matches) || json_array_size(matches) == 0 || !json_is_integer(cs) ||
        json_integer_value(cs) < (json_int_t)base)
        goto out;
    size_t line_cs = (size_t)json_integer_value(cs) - base;        /* code points into the line */
    size_t start_cp = codepoints_n(line, (size_t)start);
    size_t cs_byte = offset_of(line, line_cs);
    size_t n = json_array_size(matches), k = 0;
    out = calloc(n + 2, sizeof *out);
    if (out == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const char *m = json_string_value(json_array_get(matches, i));
        char *c = NULL;
        if (m == NULL)
            continue;
        if (line_cs <= start_cp) {
            /* The kernel also replaces line[cs..start): the match must begin with it. */
            size_t keep = (size_t)start - cs_byte;
            if (strncmp(m, line + cs_byte, keep) == 0)
                c = strdup(m + keep);
        } else {
            size_t pre = cs_byte - (size_t)start;
            c = malloc(pre + strlen(m) + 1);
            if (c != NULL) {
                memcpy(c, line + start, pre);
                memcpy(c + pre, m, strlen(m) + 1);
            }
        }
        if (c != NULL)
            out[1 + k++] = c;
    }
    if (k == 0) {
        free(out);
        out = NULL;
        goto out;
    }
    /* out[0] is what replaces the word now: the longest common prefix of the candidates. */
    size_t common = strlen(out[1]);
    for (size_t i = 2; i <= k; i++) {
        size_t j = 0;
        while (j < common && out[i][j] == out[1][j])
            j++;
        common = j;
    }
    if (k == 1) {
        out[0] = out[1];
        out[1] = NULL;
    } else {
        out[0] = strndup(out[1], common);
        if (out[0] == NULL) {
            for (size_t i = 1; i <= k; i++)
                free(out[i]);
            free(out);
            out = NULL;
        }
    }
out:
    json_decref(req);
    pyc_msg_destroy(&reply);
    pyc_buf_free(&code);
    return out;
}

/* ---- the REPL -------------------------------------------------------------------------------------------- */

enum { BLOCK_RUN, BLOCK_MORE, BLOCK_CANCEL, BLOCK_NO_ANSWER };

/* Asks the kernel whether the block is a whole cell: BLOCK_RUN; BLOCK_MORE when it needs more lines, with
 * the suggested indent (malloc'd) in *indent; BLOCK_CANCEL when Ctrl-C came during the wait; BLOCK_NO_ANSWER
 * when no answer came within cli_connect_ms() (or the request could not be sent: printed). */
static int
ask_complete(const char *block, char **indent)
{
    char id[PYC_MSG_ID_LEN + 1];
    pyc_error_t err;
    int verdict = BLOCK_RUN;
    *indent = NULL;
    /* The block as typed, without the newline after its last line, as terminal frontends send it (pyc's
     * is_complete suggests no indent after a trailing newline). */
    size_t len = strlen(block);
    json_t *req = json_pack("{s:s%}", "code", block, len - (len > 0 && block[len - 1] == '\n'));
    if (req == NULL ||
        pyc_client_send(the_client, PYC_CHAN_SHELL, "is_complete_request", req, NULL, NULL, NULL, 0, id, &err) < 0) {
        cli_err("cannot ask whether the block is complete: %s", req == NULL ? "out of memory" : err.text);
        json_decref(req);
        return BLOCK_NO_ANSWER;
    }
    json_decref(req);
    pyc_msg_t *reply = shell_reply(id, cli_connect_ms());
    if (reply == NULL)
        return cli_sigint_count > 0 ? BLOCK_CANCEL : BLOCK_NO_ANSWER;
    const char *status = json_string_value(json_object_get(reply->content, "status"));
    if (status != NULL && strcmp(status, "incomplete") == 0) {
        verdict = BLOCK_MORE;
        const char *ind = json_string_value(json_object_get(reply->content, "indent"));
        *indent = strdup(ind != NULL ? ind : "");
    }
    pyc_msg_destroy(&reply);
    return verdict;
}

/* True when the block ends inside a bracket or a triple-quoted string that is still open: an empty line there
 * belongs to the block.  A lexer of Python's brackets, strings (with backslash escapes; a one-quote string
 * ends at the end of its line) and comments; anything else is left to the kernel. */
static bool
block_open(const char *s)
{
    int depth = 0;
    char quote = 0;              /* the quote character of the string the scan is in, 0 outside */
    bool triple = false;
    for (const char *p = s; *p != '\0'; p++) {
        if (quote != 0) {
            if (*p == '\\' && p[1] != '\0') {
                p++;
            } else if (*p == '\n' && !triple) {
                quote = 0;       /* never closed: a syntax error for the kernel, not an open block */
            } else if (*p == quote && (!triple || (p[1] == quote && p[2] == quote))) {
                p += triple ? 2 : 0;
                quote = 0;
            }
            continue;
        }
        switch (*p) {
        case '#': {
            const char *nl = strchr(p, '\n');
            if (nl == NULL)
                return depth > 0;
            p = nl;
            break;
        }
        case '\'':
        case '"':
            quote = *p;
            triple = p[1] == quote && p[2] == quote;
            p += triple ? 2 : 0;
            break;
        case '(':
        case '[':
        case '{':
            depth++;
            break;
        case ')':
        case ']':
        case '}':
            if (depth > 0)
                depth--;
            break;
        default:
            break;
        }
    }
    return depth > 0 || (quote != 0 && triple);
}

static bool
blank(const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s != ' ' && *s != '\t')
            return false;
    }
    return true;
}

int
cli_attach(const cli_args_t *a)
{
    int rc;
    const char *name = a->pos[0];
    cli_catch_sigint();
    pyc_session_file_t sf;
    the_client = cli_connect(name, &sf, true, true, &rc);
    if (the_client == NULL)
        return rc;
    pyc_buf_init(&the_block, 64u << 20);

    /* The history file (and its directory) only when lines are edited: without readline nothing is kept. */
    char hist[4096];
    bool have_hist = false;
    if (cli_line_editing()) {
        char data[4000];
        if (pyc_jupyter_data_dir(data, sizeof data) == 0) {
            snprintf(hist, sizeof hist, "%s/pyc", data);
            if (pyc_mkdirs(hist, 0700) == 0) {
                snprintf(hist, sizeof hist, "%s/pyc/attach_history", data);
                have_hist = true;
            }
        }
    }
    cli_line_begin(complete, have_hist ? hist : NULL);
    fprintf(stderr, "pyc: attached to session %s (kernel pid %ld). Ctrl-D detaches, the session keeps running; "
                    "Ctrl-C interrupts.\n", name, sf.pid);

    char *indent = NULL;
    bool ask = true;             /* false once is_complete went unanswered for this block */
    cli_output_t o = {.json = false, .wrote_nl = true};
    rc = PYC_EXIT_OK;
    for (;;) {
        char *line = NULL;
        drain();
        int r = cli_line_read(the_block.len == 0 ? PS1 : PS2, indent, &line);
        free(indent);
        indent = NULL;
        if (r == CLI_LINE_EOF) {
            fputc('\n', stdout);
            break;
        }
        if (r == CLI_LINE_CANCEL) {
            pyc_buf_reset(&the_block);
            ask = true;
            continue;
        }
        /* An empty line ends a block (at the first prompt it does nothing), unless the block waits for a
         * closing bracket or quote: then the line is part of it. */
        bool empty = blank(line);
        bool keep = !empty || (the_block.len > 0 && block_open(the_block.data));
        bool run = empty && !keep && the_block.len > 0;
        if (!empty)
            cli_line_remember(line);
        if (keep && (pyc_buf_adds(&the_block, line) < 0 || pyc_buf_add(&the_block, "\n", 1) < 0)) {
            cli_err("the block is too long; dropped");
            pyc_buf_reset(&the_block);
            ask = true;
            free(line);
            continue;
        }
        free(line);
        if (keep && !empty && ask) {
            switch (ask_complete(the_block.data, &indent)) {
            case BLOCK_RUN:
                run = true;
                break;
            case BLOCK_MORE:
                break;
            case BLOCK_CANCEL:
                /* Ctrl-C while the kernel was asked: the block is dropped, never run half-typed. */
                fputs("^C\n", stdout);
                fflush(stdout);
                pyc_buf_reset(&the_block);
                continue;
            case BLOCK_NO_ANSWER:
                cli_err("the kernel did not say within %g s whether the block is complete (is another client's "
                        "cell running?); go on typing: an empty line sends the block, Ctrl-C drops it",
                        cli_connect_ms() / 1000.0);
                ask = false;
                break;
            }
        }
        if (!run)
            continue;
        ask = true;
        o.wrote_nl = true;
        pyc_msg_t *reply = NULL;
        json_t *md = cli_cell_metadata(0, false);
        int er = cli_execute(the_client, the_block.data, md, true, &o, &reply);
        json_decref(md);
        if (!o.wrote_nl)
            fputc('\n', stdout);
        fflush(stdout);
        pyc_buf_reset(&the_block);
        free(indent);
        indent = NULL;
        /* The REPL ends when the kernel is gone or ending (no reply came, or the reply says so), or when
         * nobody reads our output any more; not on a code the cell chose (SystemExit(6) is a cell's error). */
        bool over = er == PYC_EXIT_PIPE ||
                    (reply != NULL ? cli_reply_lost(reply) : er == PYC_EXIT_CONNECTION || er == PYC_EXIT_LOST);
        pyc_msg_destroy(&reply);
        if (over) {
            rc = er;
            break;
        }
    }
    free(indent);
    cli_line_end();
    pyc_buf_free(&the_block);
    pyc_client_destroy(&the_client);
    pyc_session_file_clear(&sf);
    return rc;
}

