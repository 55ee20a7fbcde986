/*
 * pidcache.h -- getpid() from memory for libzmq's fork checks (see pidcache.c for why and how).
 */
#ifndef PYC_PIDCACHE_H
#define PYC_PIDCACHE_H

#include <stdint.h>
#include <sys/types.h>

/* Finds libzmq's code and registers the fork handler that clears the cached pid.  Call first thing in main,
 * before any thread starts or any fork; not thread-safe. */
void pyc_pidcache_init(void);

/* What getpid() answers a call that returns to the address `from`: the cached pid when `from` lies in
 * libzmq's code, else the pid read with the system call.  Thread-safe.  getpid itself is defined in
 * pidcache.c too. */
pid_t pyc_pidcache_pid(uintptr_t from);

#endif
