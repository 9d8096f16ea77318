/* What the sources of herald.fragment._spool_native share. _spool_native.c holds the
 * SHA1 objects, `seal` and the module's init; each other source adds its functions
 * to the module through its `spool_*_add`, called from that init. */
#ifndef HERALD_SPOOL_NATIVE_H
#define HERALD_SPOOL_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SHA_NI 1  /* the module loads only where SHA-NI is (checked at import) */
#endif

/* A bytes-like object's buffer (text refused, as hashlib refuses it). */
int spool_get_bytes(PyObject *arg, Py_buffer *view);
/* seal(running, contents) -> (sums, running_hex); TypeError unless running is this
 * module's SHA1 (_spool_native.c). */
PyObject *spool_seal(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* Each adds its functions to `module`; -1 with an exception set on failure. */
int spool_writes_add(PyObject *module);  /* _spool_writes.c: pwrite_each */
int spool_frames_add(PyObject *module);  /* _spool_frames.c: seal_frame, where SSE4.2 is */
int spool_syncs_add(PyObject *module);   /* _spool_syncs.c: start_fdatasync, PendingSync, start_writeback */

#endif
