/* herald.fragment._spool_native: the spool write path in C. SHA1 objects
 * (hashlib's interface) and `update_both`, which feeds the same bytes to two of them
 * in ONE pass, their rounds interleaved; a small group's `seal`; a round's
 * `pwrite_each`; a small logged group's `seal_frame` (seal, commit line, record);
 * and (_spool_syncs.c) a streamed body's data sync, `start_fdatasync`, on a thread
 * that never takes the GIL.
 *
 * Why: every appended byte is hashed twice, into its body's SHA1 (the append's
 * X-Commit-SHA1-Sum, as Gazette's clientSummer) and into the fragment's running SHA1
 * (its name and each commit record's sum). The two digests start from different
 * states, so neither can be derived from the other; but one SHA-NI stream is bound by
 * the latency of `sha1rnds4`, and two independent streams interleaved in one loop
 * fill the gaps: on this machine's EPYC two SHA1s of a MiB take 0.54-0.58 ms this
 * way against 0.95-0.98 one after the other (OpenSSL's SHA-NI code, hashlib's).
 *
 * The module refuses to import (ImportError) where the CPU has no SHA extensions or
 * is not x86-64: `herald.fragment.spool_sums` then uses hashlib, two passes.
 * Updates of 2 KiB or more drop the GIL, as hashlib's do; each object has a lock. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_SHA_NI 1
#endif

#define GIL_MINSIZE 2048

/* start_fdatasync and its PendingSync, in _spool_syncs.c: added to the module by PyInit. */
int spool_syncs_add(PyObject *module);

#ifdef HAVE_SHA_NI
typedef struct {
    PyObject_HEAD
    uint32_t h[5];
    uint64_t length;     /* bytes hashed so far */
    uint8_t buf[64];
    unsigned buffered;   /* bytes of buf in use, < 64 */
    PyThread_type_lock lock;
} SHA1Object;

static PyTypeObject SHA1Type;
static const uint32_t IV[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};

#define TARGET __attribute__((target("sha,sse4.1,ssse3")))
#define LD(p, i) _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 16 * (i))), MASK)
#define DECL(s) __m128i ABCD##s, E0##s, E1##s, M0##s, M1##s, M2##s, M3##s, AS##s, ES##s;
#define BEGIN(s, p) AS##s = ABCD##s; ES##s = E0##s; \
    M0##s = LD(p, 0); M1##s = LD(p, 1); M2##s = LD(p, 2); M3##s = LD(p, 3);
#define M_(s, k) M##k##s
/* Rounds 4g..4g+3 of stream s; c is the message vector they consume, n1..n3 the next
 * ones (the schedule of Intel's SHA extensions reference code, written once). */
#define STEP(s, g, c, n1, n2, n3) do { \
    if ((g) == 0) { E0##s = _mm_add_epi32(E0##s, M_(s, c)); E1##s = ABCD##s; \
                    ABCD##s = _mm_sha1rnds4_epu32(ABCD##s, E0##s, 0); } \
    else if ((g) & 1) { E1##s = _mm_sha1nexte_epu32(E1##s, M_(s, c)); E0##s = ABCD##s; \
                        ABCD##s = _mm_sha1rnds4_epu32(ABCD##s, E1##s, (g) / 5); } \
    else { E0##s = _mm_sha1nexte_epu32(E0##s, M_(s, c)); E1##s = ABCD##s; \
           ABCD##s = _mm_sha1rnds4_epu32(ABCD##s, E0##s, (g) / 5); } \
    if ((g) >= 3 && (g) < 19) M_(s, n1) = _mm_sha1msg2_epu32(M_(s, n1), M_(s, c)); \
    if ((g) >= 1 && (g) < 17) M_(s, n3) = _mm_sha1msg1_epu32(M_(s, n3), M_(s, c)); \
    if ((g) >= 2 && (g) < 18) M_(s, n2) = _mm_xor_si128(M_(s, n2), M_(s, c)); \
} while (0)
#define ALL(X) X(0,0,1,2,3) X(1,1,2,3,0) X(2,2,3,0,1) X(3,3,0,1,2) X(4,0,1,2,3) \
    X(5,1,2,3,0) X(6,2,3,0,1) X(7,3,0,1,2) X(8,0,1,2,3) X(9,1,2,3,0) X(10,2,3,0,1) \
    X(11,3,0,1,2) X(12,0,1,2,3) X(13,1,2,3,0) X(14,2,3,0,1) X(15,3,0,1,2) \
    X(16,0,1,2,3) X(17,1,2,3,0) X(18,2,3,0,1) X(19,3,0,1,2)
#define ST1(g, c, a, b, d) STEP(A, g, c, a, b, d);
#define ST2(g, c, a, b, d) STEP(A, g, c, a, b, d); STEP(B, g, c, a, b, d);
#define LOAD_STATE(s, h) ABCD##s = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(h)), 0x1B); \
    E0##s = _mm_set_epi32((int)(h)[4], 0, 0, 0);
#define STORE_STATE(s, h) _mm_storeu_si128((__m128i *)(h), _mm_shuffle_epi32(ABCD##s, 0x1B)); \
    (h)[4] = (uint32_t)_mm_extract_epi32(E0##s, 3);
#define END(s) E0##s = _mm_sha1nexte_epu32(E0##s, ES##s); ABCD##s = _mm_add_epi32(ABCD##s, AS##s);

TARGET static void blocks1(uint32_t *h, const uint8_t *p, size_t n)
{
    const __m128i MASK = _mm_set_epi64x(0x0001020304050607ULL, 0x08090a0b0c0d0e0fULL);
    DECL(A)
    LOAD_STATE(A, h)
    for (; n; n--, p += 64) { BEGIN(A, p) ALL(ST1) END(A) }
    STORE_STATE(A, h)
}

TARGET static void blocks2(uint32_t *ha, const uint8_t *p, uint32_t *hb, const uint8_t *q, size_t n)
{
    const __m128i MASK = _mm_set_epi64x(0x0001020304050607ULL, 0x08090a0b0c0d0e0fULL);
    DECL(A) DECL(B)
    LOAD_STATE(A, ha) LOAD_STATE(B, hb)
    for (; n; n--, p += 64, q += 64) { BEGIN(A, p) BEGIN(B, q) ALL(ST2) END(A) END(B) }
    STORE_STATE(A, ha) STORE_STATE(B, hb)
}

static int cpu_has_sha(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3))
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 29) & 1;
}

/* Top up `o`'s partial block from data[0..len): bytes taken. */
static size_t fill(SHA1Object *o, const uint8_t *data, size_t len)
{
    size_t take = 0;
    if (o->buffered) {
        take = 64 - o->buffered < len ? 64 - o->buffered : len;
        memcpy(o->buf + o->buffered, data, take);
        o->buffered += (unsigned)take;
        if (o->buffered == 64) {
            blocks1(o->h, o->buf, 1);
            o->buffered = 0;
        }
    }
    return take;
}

/* Hash whole blocks of data[0..len) and keep the tail. */
static void rest(SHA1Object *o, const uint8_t *data, size_t len)
{
    size_t n = len / 64;
    if (n)
        blocks1(o->h, data, n);
    memcpy(o->buf, data + 64 * n, len - 64 * n);
    o->buffered = (unsigned)(len - 64 * n);
}

static void update1(SHA1Object *o, const uint8_t *data, size_t len)
{
    size_t at = fill(o, data, len);
    o->length += len;
    if (at < len)
        rest(o, data + at, len - at);
}

static void update2(SHA1Object *a, SHA1Object *b, const uint8_t *data, size_t len)
{
    size_t pa = fill(a, data, len), pb = fill(b, data, len);
    size_t na = (len - pa) / 64, nb = (len - pb) / 64, n = na < nb ? na : nb;
    a->length += len;
    b->length += len;
    if (n)
        blocks2(a->h, data + pa, b->h, data + pb, n);
    pa += 64 * n;
    pb += 64 * n;
    if (pa < len)
        rest(a, data + pa, len - pa);
    if (pb < len)
        rest(b, data + pb, len - pb);
}

static void final_digest(const SHA1Object *o, uint8_t out[20])
{
    SHA1Object t = *o;
    uint8_t pad[128] = {0x80};
    uint64_t bits = t.length * 8;
    size_t padlen = (t.buffered < 56 ? 56 : 120) - t.buffered;
    for (int i = 0; i < 8; i++)
        pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
    update1(&t, pad, padlen + 8);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(t.h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(t.h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(t.h[i] >> 8);
        out[4 * i + 3] = (uint8_t)t.h[i];
    }
}

static SHA1Object *new_object(void)
{
    SHA1Object *o = PyObject_New(SHA1Object, &SHA1Type);
    if (o == NULL)
        return NULL;
    o->lock = PyThread_allocate_lock();
    if (o->lock == NULL) {
        Py_DECREF(o);
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(o->h, IV, sizeof IV);
    o->length = 0;
    o->buffered = 0;
    return o;
}

static void lock(SHA1Object *o)
{
    if (!PyThread_acquire_lock(o->lock, 0)) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(o->lock, 1);
        Py_END_ALLOW_THREADS
    }
}

static int get_bytes(PyObject *arg, Py_buffer *view)
{
    if (PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "Strings must be encoded before hashing");
        return -1;
    }
    return PyObject_GetBuffer(arg, view, PyBUF_SIMPLE);
}

static PyObject *sha1_update(SHA1Object *self, PyObject *arg)
{
    Py_buffer view;
    if (get_bytes(arg, &view) < 0)
        return NULL;
    lock(self);
    if (view.len >= GIL_MINSIZE) {
        Py_BEGIN_ALLOW_THREADS
        update1(self, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        update1(self, view.buf, (size_t)view.len);
    }
    PyThread_release_lock(self->lock);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyObject *sha1_copy(SHA1Object *self, PyObject *Py_UNUSED(ignored))
{
    SHA1Object *o = new_object();
    if (o == NULL)
        return NULL;
    lock(self);
    memcpy(o->h, self->h, sizeof o->h);
    memcpy(o->buf, self->buf, sizeof o->buf);
    o->length = self->length;
    o->buffered = self->buffered;
    PyThread_release_lock(self->lock);
    return (PyObject *)o;
}

static PyObject *sha1_digest(SHA1Object *self, PyObject *Py_UNUSED(ignored))
{
    uint8_t out[20];
    lock(self);
    final_digest(self, out);
    PyThread_release_lock(self->lock);
    return PyBytes_FromStringAndSize((const char *)out, 20);
}

static void hex40(const uint8_t digest[20], char text[40])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 20; i++) {
        text[2 * i] = hex[digest[i] >> 4];
        text[2 * i + 1] = hex[digest[i] & 15];
    }
}

static PyObject *sha1_hexdigest(SHA1Object *self, PyObject *Py_UNUSED(ignored))
{
    uint8_t out[20];
    char text[40];
    lock(self);
    final_digest(self, out);
    PyThread_release_lock(self->lock);
    hex40(out, text);
    return PyUnicode_FromStringAndSize(text, 40);
}

static void sha1_dealloc(SHA1Object *self)
{
    if (self->lock)
        PyThread_free_lock(self->lock);
    PyObject_Free(self);
}

static PyObject *sha1_get_name(PyObject *self, void *closure) { return PyUnicode_FromString("sha1"); }
static PyObject *sha1_get_digest_size(PyObject *self, void *closure) { return PyLong_FromLong(20); }
static PyObject *sha1_get_block_size(PyObject *self, void *closure) { return PyLong_FromLong(64); }

static PyMethodDef sha1_methods[] = {
    {"update", (PyCFunction)sha1_update, METH_O, "Hash more bytes."},
    {"copy", (PyCFunction)sha1_copy, METH_NOARGS, "An independent copy of this hash."},
    {"digest", (PyCFunction)sha1_digest, METH_NOARGS, "The 20-byte digest so far."},
    {"hexdigest", (PyCFunction)sha1_hexdigest, METH_NOARGS, "The digest so far, as 40 hex digits."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef sha1_getset[] = {
    {"name", sha1_get_name, NULL, NULL, NULL},
    {"digest_size", sha1_get_digest_size, NULL, NULL, NULL},
    {"block_size", sha1_get_block_size, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SHA1Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "herald.fragment._spool_native.SHA1",
    .tp_basicsize = sizeof(SHA1Object),
    .tp_dealloc = (destructor)sha1_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A SHA1 hash with hashlib's interface (update, copy, digest, hexdigest).",
    .tp_methods = sha1_methods,
    .tp_getset = sha1_getset,
};

static PyObject *new_sha1(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "sha1() takes at most one argument");
        return NULL;
    }
    SHA1Object *o = new_object();
    if (o == NULL)
        return NULL;
    if (nargs == 1) {
        PyObject *r = sha1_update(o, args[0]);
        if (r == NULL) {
            Py_DECREF(o);
            return NULL;
        }
        Py_DECREF(r);
    }
    return (PyObject *)o;
}

static PyObject *update_both(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !Py_IS_TYPE(args[0], &SHA1Type) || !Py_IS_TYPE(args[1], &SHA1Type)) {
        PyErr_SetString(PyExc_TypeError, "update_both(a, b, data): a and b are this module's SHA1s");
        return NULL;
    }
    SHA1Object *a = (SHA1Object *)args[0], *b = (SHA1Object *)args[1];
    if (a == b) {
        PyErr_SetString(PyExc_ValueError, "update_both: a and b must be two objects");
        return NULL;
    }
    Py_buffer view;
    if (get_bytes(args[2], &view) < 0)
        return NULL;
    lock(a);
    lock(b);
    if (view.len >= GIL_MINSIZE) {
        Py_BEGIN_ALLOW_THREADS
        update2(a, b, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        update2(a, b, view.buf, (size_t)view.len);
    }
    PyThread_release_lock(b->lock);
    PyThread_release_lock(a->lock);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* Each of n bodies into `running` and into a SHA1 of its own; their digests, and
 * the running one's after them in `last`. Called with the GIL held; a body of
 * GIL_MINSIZE bytes or more is hashed without it, as `update_both` would (a whole
 * group of small bodies is not: the round thread would then wait to get the GIL
 * back from the event loop, in the middle of its round). */
static void seal_group(SHA1Object *running, const Py_buffer *views, Py_ssize_t n, uint8_t (*digests)[20],
                       uint8_t last[20])
{
    for (Py_ssize_t i = 0; i < n; i++) {
        SHA1Object body;
        memcpy(body.h, IV, sizeof IV);
        body.length = 0;
        body.buffered = 0;
        if (views[i].len >= GIL_MINSIZE) {
            Py_BEGIN_ALLOW_THREADS
            update2(running, &body, views[i].buf, (size_t)views[i].len);
            Py_END_ALLOW_THREADS
        } else {
            update2(running, &body, views[i].buf, (size_t)views[i].len);
        }
        final_digest(&body, digests[i]);
    }
    final_digest(running, last);
}

/* seal(running, contents) -> (sums, running_hex): a small group's hashing in one
 * call. Each body of `contents` goes to `running` and to a SHA1 of its own in one
 * interleaved pass (update2), and the call returns each body's hex digest and the
 * running one's after them. At 16 journals a round seals one small group per
 * append, and a Python loop of `update_both`, a new object and a hexdigest per body
 * cost 2.9-3.2 us per two 1 KiB bodies against 2.4-2.5 here, the hashing itself
 * ~1.7 of it. The GIL is dropped as `update_both` drops it (see seal_group). */
static PyObject *seal(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !Py_IS_TYPE(args[0], &SHA1Type)) {
        PyErr_SetString(PyExc_TypeError, "seal(running, contents): running is this module's SHA1");
        return NULL;
    }
    SHA1Object *running = (SHA1Object *)args[0];
    PyObject *seq = PySequence_Fast(args[1], "seal: contents must be a sequence of bytes");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), got = 0, i;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    Py_buffer *views = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
    uint8_t (*digests)[20] = PyMem_Malloc((n ? (size_t)n : 1) * 20);
    PyObject *sums = NULL, *result = NULL;
    uint8_t last[20];
    if (views == NULL || digests == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++) {
        if (get_bytes(items[got], &views[got]) < 0)
            goto done;
    }
    lock(running);
    seal_group(running, views, n, digests, last);
    PyThread_release_lock(running->lock);
    if ((sums = PyList_New(n)) == NULL)
        goto done;
    for (i = 0; i < n; i++) {
        char text[40];
        hex40(digests[i], text);
        PyObject *sum = PyUnicode_FromStringAndSize(text, 40);
        if (sum == NULL)
            goto done;
        PyList_SET_ITEM(sums, i, sum);
    }
    char text[40];
    hex40(last, text);
    PyObject *running_hex = PyUnicode_FromStringAndSize(text, 40);
    if (running_hex != NULL)
        result = PyTuple_Pack(2, sums, running_hex);
    Py_XDECREF(running_hex);
done:
    for (i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(digests);
    Py_XDECREF(sums);
    Py_DECREF(seq);
    return result;
}

/* One write of pwrite_each: a descriptor, its buffers' views as iovecs, the offset,
 * and the errno it ended with (0: every byte written). */
typedef struct {
    int fd;
    long long at;
    Py_ssize_t first, count;  /* its iovecs in the shared array */
    int err;
} Job;

/* Write iov[0..count) at `at` in full: pwritev may stop short (a signal, a disk
 * filling up part-way) and still succeed; the rest is written, never dropped. */
static int write_whole(int fd, struct iovec *iov, Py_ssize_t count, long long at)
{
    while (count > 0) {
        int batch = count > IOV_MAX ? IOV_MAX : (int)count;
        ssize_t done = pwritev(fd, iov, batch, (off_t)at);
        if (done < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        at += done;
        while (count > 0 && (size_t)done >= iov->iov_len) {
            done -= (ssize_t)iov->iov_len;
            iov++;
            count--;
        }
        if (count > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= (size_t)done;
        }
    }
    return 0;
}

/* pwrite_each(jobs) -> errnos: each (fd, buffers, offset) of `jobs` written in full
 * (as herald.fragment.whole_writes.pwrite_all), all of them with the GIL dropped
 * once; each job's errno, 0 where it was written. At 16 journals a logged round
 * writes one small group to each spool while its log syncs: a Python call chain
 * and a GIL hand-off per group there, one call here. A failed job does not stop
 * the others (the caller fails the round on any error). */
static PyObject *pwrite_each(PyObject *module, PyObject *arg)
{
    PyObject *jobs_seq = PySequence_Fast(arg, "pwrite_each: jobs must be a sequence of (fd, buffers, offset)");
    if (jobs_seq == NULL)
        return NULL;
    Py_ssize_t njobs = PySequence_Fast_GET_SIZE(jobs_seq), nviews = 0, got = 0, i, j;
    PyObject **job_items = PySequence_Fast_ITEMS(jobs_seq);
    PyObject **buffer_seqs = PyMem_Calloc(njobs ? (size_t)njobs : 1, sizeof(PyObject *));
    Job *jobs = PyMem_Calloc(njobs ? (size_t)njobs : 1, sizeof(Job));
    Py_buffer *views = NULL;
    struct iovec *iov = NULL;
    PyObject *result = NULL;
    if (buffer_seqs == NULL || jobs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < njobs; i++) {
        PyObject *buffers;
        if (!PyArg_ParseTuple(job_items[i], "iOL;pwrite_each: each job is (fd, buffers, offset)",
                              &jobs[i].fd, &buffers, &jobs[i].at))
            goto done;
        if ((buffer_seqs[i] = PySequence_Fast(buffers, "pwrite_each: buffers must be a sequence")) == NULL)
            goto done;
        jobs[i].first = nviews;
        jobs[i].count = PySequence_Fast_GET_SIZE(buffer_seqs[i]);
        nviews += jobs[i].count;
    }
    views = PyMem_Calloc(nviews ? (size_t)nviews : 1, sizeof(Py_buffer));
    iov = PyMem_Calloc(nviews ? (size_t)nviews : 1, sizeof(struct iovec));
    if (views == NULL || iov == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < njobs; i++) {
        PyObject **items = PySequence_Fast_ITEMS(buffer_seqs[i]);
        for (j = 0; j < jobs[i].count; j++, got++) {
            if (get_bytes(items[j], &views[got]) < 0)
                goto done;
            iov[got].iov_base = views[got].buf;
            iov[got].iov_len = (size_t)views[got].len;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < njobs; i++)
        jobs[i].err = write_whole(jobs[i].fd, iov + jobs[i].first, jobs[i].count, jobs[i].at);
    Py_END_ALLOW_THREADS
    if ((result = PyList_New(njobs)) == NULL)
        goto done;
    for (i = 0; i < njobs; i++) {
        PyObject *err = PyLong_FromLong(jobs[i].err);
        if (err == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, err);
    }
done:
    for (i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    for (i = 0; buffer_seqs != NULL && i < njobs; i++)
        Py_XDECREF(buffer_seqs[i]);
    PyMem_Free(views);
    PyMem_Free(iov);
    PyMem_Free(jobs);
    PyMem_Free(buffer_seqs);
    Py_DECREF(jobs_seq);
    return result;
}

/* CRC-32C (Castagnoli) as the `crc32c` package computes it: crc32c(b, crc32c(a)) ==
 * crc32c(a + b). SSE4.2's crc32 instruction, 8 bytes a step: every CPU with SHA
 * extensions has it (checked at import all the same: seal_frame is left out where
 * it does not). */
__attribute__((target("sse4.2")))
static uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c = ~crc & 0xFFFFFFFFu;
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
    }
    uint32_t c32 = (uint32_t)c;
    for (; len; len--, p++)
        c32 = _mm_crc32_u8(c32, *p);
    return ~c32;
}

/* A body this large is CRC'd without the GIL (the crc32c package's default). */
#define CRC_GIL_MINSIZE (32 << 10)

static int cpu_has_sse42(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
}

static void put_le(uint8_t *out, uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; i++, value >>= 8)
        out[i] = (uint8_t)value;
}

/* seal_frame(running, contents, directory, begin, data_at, line_at, prefix, suffix)
 *   -> (sums, running_hex, line, head)
 * A small logged group's seal, commit line and commit log record in one call: the
 * bodies hashed as `seal` does; the line `prefix + running_hex + suffix`
 * (herald.fragment.commits.record_affixes); and the record's head as
 * herald.fragment.commit_log_records.frame lays it out (frame: payload length and
 * CRC-32C; head: begin, data_at, line_at, directory and line lengths, little-endian
 * <QQQHH; then the directory and the line), its CRC run on over the bodies, which
 * follow it in the log unchanged. At 16 journals a round seals one such group per
 * append: three Python steps (seal, the line's JSON, the frame's struct and CRCs)
 * cost ~4 us per group against ~3 here. The GIL is dropped as `seal` drops it, and
 * for the CRC of a body of CRC_GIL_MINSIZE or more. */
static PyObject *seal_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned long long begin, data_at, line_at;
    if (nargs != 8 || !Py_IS_TYPE(args[0], &SHA1Type) || !PyBytes_Check(args[2]) || !PyBytes_Check(args[6])
            || !PyBytes_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError, "seal_frame(running: SHA1, contents, directory: bytes, begin, data_at, "
                        "line_at, prefix: bytes, suffix: bytes)");
        return NULL;
    }
    begin = PyLong_AsUnsignedLongLong(args[3]);
    data_at = PyLong_AsUnsignedLongLong(args[4]);
    line_at = PyLong_AsUnsignedLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t dir_len = PyBytes_GET_SIZE(args[2]), prefix_len = PyBytes_GET_SIZE(args[6]);
    Py_ssize_t suffix_len = PyBytes_GET_SIZE(args[7]), line_len = prefix_len + 40 + suffix_len;
    if (dir_len > 0xFFFF || line_len > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "seal_frame: directory or line longer than 65535 bytes");
        return NULL;
    }
    PyObject *sealed = seal(module, args, 2);  /* (sums, running_hex) */
    if (sealed == NULL)
        return NULL;
    PyObject *running_hex = PyTuple_GET_ITEM(sealed, 1), *line = NULL, *head = NULL, *result = NULL;
    const char *hex = PyUnicode_AsUTF8(running_hex);
    if (hex == NULL || (line = PyBytes_FromStringAndSize(NULL, line_len)) == NULL)
        goto done;
    char *l = PyBytes_AS_STRING(line);
    memcpy(l, PyBytes_AS_STRING(args[6]), (size_t)prefix_len);
    memcpy(l + prefix_len, hex, 40);
    memcpy(l + prefix_len + 40, PyBytes_AS_STRING(args[7]), (size_t)suffix_len);
    Py_ssize_t payload = 28 + dir_len + line_len;
    if ((head = PyBytes_FromStringAndSize(NULL, 8 + payload)) == NULL)
        goto done;
    uint8_t *h = (uint8_t *)PyBytes_AS_STRING(head);
    put_le(h + 8, begin, 8);
    put_le(h + 16, data_at, 8);
    put_le(h + 24, line_at, 8);
    put_le(h + 32, (uint64_t)dir_len, 2);
    put_le(h + 34, (uint64_t)line_len, 2);
    memcpy(h + 36, PyBytes_AS_STRING(args[2]), (size_t)dir_len);
    memcpy(h + 36 + dir_len, l, (size_t)line_len);
    uint32_t crc = crc32c_update(0, h + 8, (size_t)payload);
    PyObject *seq = PySequence_Fast(args[1], "seal_frame: contents must be a sequence of bytes");
    if (seq == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        Py_buffer view;
        if (get_bytes(PySequence_Fast_GET_ITEM(seq, i), &view) < 0) {
            Py_DECREF(seq);
            goto done;
        }
        if (view.len >= CRC_GIL_MINSIZE) {  /* as the crc32c package drops it for frame() */
            Py_BEGIN_ALLOW_THREADS
            crc = crc32c_update(crc, view.buf, (size_t)view.len);
            Py_END_ALLOW_THREADS
        } else {
            crc = crc32c_update(crc, view.buf, (size_t)view.len);
        }
        payload += view.len;
        PyBuffer_Release(&view);
    }
    Py_DECREF(seq);
    if (payload > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "seal_frame: a record of 4 GiB or more");
        goto done;
    }
    put_le(h, (uint64_t)payload, 4);
    put_le(h + 4, crc, 4);
    result = PyTuple_Pack(4, PyTuple_GET_ITEM(sealed, 0), running_hex, line, head);
done:
    Py_XDECREF(line);
    Py_XDECREF(head);
    Py_DECREF(sealed);
    return result;
}

static PyMethodDef module_methods[] = {
    {"sha1", (PyCFunction)(void (*)(void))new_sha1, METH_FASTCALL, "A new SHA1, optionally fed its first bytes."},
    {"update_both", (PyCFunction)(void (*)(void))update_both, METH_FASTCALL,
     "Feed the same bytes to two SHA1s in one interleaved pass."},
    {"pwrite_each", (PyCFunction)pwrite_each, METH_O,
     "Write each (fd, buffers, offset) in full, the GIL dropped once; each one's errno (0: written)."},
    {"seal", (PyCFunction)(void (*)(void))seal, METH_FASTCALL,
     "Hash a group's bodies into a running SHA1: each body's hex digest and the running one's."},
    {"seal_frame", (PyCFunction)(void (*)(void))seal_frame, METH_FASTCALL,
     "A small logged group's seal, commit line and commit log record head in one call."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef spool_native_module = {
    PyModuleDef_HEAD_INIT, "_spool_native", "The spool write path in C: paired SHA1s (SHA-NI), a group's seal, a round's writes.", -1, module_methods,
};

#endif /* HAVE_SHA_NI */

PyMODINIT_FUNC PyInit__spool_native(void)
{
#ifdef HAVE_SHA_NI
    if (!cpu_has_sha()) {
        PyErr_SetString(PyExc_ImportError, "_spool_native: this CPU has no SHA extensions");
        return NULL;
    }
    if (PyType_Ready(&SHA1Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&spool_native_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&SHA1Type);
    if (PyModule_AddObject(m, "SHA1", (PyObject *)&SHA1Type) < 0) {
        Py_DECREF(&SHA1Type);
        Py_DECREF(m);
        return NULL;
    }
    if (!cpu_has_sse42() && PyObject_DelAttrString(m, "seal_frame") < 0) {  /* CRC-32C needs it */
        Py_DECREF(m);
        return NULL;
    }
    if (spool_syncs_add(m) < 0) {  /* _spool_syncs.c */
        Py_DECREF(m);
        return NULL;
    }
    return m;
#else
    PyErr_SetString(PyExc_ImportError, "_spool_native: x86-64 with SHA extensions only");
    return NULL;
#endif
}
