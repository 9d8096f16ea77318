/* herald.fragment._spool_native, its round writes: pwrite_each (see _spool_native.h). */
#include "_spool_native.h"

#include <errno.h>
#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>

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
            if (spool_get_bytes(items[j], &views[got]) < 0)
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

static PyMethodDef write_methods[] = {
    {"pwrite_each", (PyCFunction)pwrite_each, METH_O,
     "Write each (fd, buffers, offset) in full, the GIL dropped once; each one's errno (0: written)."},
    {NULL, NULL, 0, NULL},
};

int spool_writes_add(PyObject *module)
{
    return PyModule_AddFunctions(module, write_methods);
}
