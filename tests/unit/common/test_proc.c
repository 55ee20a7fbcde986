/*
 * test_proc.c -- cmocka tests for proc.c: parsing /proc/PID/stat (command names with spaces and parentheses,
 * truncated and malformed texts), this process's identity and start tick, its memory, and the pidfd that
 * tells when a process ends.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"

static void
test_stat_parse(void **state)
{
    (void)state;
    pyc_proc_stat_t st;
    static const char normal[] = "4242 (pyc-kernel) S 1 4242 4242 0 -1 4194560 1000 0 0 0 12 3 0 0 20 0 5 0 "
                                 "98765 123456789 2000 18446744073709551615\n";
    assert_int_equal(pyc_proc_stat_parse(normal, &st), 0);
    assert_int_equal(st.state, 'S');
    assert_int_equal(st.ppid, 1);
    assert_int_equal(st.ticks, 15ULL);
    assert_int_equal(st.start, 98765ULL);
    /* A command name with spaces and ')' in it. */
    static const char odd[] = "7 (a) b) (c) Z 3 7 7 0 -1 0 0 0 0 0 4 5 0 0 20 0 1 0 555 0 0\n";
    assert_int_equal(pyc_proc_stat_parse(odd, &st), 0);
    assert_int_equal(st.state, 'Z');
    assert_int_equal(st.ppid, 3);
    assert_int_equal(st.ticks, 9ULL);
    assert_int_equal(st.start, 555ULL);
    /* The start tick is the last field pyc needs: a text that ends right after it is whole. */
    assert_int_equal(pyc_proc_stat_parse("7 (a) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42", &st), 0);
    assert_int_equal(st.start, 42ULL);
    assert_int_equal(pyc_proc_stat_parse("7 (a) S 1 2 3", &st), -1);
    assert_int_equal(pyc_proc_stat_parse("no parenthesis", &st), -1);
    assert_int_equal(pyc_proc_stat_parse("7 (a) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 x", &st), -1);
    assert_int_equal(pyc_proc_stat_parse("7 (a) S 1 7 7 0 -1 0 0 0 0 0 x 0 0 0 20 0 1 0 5", &st), -1);
    assert_int_equal(pyc_proc_stat_parse("7 (a)", &st), -1);
    assert_int_equal(pyc_proc_stat_parse("7 (a) ", &st), -1);
    assert_int_equal(pyc_proc_stat_parse("", &st), -1);
}

static void
test_identity(void **state)
{
    (void)state;
    long me = (long)getpid();
    pyc_proc_stat_t st;
    assert_int_equal(pyc_proc_stat(me, &st), 0);
    assert_int_equal(st.ppid, (long)getppid());
    /* starttime (ticks after boot) is this process's: after boot, and before the uptime now */
    FILE *up = fopen("/proc/uptime", "r");
    double uptime = 0;
    assert_non_null(up);
    assert_int_equal(fscanf(up, "%lf", &uptime), 1);
    fclose(up);
    double started = (double)st.start / (double)sysconf(_SC_CLK_TCK);
    assert_true(st.start > 0 && started <= uptime + 1 && started > uptime - 600);

    unsigned long long start = pyc_proc_start(me);
    assert_int_equal(start, st.start);
    assert_true(pyc_proc_is(me, 0));
    assert_true(pyc_proc_is(me, start));
    assert_false(pyc_proc_is(me, start + 1));
    assert_false(pyc_proc_is(0, 0));
    assert_false(pyc_proc_is(-5, 0));
    assert_int_equal(pyc_proc_start(0), 0ULL);
    assert_int_equal(pyc_proc_stat(-5, &st), -1);
}

static void
test_memory(void **state)
{
    (void)state;
    unsigned long long rss, pss;
    assert_int_equal(pyc_proc_memory(getpid(), &rss, &pss), 0);
    assert_true(rss > 0 && pss > 0 && pss <= rss);
    assert_int_equal(pyc_proc_memory(-5, &rss, &pss), -1);
}

/* A pidfd is quiet while its process lives, readable once it has ended (before it is reaped, too); no pidfd
 * for a pid that is not a process.  Skipped where the running kernel lacks pidfd_open (before 5.3). */
static void
test_pidfd(void **state)
{
    (void)state;
    assert_int_equal(pyc_proc_pidfd(0), -1);
    assert_int_equal(errno, ESRCH);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pause();
        _exit(0);
    }
    int fd = pyc_proc_pidfd(pid);
    if (fd < 0 && errno == ENOSYS) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        skip();
    }
    assert_true(fd >= 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
    kill(pid, SIGKILL);
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_true(p.revents & POLLIN);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    close(fd);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stat_parse),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_pidfd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
