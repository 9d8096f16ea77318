/* herald.fragment._spool_native, its logged groups: seal_frame (see _spool_native.h).
 * A running SHA1 that is not the module's is refused by `spool_seal`. */
#include "_spool_native.h"

#ifdef HAVE_SHA_NI
#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

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
    if (nargs != 8 || !PyBytes_Check(args[2]) || !PyBytes_Check(args[6])
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
    PyObject *sealed = spool_seal(module, args, 2);  /* (sums, running_hex) */
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
        if (spool_get_bytes(PySequence_Fast_GET_ITEM(seq, i), &view) < 0) {
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

static PyMethodDef frame_methods[] = {
    {"seal_frame", (PyCFunction)(void (*)(void))seal_frame, METH_FASTCALL,
     "A small logged group's seal, commit line and commit log record head in one call."},
    {NULL, NULL, 0, NULL},
};

int spool_frames_add(PyObject *module)
{
    if (!cpu_has_sse42())  /* CRC-32C needs it: seal_frame is left out, Python frames */
        return 0;
    return PyModule_AddFunctions(module, frame_methods);
}
#endif /* HAVE_SHA_NI */
