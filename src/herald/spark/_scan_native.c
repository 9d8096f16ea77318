/* herald.spark._scan_native: the batch read's NDJSON block scan and UUID columns in C.
 *
 * Why: a Spark batch read spends its Python worker's CPU on turning decoded fragment
 * bytes into Arrow buffers. In numpy that is a dozen passes over each block (newline
 * search, a gather of every line's head, the UUID checks, hex decoding, the values
 * copy, then the UUID text and the clock fields), plus a join of the block's chunks:
 * 0.25-0.30 us a row outside Spark against 0.12 for a source that yields pre-built
 * Arrow (issue 15). Here one pass over each line does it all, with the GIL dropped.
 *
 * `scan_lines(parts, prefix, base, values)` scans the complete lines of the
 * concatenation of `parts` (any buffers; a line may straddle two, so the block's
 * chunks need not be joined) and returns
 *   (consumed, n, begins, ends, uuids, fast, values, offsets)
 * as bytearrays in the layouts `herald.message.columnar.Columns` holds: journal
 * offsets (int64, `base` added), 16-byte UUIDs, one byte per line saying whether
 * its UUID was read on the fast path (`{"<field>":"<36 chars>"` then `,` or `}`,
 * the line ending in `}`: `herald.message.columnar._fast_uuids`' rule), the values
 * without their newlines and int32 offsets into them. Lines off the fast path have
 * a zero UUID and always keep their bytes in `values` (with `values` false only
 * they do) so that the caller applies the per-line rules to them.
 *
 * `uuid_columns(packed, text, numbers, gregorian_offset)` turns n packed UUIDs
 * into the read's UUID columns: the 36-character lowercase text and the producer's
 * 12, and the clock (int64), flags (int32) and timestamp (int64 microseconds since
 * the Unix epoch, floor-divided as numpy does), each None unless asked for.
 *
 * Optional (setup.py): without it, `herald.spark.blocks` and `herald.spark.rows`
 * run the numpy code, which the tests hold equal to this. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint8_t HEX[256];
static uint8_t PAIRS[256][2];  /* each byte's two lowercase hex digits */
/* Where each of a UUID's 16 bytes sits (its two hex digits) in the 36-character text. */
static const uint8_t BYTE_AT[16] = {0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34};

typedef struct {
    Py_buffer *views;
    Py_ssize_t count;
} Parts;

static void release_parts(Parts *parts)
{
    for (Py_ssize_t i = 0; i < parts->count; i++)
        PyBuffer_Release(&parts->views[i]);
    PyMem_Free(parts->views);
    parts->views = NULL;
    parts->count = 0;
}

static int get_parts(PyObject *seq, Parts *parts)
{
    PyObject *fast = PySequence_Fast(seq, "parts must be a sequence of buffers");
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    parts->count = 0;
    parts->views = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
    if (parts->views == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fast, i), &parts->views[i], PyBUF_SIMPLE) < 0) {
            Py_DECREF(fast);
            release_parts(parts);
            return -1;
        }
        parts->count = i + 1;
    }
    Py_DECREF(fast);
    return 0;
}

/* Newlines in all parts, and the offset just past the last one (0 if none). */
static Py_ssize_t count_lines(const Parts *parts, Py_ssize_t *consumed)
{
    Py_ssize_t n = 0, pos = 0;
    *consumed = 0;
    for (Py_ssize_t i = 0; i < parts->count; i++) {
        const char *buf = parts->views[i].buf, *at = buf, *end = buf + parts->views[i].len;
        const char *nl;
        while (at < end && (nl = memchr(at, '\n', (size_t)(end - at))) != NULL) {
            n++;
            at = nl + 1;
            *consumed = pos + (at - buf);
        }
        pos += parts->views[i].len;
    }
    return n;
}

typedef struct {
    const Parts *parts;
    Py_ssize_t part, at;   /* where the next line starts */
    uint8_t *scratch;      /* a line that straddles parts, put together */
    size_t cap;
} Cursor;

static int grow(Cursor *c, size_t need)
{
    if (need <= c->cap)
        return 0;
    size_t cap = c->cap ? c->cap : 4096;
    while (cap < need)
        cap *= 2;
    uint8_t *p = realloc(c->scratch, cap);
    if (p == NULL)
        return -1;
    c->scratch = p;
    c->cap = cap;
    return 0;
}

/* The next line (without its newline), which the count says is there; -1 if out of memory. */
static int next_line(Cursor *c, const uint8_t **line, size_t *len)
{
    const Py_buffer *v = &c->parts->views[c->part];
    const uint8_t *buf = v->buf;
    size_t size = (size_t)v->len, at = (size_t)c->at;
    const uint8_t *nl = at < size ? memchr(buf + at, '\n', size - at) : NULL;
    if (nl != NULL) {
        *line = buf + at;
        *len = (size_t)(nl - (buf + at));
        c->at = nl - buf + 1;
        return 0;
    }
    size_t used = 0;
    for (;;) {
        size_t take = size - at;
        if (grow(c, used + take) < 0)
            return -1;
        memcpy(c->scratch + used, buf + at, take);
        used += take;
        v = &c->parts->views[++c->part];
        buf = v->buf;
        size = (size_t)v->len;
        at = 0;
        nl = size ? memchr(buf, '\n', size) : NULL;
        if (nl != NULL) {
            take = (size_t)(nl - buf);
            if (grow(c, used + take) < 0)
                return -1;
            memcpy(c->scratch + used, buf, take);
            *line = c->scratch;
            *len = used + take;
            c->at = (Py_ssize_t)take + 1;
            return 0;
        }
    }
}

/* The UUID of a line on the fast path into `out` (1), else 0. */
static int fast_uuid(const uint8_t *line, size_t len, const uint8_t *prefix, size_t plen, uint8_t *out)
{
    if (len <= plen + 37 || line[len - 1] != '}' || memcmp(line, prefix, plen) != 0)
        return 0;
    const uint8_t *u = line + plen;
    if (u[8] != '-' || u[13] != '-' || u[18] != '-' || u[23] != '-' || u[36] != '"' || (u[37] != ',' && u[37] != '}'))
        return 0;
    uint8_t bad = 0;
    for (int k = 0; k < 16; k++) {
        uint8_t hi = HEX[u[BYTE_AT[k]]], lo = HEX[u[BYTE_AT[k] + 1]];
        bad |= hi | lo;
        out[k] = (uint8_t)(hi << 4 | lo);
    }
    return (bad & 0xF0) == 0;
}

typedef struct {
    int64_t *begins, *ends;
    uint8_t *uuids, *fast, *values;
    int32_t *offsets;
} Outputs;

/* The scan proper (no Python objects touched: runs without the GIL); -1 if out of memory. */
static int scan(const Parts *parts, Py_ssize_t n, const uint8_t *prefix, size_t plen, int64_t base, int values,
                Outputs *o, size_t *written)
{
    Cursor c = {parts, 0, 0, NULL, 0};
    size_t out = 0;
    int64_t pos = base;
    o->offsets[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *line;
        size_t len;
        if (next_line(&c, &line, &len) < 0) {
            free(c.scratch);
            return -1;
        }
        o->begins[i] = pos;
        pos += (int64_t)len + 1;
        o->ends[i] = pos;
        uint8_t *uuid = o->uuids + 16 * i;
        o->fast[i] = (uint8_t)fast_uuid(line, len, prefix, plen, uuid);
        if (!o->fast[i])
            memset(uuid, 0, 16);
        if (values || !o->fast[i]) {
            memcpy(o->values + out, line, len);
            out += len;
        }
        o->offsets[i + 1] = (int32_t)out;
    }
    free(c.scratch);
    *written = out;
    return 0;
}

static PyObject *new_array(Py_ssize_t size)
{
    return PyByteArray_FromStringAndSize(NULL, size);
}

static PyObject *scan_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "scan_lines(parts, prefix, base, values)");
        return NULL;
    }
    Py_buffer prefix;
    long long base = PyLong_AsLongLong(args[2]);
    int values = PyObject_IsTrue(args[3]);
    if ((base == -1 && PyErr_Occurred()) || values < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &prefix, PyBUF_SIMPLE) < 0)
        return NULL;
    Parts parts;
    if (get_parts(args[0], &parts) < 0) {
        PyBuffer_Release(&prefix);
        return NULL;
    }
    Py_ssize_t consumed, n;
    Py_BEGIN_ALLOW_THREADS
    n = count_lines(&parts, &consumed);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL, *begins = NULL, *ends = NULL, *uuids = NULL, *fast = NULL, *vals = NULL, *offsets = NULL;
    if (consumed - n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "scan_lines: a block's values exceed 2 GiB (int32 offsets)");
        goto done;
    }
    if (!(begins = new_array(8 * n)) || !(ends = new_array(8 * n)) || !(uuids = new_array(16 * n))
        || !(fast = new_array(n)) || !(vals = new_array(consumed - n)) || !(offsets = new_array(4 * (n + 1))))
        goto done;
    Outputs o = {(int64_t *)PyByteArray_AS_STRING(begins), (int64_t *)PyByteArray_AS_STRING(ends),
                 (uint8_t *)PyByteArray_AS_STRING(uuids), (uint8_t *)PyByteArray_AS_STRING(fast),
                 (uint8_t *)PyByteArray_AS_STRING(vals), (int32_t *)PyByteArray_AS_STRING(offsets)};
    size_t written = 0;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = scan(&parts, n, prefix.buf, (size_t)prefix.len, base, values, &o, &written);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    if ((Py_ssize_t)written != consumed - n && PyByteArray_Resize(vals, (Py_ssize_t)written) < 0)
        goto done;
    result = Py_BuildValue("nnOOOOOO", consumed, n, begins, ends, uuids, fast, vals, offsets);
done:
    Py_XDECREF(begins);
    Py_XDECREF(ends);
    Py_XDECREF(uuids);
    Py_XDECREF(fast);
    Py_XDECREF(vals);
    Py_XDECREF(offsets);
    release_parts(&parts);
    PyBuffer_Release(&prefix);
    return result;
}

static inline uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static void uuid_text(const uint8_t *u, uint8_t *text)
{
    for (int k = 0; k < 16; k++)
        memcpy(text + BYTE_AT[k], PAIRS[u[k]], 2);
    text[8] = text[13] = text[18] = text[23] = '-';
}

static PyObject *uuid_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "uuid_columns(packed, text, numbers, gregorian_offset)");
        return NULL;
    }
    int want_text = PyObject_IsTrue(args[1]), want_numbers = PyObject_IsTrue(args[2]);
    long long gregorian = PyLong_AsLongLong(args[3]);
    if (want_text < 0 || want_numbers < 0 || (gregorian == -1 && PyErr_Occurred()))
        return NULL;
    Py_buffer packed;
    if (PyObject_GetBuffer(args[0], &packed, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *text = NULL, *producer = NULL, *clock = NULL, *flags = NULL, *micros = NULL;
    if (packed.len % 16) {
        PyErr_SetString(PyExc_ValueError, "uuid_columns: packed UUIDs are 16 bytes each");
        goto done;
    }
    Py_ssize_t n = packed.len / 16;
    if (want_text && (!(text = new_array(36 * n)) || !(producer = new_array(12 * n))))
        goto done;
    if (want_numbers && (!(clock = new_array(8 * n)) || !(flags = new_array(4 * n)) || !(micros = new_array(8 * n))))
        goto done;
    uint8_t *t = text ? (uint8_t *)PyByteArray_AS_STRING(text) : NULL;
    uint8_t *p = producer ? (uint8_t *)PyByteArray_AS_STRING(producer) : NULL;
    int64_t *c = clock ? (int64_t *)PyByteArray_AS_STRING(clock) : NULL;
    int32_t *f = flags ? (int32_t *)PyByteArray_AS_STRING(flags) : NULL;
    int64_t *m = micros ? (int64_t *)PyByteArray_AS_STRING(micros) : NULL;
    const uint8_t *all = packed.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *u = all + 16 * i;
        if (t != NULL) {
            uuid_text(u, t + 36 * i);
            memcpy(p + 12 * i, t + 36 * i + 24, 12);
        }
        if (c != NULL) {
            uint64_t ts = (uint64_t)be32(u) | (uint64_t)be16(u + 4) << 32 | (uint64_t)(be16(u + 6) & 0x0FFF) << 48;
            uint16_t seq = be16(u + 8);
            c[i] = (int64_t)(ts << 4 | ((uint64_t)(seq >> 10) & 0xF));
            f[i] = seq & 0x3FF;
            int64_t since = (int64_t)ts - (int64_t)gregorian, q = since / 10;
            m[i] = (since % 10 < 0) ? q - 1 : q;  /* floor, as numpy's // */
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("OOOOO", text ? text : Py_None, producer ? producer : Py_None, clock ? clock : Py_None,
                           flags ? flags : Py_None, micros ? micros : Py_None);
done:
    Py_XDECREF(text);
    Py_XDECREF(producer);
    Py_XDECREF(clock);
    Py_XDECREF(flags);
    Py_XDECREF(micros);
    PyBuffer_Release(&packed);
    return result;
}

static PyMethodDef module_methods[] = {
    {"scan_lines", (PyCFunction)(void (*)(void))scan_lines, METH_FASTCALL,
     "Scan the complete NDJSON lines of a block's parts: positions, fast-path UUIDs, values and offsets."},
    {"uuid_columns", (PyCFunction)(void (*)(void))uuid_columns, METH_FASTCALL,
     "Packed UUIDs to their text, producer text, clock, flags and timestamp columns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_native_module = {
    PyModuleDef_HEAD_INIT, "_scan_native", "The batch read's NDJSON block scan and UUID columns in C.", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__scan_native(void)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 256; i++) {
        PAIRS[i][0] = (uint8_t)digits[i >> 4];
        PAIRS[i][1] = (uint8_t)digits[i & 0xF];
    }
    memset(HEX, 0xFF, sizeof HEX);
    for (int i = 0; i < 10; i++)
        HEX['0' + i] = (uint8_t)i;
    for (int i = 0; i < 6; i++) {
        HEX['a' + i] = (uint8_t)(10 + i);
        HEX['A' + i] = (uint8_t)(10 + i);
    }
    return PyModule_Create(&scan_native_module);
}
