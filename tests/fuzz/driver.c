/*
 * driver.c -- main() for the fuzz targets when they are not built with libFuzzer.
 *
 * Usage: fuzz_X PATH...   Each PATH is a file, or a directory whose regular files are taken (one level: its
 * subdirectories are not entered).  Every file is read whole and passed once to LLVMFuzzerTestOneInput, in
 * sorted order within a directory, so a crash reproduces the same way each run.  This is how `make check`
 * replays the seed corpus as regression tests on any compiler; a failing input aborts the program (the
 * targets abort on a broken invariant) and its name is the last one printed with -v.
 *
 * Exit status: 0 after "N inputs ok" with N > 0; 1 when a path cannot be read or no input was found, so a
 * missing corpus is a failure rather than a silent pass.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int verbose;

/* Reads the file at path and runs it.  Returns 0, or -1 after printing why the file could not be read. */
static int
run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    size_t len = 0, cap = 0;
    int rc = -1;

    if (f == NULL) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap > 0 ? cap * 2 : 4096;
            uint8_t *p = realloc(data, ncap);
            if (p == NULL) {
                fprintf(stderr, "%s: out of memory\n", path);
                goto out;
            }
            data = p;
            cap = ncap;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: read error\n", path);
        goto out;
    }
    if (verbose)
        fprintf(stderr, "running %s (%zu bytes)\n", path, len);
    /* Shrunk to exactly len bytes, so AddressSanitizer catches a read one past the input. */
    uint8_t *exact = realloc(data, len > 0 ? len : 1);
    if (exact == NULL) {
        fprintf(stderr, "%s: out of memory\n", path);
        goto out;
    }
    data = exact;
    LLVMFuzzerTestOneInput(data, len);
    rc = 0;
out:
    free(data);
    fclose(f);
    return rc;
}

static int
cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file in dir, in name order.  Returns the number run, or -1 on an error. */
static long
run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    long done = -1;

    if (d == NULL) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            size_t ncap = cap > 0 ? cap * 2 : 64;
            char **p = realloc(names, ncap * sizeof *p);
            if (p == NULL) {
                fprintf(stderr, "%s: out of memory\n", dir);
                goto out;
            }
            names = p;
            cap = ncap;
        }
        size_t len = strlen(dir) + 1 + strlen(e->d_name) + 1;
        if ((names[n] = malloc(len)) == NULL) {
            fprintf(stderr, "%s: out of memory\n", dir);
            goto out;
        }
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    qsort(names, n, sizeof *names, cmp_names);
    done = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (run_file(names[i]) < 0) {
            done = -1;
            goto out;
        }
        done++;
    }
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return done;
}

int
main(int argc, char **argv)
{
    long total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (strcmp(argv[i], "-v") == 0) {
            verbose = 1;
            continue;
        }
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            long n = run_dir(argv[i]);
            if (n < 0)
                return 1;
            total += n;
        } else {
            if (run_file(argv[i]) < 0)
                return 1;
            total++;
        }
    }
    if (total == 0) {
        fprintf(stderr, "%s: no inputs (usage: %s [-v] FILE|DIR...)\n", argv[0], argv[0]);
        return 1;
    }
    printf("%ld inputs ok\n", total);
    return 0;
}
