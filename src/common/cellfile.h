/*
 * cellfile.h -- the file name a cell's code is compiled under, which the debugger front end can compute
 * by itself (JupyterLab's debugger protocol, as ipykernel and xeus-python do it).
 *
 * A cell is compiled with the name PREFIX HASH ".py", where PREFIX is "$TMPDIR/pyc_PID/" ($TMPDIR defaults
 * to /tmp) and HASH is the decimal MurmurHash2 (32-bit, x86) of the cell's UTF-8 text with the seed below.
 * debugInfo announces the prefix, the suffix, the method ("Murmur2") and the seed, so that JupyterLab names
 * a cell's file exactly as the kernel does, and a breakpoint set in a cell maps to the code compiled from
 * it -- also in a function defined by an earlier cell.  dumpCell writes the text to that file.
 */
#ifndef PYC_CELLFILE_H
#define PYC_CELLFILE_H

#include <stddef.h>
#include <stdint.h>

#define PYC_CELLFILE_SEED 0xC70F6907u
#define PYC_CELLFILE_SUFFIX ".py"

/* MurmurHash2 (Austin Appleby's 32-bit version, little-endian reads) of data[0..len). */
uint32_t pyc_murmur2(const void *data, size_t len, uint32_t seed);

/* Writes the prefix ("/tmp/pyc_1234/", with the trailing slash) into buf.  Returns its length, or -1 when it
 * does not fit. */
int pyc_cellfile_prefix(char *buf, size_t cap);

/* Writes the file name of a cell whose text is code[0..len) into buf.  Returns its length, or -1 when it
 * does not fit. */
int pyc_cellfile_name(const char *code, size_t len, char *buf, size_t cap);

#endif
