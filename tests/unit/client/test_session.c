/*
 * test_session.c -- cmocka tests for session.c: session names, session files with pyc's extra members,
 * and the sides of `pyc cp`.
 *
 * Refusals are checked by status and by a piece of their sentence.  The file tests write into a fresh
 * directory under /tmp and check the mode (0600) and that no temporary file is left behind.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session.h"

static void
expect_refused(int rc, const pyc_error_t *err, const char *needle)
{
    assert_int_equal(rc, -1);
    if (strstr(err->text, needle) == NULL)
        fail_msg("error '%s' does not contain '%s'", err->text, needle);
}

static void
test_names(void **state)
{
    (void)state;
    pyc_error_t err;
    assert_int_equal(pyc_session_name_check("work", &err), 0);
    assert_int_equal(pyc_session_name_check("a", &err), 0);
    assert_int_equal(pyc_session_name_check("gpu-2_x9", &err), 0);
    char longest[PYC_SESSION_NAME_MAX + 2];
    memset(longest, 'a', sizeof longest);
    longest[PYC_SESSION_NAME_MAX] = '\0';
    assert_int_equal(pyc_session_name_check(longest, &err), 0);
    longest[PYC_SESSION_NAME_MAX] = 'a';
    longest[PYC_SESSION_NAME_MAX + 1] = '\0';
    expect_refused(pyc_session_name_check(longest, &err), &err, "81 characters long; the limit is 80");
    expect_refused(pyc_session_name_check("", &err), &err, "cannot be empty");
    expect_refused(pyc_session_name_check("Work", &err), &err, "has 'W'");
    expect_refused(pyc_session_name_check("a.b", &err), &err, "has '.'");
    expect_refused(pyc_session_name_check("a/b", &err), &err, "has '/'");
    expect_refused(pyc_session_name_check("a b", &err), &err, "has ' '");
    expect_refused(pyc_session_name_check("caf\xc3\xa9", &err), &err, "byte 0xc3");
    expect_refused(pyc_session_name_check("a\tb", &err), &err, "byte 0x09");
    assert_int_equal(pyc_session_name_check("x:y", NULL), -1);
}

static void
test_paths_and_file_names(void **state)
{
    (void)state;
    char out[64], name[PYC_SESSION_NAME_MAX + 1];
    assert_int_equal(pyc_session_path(out, sizeof out, "/run/j", "work", ".json"), 0);
    assert_string_equal(out, "/run/j/pyc-work.json");
    assert_int_equal(pyc_session_path(out, 10, "/run/j", "work", ".json"), -1);
    assert_string_equal(out, "");
    assert_true(pyc_session_name_of_file("pyc-work.json", name));
    assert_string_equal(name, "work");
    assert_true(pyc_session_name_of_file("pyc-work-fork-123.json", name));
    assert_string_equal(name, "work-fork-123");
    assert_false(pyc_session_name_of_file("pyc-.json", name));
    assert_false(pyc_session_name_of_file("pyc-work.lock", name));
    assert_false(pyc_session_name_of_file("pyc-Work.json", name));
    assert_false(pyc_session_name_of_file("kernel-1234.json", name));
    assert_false(pyc_session_name_of_file("pyc-work.json.tmp99", name));
}

static const char good[] =
    "{\"transport\": \"tcp\", \"ip\": \"127.0.0.1\", \"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3,"
    " \"control_port\": 4, \"hb_port\": 5, \"key\": \"k\", \"signature_scheme\": \"hmac-sha256\", ";

static void
test_file_parse(void **state)
{
    (void)state;
    pyc_session_file_t sf;
    pyc_error_t err;
    char text[1024];
    snprintf(text, sizeof text, "%s\"pid\": 4242, \"pid_start\": 987654321, \"created\": 1700000000.5}", good);
    assert_int_equal(pyc_session_file_parse(text, strlen(text), &sf, &err), 0);
    assert_int_equal(sf.pid, 4242);
    assert_int_equal(sf.pid_start, 987654321ULL);
    assert_true(sf.created == 1700000000.5);
    assert_int_equal(sf.cf.ports[PYC_CHAN_HB], 5);
    assert_string_equal(sf.cf.key, "k");
    pyc_session_file_clear(&sf);
    pyc_session_file_clear(&sf);

    /* Extras of the wrong type, or out of range, count as absent; the connection still loads. */
    snprintf(text, sizeof text, "%s\"pid\": \"4242\", \"pid_start\": -1, \"created\": \"now\"}", good);
    assert_int_equal(pyc_session_file_parse(text, strlen(text), &sf, &err), 0);
    assert_int_equal(sf.pid, 0);
    assert_int_equal(sf.pid_start, 0);
    assert_true(sf.created == 0);
    pyc_session_file_clear(&sf);
    snprintf(text, sizeof text, "%s\"pid\": 99999999999}", good);
    assert_int_equal(pyc_session_file_parse(text, strlen(text), &sf, &err), 0);
    assert_int_equal(sf.pid, 0);
    pyc_session_file_clear(&sf);

    /* A bad connection is refused by connfile's own checks. */
    snprintf(text, sizeof text, "{\"ip\": \"127.0.0.1\"}");
    expect_refused(pyc_session_file_parse(text, strlen(text), &sf, &err), &err, "lacks \"shell_port\"");
    expect_refused(pyc_session_file_parse("[", 1, &sf, &err), &err, "not valid JSON");
}

static void
test_file_write_and_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/pyc-test-session-XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/pyc-x.json", dir);
    pyc_session_file_t sf, back;
    pyc_error_t err;
    memset(&sf, 0, sizeof sf);
    snprintf(sf.cf.transport, sizeof sf.cf.transport, "tcp");
    snprintf(sf.cf.ip, sizeof sf.cf.ip, "127.0.0.1");
    snprintf(sf.cf.signature_scheme, sizeof sf.cf.signature_scheme, "hmac-sha256");
    snprintf(sf.cf.kernel_name, sizeof sf.cf.kernel_name, "pyc");
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        sf.cf.ports[c] = 40000 + c;
    char key[] = "0123abcd";
    sf.cf.key = key;
    sf.cf.keylen = 8;
    sf.pid = 77;
    sf.pid_start = 123456;
    sf.created = 1700000001.25;

    assert_int_equal(pyc_session_file_load(path, &back, &err), -1);
    assert_int_equal(err.code, PYC_ENOENT);
    assert_int_equal(pyc_session_file_write(path, &sf, &err), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(pyc_session_file_load(path, &back, &err), 0);
    assert_int_equal(back.pid, 77);
    assert_int_equal(back.pid_start, 123456ULL);
    assert_true(back.created == 1700000001.25);
    assert_int_equal(back.cf.ports[PYC_CHAN_CONTROL], 40000 + PYC_CHAN_CONTROL);
    assert_string_equal(back.cf.key, "0123abcd");
    assert_string_equal(back.cf.kernel_name, "pyc");
    pyc_session_file_clear(&back);

    /* No temporary file is left beside it. */
    DIR *d = opendir(dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.')
            files++;
    }
    closedir(d);
    assert_int_equal(files, 1);

    /* Only a regular file is read: a symbolic link to a good file is refused, and a FIFO is refused at once
     * instead of blocking the open forever (the alarm fails the test if it blocks). */
    char other[300];
    snprintf(other, sizeof other, "%s/pyc-link.json", dir);
    assert_int_equal(symlink(path, other), 0);
    expect_refused(pyc_session_file_load(other, &back, &err), &err, "symbolic link");
    assert_int_equal(err.code, PYC_EINVAL);
    unlink(other);
    snprintf(other, sizeof other, "%s/pyc-fifo.json", dir);
    assert_int_equal(mkfifo(other, 0600), 0);
    alarm(10);
    expect_refused(pyc_session_file_load(other, &back, &err), &err, "not a regular file");
    assert_int_equal(err.code, PYC_EINVAL);
    alarm(0);
    unlink(other);

    /* A write into a directory that does not exist fails with a sentence. */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/pyc-x.json", dir);
    expect_refused(pyc_session_file_write(bad, &sf, &err), &err, "cannot create");
    unlink(path);
    rmdir(dir);
}

static void
test_sides(void **state)
{
    (void)state;
    pyc_side_t s;
    pyc_error_t err;
    assert_int_equal(pyc_side_parse("work:df", &s, &err), 0);
    assert_int_equal(s.kind, PYC_SIDE_SESSION);
    assert_string_equal(s.session, "work");
    assert_string_equal(s.var, "df");
    assert_int_equal(pyc_side_parse("gpu-1:", &s, &err), 0);
    assert_int_equal(s.kind, PYC_SIDE_SESSION);
    assert_string_equal(s.session, "gpu-1");
    assert_string_equal(s.var, "");
    assert_int_equal(pyc_side_parse("work:_x9", &s, &err), 0);
    assert_string_equal(s.var, "_x9");
    assert_int_equal(pyc_side_parse("work:caf\xc3\xa9", &s, &err), 0);

    assert_int_equal(pyc_side_parse("df.pkl", &s, &err), 0);
    assert_int_equal(s.kind, PYC_SIDE_FILE);
    assert_string_equal(s.path, "df.pkl");
    assert_int_equal(pyc_side_parse("./Work:x", &s, &err), 0);
    assert_int_equal(s.kind, PYC_SIDE_FILE);
    assert_int_equal(pyc_side_parse("/tmp/a:b.pkl", &s, &err), 0);
    assert_int_equal(s.kind, PYC_SIDE_FILE);
    assert_int_equal(pyc_side_parse("-", &s, &err), 0);
    assert_int_equal(s.kind, PYC_SIDE_STDIO);

    expect_refused(pyc_side_parse("", &s, &err), &err, "neither a file nor a session");
    expect_refused(pyc_side_parse("Work:x", &s, &err), &err,
                   "'Work' is not a session name (for a file, write ./Work:x)");
    expect_refused(pyc_side_parse(":x", &s, &err), &err, "is not a session name");
    expect_refused(pyc_side_parse("work:1x", &s, &err), &err, "'1x' is not a Python name");
    expect_refused(pyc_side_parse("work:a.b", &s, &err), &err, "'a.b' is not a Python name");
    expect_refused(pyc_side_parse("work:a:b", &s, &err), &err, "is not a Python name");
    char big[400];
    memset(big, 'v', sizeof big);
    memcpy(big, "work:", 5);
    big[sizeof big - 1] = '\0';
    expect_refused(pyc_side_parse(big, &s, &err), &err, "longer than 255");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_paths_and_file_names),
        cmocka_unit_test(test_file_parse),
        cmocka_unit_test(test_file_write_and_load),
        cmocka_unit_test(test_sides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
