/* herald.fragment._spool_native: the spool write path in C. SHA1 objects
 * (hashlib's interface) and `update_both`, which feeds the same bytes to two of them
 * in ONE pass, their rounds interleaved; and a small group's `seal`. Its other
 * sources add the rest of the spool's write path to the same module (see
 * _spool_native.h): _spool_writes.c a round's `pwrite_each`, _spool_frames.c a
 * small logged group's `seal_frame` (seal, commit line, record), _spool_syncs.c a
 * streamed body's data sync on a thread that never takes the GIL.
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
#include "_spool_native.h"

#include <stdint.h>
#include <string.h>

#ifdef HAVE_SHA_NI
#include <cpuid.h>
#include <immintrin.h>
#endif

#define GIL_MINSIZE 2048


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

int spool_get_bytes(PyObject *arg, Py_buffer *view)
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
    if (spool_get_bytes(arg, &view) < 0)
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
    if (spool_get_bytes(args[2], &view) < 0)
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
PyObject *spool_seal(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
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
        if (spool_get_bytes(items[got], &views[got]) < 0)
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

static PyMethodDef module_methods[] = {
    {"sha1", (PyCFunction)(void (*)(void))new_sha1, METH_FASTCALL, "A new SHA1, optionally fed its first bytes."},
    {"update_both", (PyCFunction)(void (*)(void))update_both, METH_FASTCALL,
     "Feed the same bytes to two SHA1s in one interleaved pass."},
    {"seal", (PyCFunction)(void (*)(void))spool_seal, METH_FASTCALL,
     "Hash a group's bodies into a running SHA1: each body's hex digest and the running one's."},
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
    if (spool_writes_add(m) < 0 || spool_frames_add(m) < 0 || spool_syncs_add(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
#else
    PyErr_SetString(PyExc_ImportError, "_spool_native: x86-64 with SHA extensions only");
    return NULL;
#endif
}
