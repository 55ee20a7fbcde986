/*
 * test_pidcache.c -- cmocka tests for kernel/pidcache.c: what getpid() answers libzmq (the cached pid) and
 * everyone else (the system call's), in the process, in a child made by fork(3), whose cache the fork handler
 * clears, and in a child made by a raw clone(2), which runs no fork handler.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pidcache.h"

/* An address inside libzmq's code (asked of the library: in a program built without PIE, &zmq_msg_send is
 * the program's own PLT entry), and one outside it (this program's). */
static uintptr_t in_zmq;
#define IN_ZMQ in_zmq
#define OUTSIDE ((uintptr_t)&main)

int main(void);

static pid_t
real_pid(void)
{
    return (pid_t)syscall(SYS_getpid);
}

/* Runs check in a child made by make_child and returns the child's exit status (0: every answer right). */
static int
in_child(pid_t (*make_child)(void), int (*check)(pid_t parent))
{
    pid_t parent = real_pid();
    pid_t pid = make_child();
    if (pid == 0)
        _exit(check(parent));
    assert_true(pid > 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static pid_t
by_fork(void)
{
    return fork();
}

/* clone(2) with only SIGCHLD: a fork that glibc's fork handlers do not see. */
static pid_t
by_raw_clone(void)
{
    return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}

/* In a child of fork(3): libzmq and everyone else are told the child's own pid. */
static int
check_forked(pid_t parent)
{
    pid_t self = real_pid();
    if (self == parent)
        return 1;
    if (pyc_pidcache_pid(IN_ZMQ) != self)
        return 2;
    if (pyc_pidcache_pid(OUTSIDE) != self || getpid() != self)
        return 3;
    return 0;
}

/* In a child of a raw clone: libzmq is told the cached pid (its parent's, the documented limit), everyone
 * else the child's own. */
static int
check_cloned(pid_t parent)
{
    pid_t self = real_pid();
    if (pyc_pidcache_pid(IN_ZMQ) != parent)
        return 1;
    if (pyc_pidcache_pid(OUTSIDE) != self || getpid() != self)
        return 2;
    return 0;
}

static void
test_pidcache(void **state)
{
    (void)state;
    void *zmq = dlopen("libzmq.so.5", RTLD_LAZY | RTLD_NOLOAD);
    assert_non_null(zmq);
    in_zmq = (uintptr_t)dlsym(zmq, "zmq_msg_send") + 1;
    assert_true(in_zmq > 1);
    dlclose(zmq);
    /* Before pyc_pidcache_init nothing is cached: every answer is the system call's. */
    assert_int_equal(pyc_pidcache_pid(IN_ZMQ), real_pid());
    pyc_pidcache_init();
    assert_int_equal(pyc_pidcache_pid(IN_ZMQ), real_pid());
    assert_int_equal(pyc_pidcache_pid(OUTSIDE), real_pid());
    assert_int_equal(getpid(), real_pid());
    assert_int_equal(in_child(by_fork, check_forked), 0);
    assert_int_equal(in_child(by_raw_clone, check_cloned), 0);
    /* The parent's own answers are unchanged by its children. */
    assert_int_equal(pyc_pidcache_pid(IN_ZMQ), real_pid());
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pidcache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
