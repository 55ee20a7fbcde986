/*
 * test_connfile.c -- cmocka tests for connfile.c: parsing, loading, writing and endpoints.
 *
 * Valid files are built in the tests; bad ones are data, in the manner of jansson's test suites: each
 * tests/data/connfile/NAME.json is a file the kernel must refuse, and the first line of NAME.err is a
 * substring of the sentence it must refuse it with.  The data directory is found through $PYC_SRCDIR (which
 * `make check` exports as the absolute top source directory), else next to this program (an in-tree build);
 * when neither exists the data test is skipped with a message, so a bare run still tests the rest.
 *
 * Files are written into a fresh mkdtemp directory per test, removed by the teardown even when the test fails.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "connfile.h"
#include "unit_util.h"

#define DATA_SUBDIR "tests/data/connfile"

static const char full_file[] =
    "{\n"
    "  \"shell_port\": 53794,\n"
    "  \"iopub_port\": 41667,\n"
    "  \"stdin_port\": 37531,\n"
    "  \"control_port\": 55227,\n"
    "  \"hb_port\": 42669,\n"
    "  \"ip\": \"127.0.0.1\",\n"
    "  \"key\": \"a0436f6c-1916-498b-8eb9-e81ab9368e84\",\n"
    "  \"transport\": \"tcp\",\n"
    "  \"signature_scheme\": \"hmac-sha256\",\n"
    "  \"kernel_name\": \"pyc\",\n"
    "  \"jupyter_session\": \"/home/u/notebook.ipynb\",\n"
    "  \"extra\": {\"added\": [\"by\", \"jupyter_client\"]}\n"
    "}\n";

/* Where the program lives, from /proc/self/exe, for the data directory fallback. */
static char exe_dir[PATH_MAX];

static void
parse_ok(const char *text, pyc_connfile_t *cf)
{
    pyc_error_t err = {0, ""};
    if (pyc_connfile_parse(text, strlen(text), cf, &err) != 0)
        fail_msg("refused a valid file: %s\n%s", err.text, text);
    assert_non_null(cf->key);
}

static void
parse_refused(const char *text, const char *want)
{
    pyc_connfile_t cf;
    pyc_error_t err = {0, ""};
    assert_int_equal(pyc_connfile_parse(text, strlen(text), &cf, &err), -1);
    assert_null(cf.key);
    if (strstr(err.text, want) == NULL)
        fail_msg("refusal [%s] does not mention [%s]", err.text, want);
}

/* Writes len bytes to path, failing the test on error. */
static void
write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}


/* Number of entries in dir other than . and .. */
static int
count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static void
test_port_names(void **state)
{
    (void)state;
    assert_string_equal(pyc_connfile_port_names[PYC_CHAN_SHELL], "shell_port");
    assert_string_equal(pyc_connfile_port_names[PYC_CHAN_IOPUB], "iopub_port");
    assert_string_equal(pyc_connfile_port_names[PYC_CHAN_STDIN], "stdin_port");
    assert_string_equal(pyc_connfile_port_names[PYC_CHAN_CONTROL], "control_port");
    assert_string_equal(pyc_connfile_port_names[PYC_CHAN_HB], "hb_port");
}

static void
test_full_file(void **state)
{
    (void)state;
    pyc_connfile_t cf;
    parse_ok(full_file, &cf);
    assert_string_equal(cf.transport, "tcp");
    assert_string_equal(cf.ip, "127.0.0.1");
    assert_int_equal(cf.ports[PYC_CHAN_SHELL], 53794);
    assert_int_equal(cf.ports[PYC_CHAN_IOPUB], 41667);
    assert_int_equal(cf.ports[PYC_CHAN_STDIN], 37531);
    assert_int_equal(cf.ports[PYC_CHAN_CONTROL], 55227);
    assert_int_equal(cf.ports[PYC_CHAN_HB], 42669);
    assert_string_equal(cf.signature_scheme, "hmac-sha256");
    assert_string_equal(cf.key, "a0436f6c-1916-498b-8eb9-e81ab9368e84");
    assert_int_equal(cf.keylen, 36);
    assert_string_equal(cf.kernel_name, "pyc");
    pyc_connfile_clear(&cf);
    assert_null(cf.key);
    assert_int_equal(cf.keylen, 0);
    pyc_connfile_clear(&cf);     /* twice is fine */
}

static void
test_ipc(void **state)
{
    (void)state;
    static const char text[] =
        "{\"transport\":\"ipc\",\"ip\":\"/run/user/1000/kernel-abc\",\"shell_port\":1,\"iopub_port\":2,"
        "\"stdin_port\":3,\"control_port\":4,\"hb_port\":5,\"key\":\"k\"}";
    pyc_connfile_t cf;
    char ep[300];
    parse_ok(text, &cf);
    assert_string_equal(cf.transport, "ipc");
    assert_string_equal(cf.ip, "/run/user/1000/kernel-abc");
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_SHELL, ep, sizeof ep), 0);
    assert_string_equal(ep, "ipc:///run/user/1000/kernel-abc-1");
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_HB, ep, sizeof ep), 0);
    assert_string_equal(ep, "ipc:///run/user/1000/kernel-abc-5");
    pyc_connfile_clear(&cf);
}

static void
test_defaults(void **state)
{
    (void)state;
    /* Only the ports are required. */
    static const char text[] =
        "{\"shell_port\":1,\"iopub_port\":2,\"stdin_port\":3,\"control_port\":4,\"hb_port\":5}";
    pyc_connfile_t cf;
    parse_ok(text, &cf);
    assert_string_equal(cf.transport, "tcp");
    assert_string_equal(cf.ip, "127.0.0.1");
    assert_string_equal(cf.signature_scheme, "hmac-sha256");
    assert_string_equal(cf.kernel_name, "");
    assert_string_equal(cf.key, "");
    assert_int_equal(cf.keylen, 0);
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        assert_int_equal(cf.ports[c], c + 1);
    pyc_connfile_clear(&cf);
}

static void
test_empty_key(void **state)
{
    (void)state;
    static const char text[] =
        "{\"shell_port\":1,\"iopub_port\":2,\"stdin_port\":3,\"control_port\":4,\"hb_port\":5,\"key\":\"\","
        "\"signature_scheme\":\"hmac-sha512\"}";
    pyc_connfile_t cf;
    parse_ok(text, &cf);
    assert_string_equal(cf.key, "");
    assert_int_equal(cf.keylen, 0);
    assert_string_equal(cf.signature_scheme, "hmac-sha512");
    pyc_connfile_clear(&cf);
}

static void
test_unicode_key(void **state)
{
    (void)state;
    /* An escaped and a raw non-ASCII character: the key is kept as UTF-8 bytes, and keylen counts bytes. */
    static const char text[] =
        "{\"shell_port\":1,\"iopub_port\":2,\"stdin_port\":3,\"control_port\":4,\"hb_port\":5,"
        "\"key\":\"cl\\u00e9-\xE2\x82\xAC-\\ud83d\\ude00\"}";
    static const char want[] = "cl\xC3\xA9-\xE2\x82\xAC-\xF0\x9F\x98\x80";
    pyc_connfile_t cf;
    parse_ok(text, &cf);
    assert_int_equal(cf.keylen, sizeof want - 1);
    assert_memory_equal(cf.key, want, sizeof want);
    pyc_connfile_clear(&cf);
}

static void
test_port_limits(void **state)
{
    (void)state;
    static const char text[] =
        "{\"shell_port\":0,\"iopub_port\":65535,\"stdin_port\":1,\"control_port\":0,\"hb_port\":65535}";
    pyc_connfile_t cf;
    parse_ok(text, &cf);
    assert_int_equal(cf.ports[PYC_CHAN_SHELL], 0);
    assert_int_equal(cf.ports[PYC_CHAN_IOPUB], 65535);
    pyc_connfile_clear(&cf);

    parse_refused("{\"shell_port\":65536,\"iopub_port\":1,\"stdin_port\":1,\"control_port\":1,\"hb_port\":1}",
                  "\"shell_port\" is not a port number (0-65535)");
    parse_refused("{\"shell_port\":-1,\"iopub_port\":1,\"stdin_port\":1,\"control_port\":1,\"hb_port\":1}",
                  "\"shell_port\" is not a port number");
    parse_refused("{\"shell_port\":\"1\",\"iopub_port\":1,\"stdin_port\":1,\"control_port\":1,\"hb_port\":1}",
                  "\"shell_port\" is not a port number");
    parse_refused("{\"shell_port\":1,\"iopub_port\":1,\"stdin_port\":1,\"control_port\":1}",
                  "lacks \"hb_port\"");
    /* An integer that does not fit an int must not wrap into range. */
    parse_refused("{\"shell_port\":4294972831,\"iopub_port\":1,\"stdin_port\":1,\"control_port\":1,\"hb_port\":1}",
                  "\"shell_port\" is not a port number");
}

static void
test_parse_refusals(void **state)
{
    (void)state;
    parse_refused("{", "connection file is not valid JSON");
    parse_refused("", "connection file is not valid JSON");
    parse_refused("[]", "connection file is not a JSON object");
    parse_refused("{}", "lacks \"shell_port\"");
    parse_refused("{\"transport\":\"udp\"}", "unknown transport \"udp\"");
    parse_refused("{\"ip\":\"\"}", "\"ip\" is empty");
    parse_refused("{\"shell_port\":1,\"iopub_port\":2,\"stdin_port\":3,\"control_port\":4,\"hb_port\":5,\"key\":1}",
                  "\"key\" is not a string");

    /* The error record is optional. */
    pyc_connfile_t cf;
    assert_int_equal(pyc_connfile_parse("{", 1, &cf, NULL), -1);
    assert_null(cf.key);
}

static void
test_parse_honours_length(void **state)
{
    (void)state;
    /* The text need not be NUL-terminated: bytes past len are not read. */
    static const char text[] =
        "{\"shell_port\":1,\"iopub_port\":2,\"stdin_port\":3,\"control_port\":4,\"hb_port\":5}GARBAGE";
    pyc_connfile_t cf;
    pyc_error_t err = {0, ""};
    assert_int_equal(pyc_connfile_parse(text, sizeof text - 1 - 7, &cf, &err), 0);
    pyc_connfile_clear(&cf);
    assert_int_equal(pyc_connfile_parse(text, sizeof text - 1, &cf, &err), -1);
    assert_non_null(strstr(err.text, "not valid JSON"));
    assert_int_equal(pyc_connfile_parse(text, 10, &cf, &err), -1);
}

static void
test_endpoints(void **state)
{
    (void)state;
    pyc_connfile_t cf;
    char ep[64];
    parse_ok(full_file, &cf);

    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_SHELL, ep, sizeof ep), 0);
    assert_string_equal(ep, "tcp://127.0.0.1:53794");
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_HB, ep, sizeof ep), 0);
    assert_string_equal(ep, "tcp://127.0.0.1:42669");

    /* Port 0 lets ZeroMQ choose. */
    cf.ports[PYC_CHAN_IOPUB] = 0;
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_IOPUB, ep, sizeof ep), 0);
    assert_string_equal(ep, "tcp://127.0.0.1:*");

    /* ipc: the ip is a path prefix and the port a suffix. */
    snprintf(cf.transport, sizeof cf.transport, "ipc");
    snprintf(cf.ip, sizeof cf.ip, "kernel-1234");
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_STDIN, ep, sizeof ep), 0);
    assert_string_equal(ep, "ipc://kernel-1234-37531");

    /* The capacity counts the NUL: exactly enough works, one byte less fails. */
    snprintf(cf.transport, sizeof cf.transport, "tcp");
    snprintf(cf.ip, sizeof cf.ip, "10.0.0.1");
    size_t need = strlen("tcp://10.0.0.1:53794") + 1;
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_SHELL, ep, need), 0);
    assert_string_equal(ep, "tcp://10.0.0.1:53794");
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_SHELL, ep, need - 1), -1);
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_IOPUB, ep, strlen("tcp://10.0.0.1:*")), -1);
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_IOPUB, ep, strlen("tcp://10.0.0.1:*") + 1), 0);

    /* The longest ip the struct holds still makes an endpoint in a buffer big enough for it. */
    char big[512];
    memset(cf.ip, 'h', sizeof cf.ip - 1);
    cf.ip[sizeof cf.ip - 1] = '\0';
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_SHELL, big, sizeof big), 0);
    assert_int_equal(strlen(big), 6 + 255 + 6);
    assert_int_equal(pyc_connfile_endpoint(&cf, PYC_CHAN_SHELL, ep, sizeof ep), -1);
    pyc_connfile_clear(&cf);
}

static void
test_write_load_round_trip(void **state)
{
    const char *dir = *state;
    char path[PATH_MAX];
    pyc_connfile_t cf, back;
    pyc_error_t err = {0, ""};
    struct stat st;

    snprintf(path, sizeof path, "%s/kernel-1.json", dir);
    parse_ok(full_file, &cf);
    /* A key that needs escaping, and ports the kernel chose. */
    free(cf.key);
    cf.key = strdup("q\"uo\\te\xC3\xA9");
    assert_non_null(cf.key);
    cf.keylen = strlen(cf.key);
    cf.ports[PYC_CHAN_HB] = 0;
    cf.ports[PYC_CHAN_SHELL] = 65535;

    if (pyc_connfile_write(path, &cf, &err) != 0)
        fail_msg("write: %s", err.text);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(count_entries(dir), 1);   /* the temporary file was renamed, not left behind */

    if (pyc_connfile_load(path, &back, &err) != 0)
        fail_msg("load: %s", err.text);
    assert_string_equal(back.transport, cf.transport);
    assert_string_equal(back.ip, cf.ip);
    assert_memory_equal(back.ports, cf.ports, sizeof cf.ports);
    assert_string_equal(back.signature_scheme, cf.signature_scheme);
    assert_string_equal(back.kernel_name, cf.kernel_name);
    assert_int_equal(back.keylen, cf.keylen);
    assert_memory_equal(back.key, cf.key, cf.keylen + 1);
    pyc_connfile_clear(&back);

    /* Jupyter's own reader sees the same members. */
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    assert_non_null(root);
    assert_int_equal(json_integer_value(json_object_get(root, "hb_port")), 0);
    assert_string_equal(json_string_value(json_object_get(root, "key")), cf.key);
    json_decref(root);

    /* Writing over a file that was world-readable replaces it with a private one. */
    assert_int_equal(chmod(path, 0644), 0);
    cf.ports[PYC_CHAN_HB] = 4242;
    assert_int_equal(pyc_connfile_write(path, &cf, &err), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(pyc_connfile_load(path, &back, &err), 0);
    assert_int_equal(back.ports[PYC_CHAN_HB], 4242);
    pyc_connfile_clear(&back);
    assert_int_equal(count_entries(dir), 1);

    pyc_connfile_clear(&cf);
}

static void
test_write_failures(void **state)
{
    const char *dir = *state;
    char path[PATH_MAX];
    pyc_connfile_t cf;
    pyc_error_t err = {0, ""};

    parse_ok(full_file, &cf);

    /* A directory that does not exist. */
    snprintf(path, sizeof path, "%s/no/such/dir/kernel.json", dir);
    assert_int_equal(pyc_connfile_write(path, &cf, &err), -1);
    assert_non_null(strstr(err.text, "cannot create"));

    /* The target is a directory: the rename fails and the temporary file is removed. */
    snprintf(path, sizeof path, "%s/target", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(pyc_connfile_write(path, &cf, &err), -1);
    assert_non_null(strstr(err.text, "cannot rename"));
    assert_int_equal(count_entries(dir), 1);

    /* A path too long for the temporary name. */
    char long_path[5000];
    memset(long_path, 'p', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    assert_int_equal(pyc_connfile_write(long_path, &cf, &err), -1);
    assert_non_null(strstr(err.text, "too long"));

    /* A key that is not UTF-8 cannot be written as JSON; no file may appear, and above all not one
     * without its key, which would read back as an unsigned session. */
    free(cf.key);
    cf.key = strdup("bad\xFFkey");
    assert_non_null(cf.key);
    cf.keylen = strlen(cf.key);
    snprintf(path, sizeof path, "%s/kernel-badkey.json", dir);
    assert_int_equal(pyc_connfile_write(path, &cf, &err), -1);
    assert_non_null(strstr(err.text, "cannot encode"));
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(count_entries(dir), 1);

    pyc_connfile_clear(&cf);
}

/* A file or symbolic link planted under the temporary name a predictable writer would use
 * ("<path>.tmp<pid>") never receives the key: the temporary file has a random name and is created
 * exclusively, without following links. */
static void
test_write_ignores_planted_names(void **state)
{
    const char *dir = *state;
    char path[PATH_MAX], planted[PATH_MAX + 32], victim[PATH_MAX];
    pyc_connfile_t cf;
    pyc_error_t err = {0, ""};
    struct stat st;

    parse_ok(full_file, &cf);
    snprintf(path, sizeof path, "%s/kernel-2.json", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *f = fopen(victim, "w");
    assert_non_null(f);
    fputs("precious\n", f);
    fclose(f);
    snprintf(planted, sizeof planted, "%s.tmp%ld", path, (long)getpid());
    assert_int_equal(symlink(victim, planted), 0);

    for (int i = 0; i < 20; i++) {
        if (pyc_connfile_write(path, &cf, &err) != 0)
            fail_msg("write: %s", err.text);
    }
    assert_int_equal(stat(victim, &st), 0);
    assert_int_equal(st.st_size, 9);             /* untouched */
    assert_int_equal(lstat(planted, &st), 0);
    assert_true(S_ISLNK(st.st_mode));             /* not ours: left as it was */
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(count_entries(dir), 3);      /* path, victim, the link: no temporary file left */
    pyc_connfile_clear(&cf);
}

static void
test_load_failures(void **state)
{
    const char *dir = *state;
    char path[PATH_MAX];
    pyc_connfile_t cf;
    pyc_error_t err = {0, ""};

    snprintf(path, sizeof path, "%s/missing.json", dir);
    assert_int_equal(pyc_connfile_load(path, &cf, &err), -1);
    assert_non_null(strstr(err.text, "cannot open connection file"));
    assert_non_null(strstr(err.text, "missing.json"));
    assert_null(cf.key);

    /* A directory opens but does not read. */
    assert_int_equal(pyc_connfile_load(dir, &cf, &err), -1);
    assert_non_null(strstr(err.text, "cannot read connection file"));
    assert_null(cf.key);

    /* A valid file padded with spaces to exactly 1 MiB loads; one byte more is too large. */
    size_t mib = (size_t)1 << 20;
    char *big = malloc(mib + 1);
    assert_non_null(big);
    memset(big, ' ', mib + 1);
    memcpy(big, full_file, strlen(full_file));
    snprintf(path, sizeof path, "%s/big.json", dir);
    write_file(path, big, mib);
    if (pyc_connfile_load(path, &cf, &err) != 0)
        fail_msg("a 1 MiB file was refused: %s", err.text);
    pyc_connfile_clear(&cf);
    write_file(path, big, mib + 1);
    assert_int_equal(pyc_connfile_load(path, &cf, &err), -1);
    assert_non_null(strstr(err.text, "larger than 1 MiB"));
    assert_null(cf.key);
    free(big);

    /* Parse errors come through load unchanged. */
    write_file(path, "[]", 2);
    assert_int_equal(pyc_connfile_load(path, &cf, &err), -1);
    assert_non_null(strstr(err.text, "not a JSON object"));
}

/* Finds the directory of bad connection files; returns 0 with dir filled, or -1. */
static int
find_data_dir(char *dir, size_t cap)
{
    const char *src = getenv("PYC_SRCDIR");
    struct stat st;
    if (src != NULL && src[0] != '\0') {
        if ((size_t)snprintf(dir, cap, "%s/" DATA_SUBDIR, src) < cap && stat(dir, &st) == 0 &&
            S_ISDIR(st.st_mode))
            return 0;
        fail_msg("PYC_SRCDIR is set but %s is not a directory", dir);
    }
    if (exe_dir[0] != '\0') {
        if ((size_t)snprintf(dir, cap, "%s/../../data/connfile", exe_dir) < cap && stat(dir, &st) == 0 &&
            S_ISDIR(st.st_mode))
            return 0;
    }
    return -1;
}

/* Reads the first line of path into line (without its newline). */
static void
read_first_line(const char *path, char *line, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("%s: %s (every .json needs a .err with the expected error)", path, strerror(errno));
    if (fgets(line, (int)cap, f) == NULL)
        fail_msg("%s is empty", path);
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == '\0')
        fail_msg("%s: the first line is empty", path);
}

/* A registration file (protocol 5.6): told apart by registration_port (a number or a string of digits); ports
 * 0, ip from registration_ip unless given; a port range from the file or from "LOW-HIGH". */
static void
test_registration_file(void **state)
{
    (void)state;
    pyc_connfile_t cf;
    parse_ok("{\"kernel_id\": \"k-1\", \"transport\": \"tcp\", \"registration_ip\": \"127.0.0.2\", "
             "\"registration_port\": 51587, \"signature_scheme\": \"hmac-sha256\", \"key\": \"abc\"}", &cf);
    assert_true(cf.registration);
    assert_string_equal(cf.kernel_id, "k-1");
    assert_string_equal(cf.registration_ip, "127.0.0.2");
    assert_string_equal(cf.ip, "127.0.0.2");
    assert_int_equal(cf.registration_port, 51587);
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        assert_int_equal(cf.ports[c], 0);
    assert_int_equal(cf.port_min, 0);
    pyc_connfile_clear(&cf);
    parse_ok("{\"kernel_id\": \"k\", \"ip\": \"0.0.0.0\", \"registration_port\": \"8\", \"key\": \"\", "
             "\"port_range\": [40000, 40010]}", &cf);
    assert_int_equal(cf.registration_port, 8);
    assert_string_equal(cf.registration_ip, "127.0.0.1");
    assert_string_equal(cf.ip, "0.0.0.0");
    assert_int_equal(cf.port_min, 40000);
    assert_int_equal(cf.port_max, 40010);
    pyc_error_t err;
    assert_int_equal(pyc_connfile_set_port_range(&cf, "9000-9009", &err), 0);
    assert_int_equal(cf.port_min, 9000);
    assert_int_equal(cf.port_max, 9009);
    assert_int_equal(pyc_connfile_set_port_range(&cf, "9009-9000", &err), -1);
    assert_int_equal(pyc_connfile_set_port_range(&cf, "9000", &err), -1);
    assert_int_equal(pyc_connfile_set_port_range(&cf, "0-10", &err), -1);
    assert_int_equal(pyc_connfile_set_port_range(&cf, "1-70000", &err), -1);
    assert_int_equal(cf.port_min, 9000);
    pyc_connfile_clear(&cf);
    parse_refused("{\"kernel_id\": \"k\", \"registration_port\": -1, \"key\": \"\"}", "registration_port");
    parse_refused("{\"kernel_id\": \"k\", \"registration_port\": \" 80\", \"key\": \"\"}", "registration_port");
    parse_refused("{\"kernel_id\": \"\", \"registration_port\": 80, \"key\": \"\"}", "kernel_id");
    /* An empty registration_ip would leave the kernel no address (found by fuzz_connfile). */
    parse_refused("{\"kernel_id\": \"k\", \"registration_ip\": \"\", \"registration_port\": 7}",
                  "registration_ip");
}

static void
test_bad_files(void **state)
{
    (void)state;
    char dir[PATH_MAX], path[PATH_MAX], errpath[PATH_MAX], want[256];
    if (find_data_dir(dir, sizeof dir) < 0) {
        print_message("bad connection files not found: set PYC_SRCDIR to the source tree; skipping\n");
        skip();
    }
    DIR *d = opendir(dir);
    struct dirent *e;
    int cases = 0;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path ||
            (size_t)snprintf(errpath, sizeof errpath, "%s/%.*s.err", dir, (int)(len - 5), e->d_name) >=
                sizeof errpath)
            fail_msg("path of %s is too long", e->d_name);
        read_first_line(errpath, want, sizeof want);

        pyc_connfile_t cf;
        pyc_error_t err = {0, ""};
        if (pyc_connfile_load(path, &cf, &err) == 0) {
            pyc_connfile_clear(&cf);
            fail_msg("%s was accepted; expected [%s]", e->d_name, want);
        }
        assert_null(cf.key);
        if (strstr(err.text, want) == NULL)
            fail_msg("%s: refusal [%s] does not contain [%s]", e->d_name, err.text, want);
        cases++;
    }
    closedir(d);
    print_message("%d bad connection files refused as expected\n", cases);
    assert_true(cases >= 20);
}

int
main(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(exe_dir, sizeof exe_dir, "%s", exe);
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_port_names),
        cmocka_unit_test(test_full_file),
        cmocka_unit_test(test_ipc),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_empty_key),
        cmocka_unit_test(test_unicode_key),
        cmocka_unit_test(test_port_limits),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_parse_honours_length),
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test_setup_teardown(test_write_load_round_trip, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_write_failures, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_write_ignores_planted_names, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_load_failures, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_registration_file),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
