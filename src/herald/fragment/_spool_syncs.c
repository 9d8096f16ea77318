/* herald.fragment._spool_native, its streamed bodies' syncs: start_fdatasync, a
 * streamed body's data fdatasync on a native thread that never takes the GIL (see
 * _spool_native.h), and start_writeback, the write-back of its pieces started as
 * they arrive, on the same threads. Not tied to SHA-NI, but the extension only
 * loads where that is there: without it, Python's helper threads
 * (herald.fragment.fdatasyncs) sync instead, and no write-back starts early. */
#include "_spool_native.h"

#include <errno.h>
#include <fcntl.h>  /* sync_file_range: Python.h defines _GNU_SOURCE */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -- start_fdatasync: a streamed body's data fdatasync, started with no GIL ---------
 *
 * start_fdatasync(fd) -> a pending sync whose exception() waits for it (the GIL
 * dropped) and returns the OSError it met, or None: herald.fragment.fdatasyncs'
 * PendingSync, but the fdatasync runs on a native thread that never takes the GIL.
 * A Python helper needs the GIL twice per sync, to start it and to report it:
 * behind a busy event loop and a persisting thread that cost a streamed 1 MiB append
 * 0.1-0.7 ms before its data sync even began (time stamps, 1 MiB x1). The threads
 * (at most SYNC_THREADS, started on demand, then idle on a condition) take jobs in
 * order; a job is shared by its thread and its waiter and freed by whichever lets
 * go of it last. The caller keeps `fd` open until exception() returned. */
#define SYNC_THREADS 8

typedef struct SyncJob {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd, done, err, refs;
    int writeback;       /* start_writeback's job: sync_file_range of [off, off + len) */
    long long off, len;
    struct SyncJob *next;
} SyncJob;

typedef struct {
    PyObject_HEAD
    SyncJob *job;
} PendingSyncObject;

static PyTypeObject PendingSyncType;

static pthread_mutex_t sync_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sync_pool_cv = PTHREAD_COND_INITIALIZER;
static SyncJob *sync_queue_head, *sync_queue_tail;
static int sync_threads, sync_idle;

static void sync_job_release(SyncJob *job)
{
    pthread_mutex_lock(&job->mu);
    int left = --job->refs;
    pthread_mutex_unlock(&job->mu);
    if (left == 0) {
        pthread_cond_destroy(&job->cv);
        pthread_mutex_destroy(&job->mu);
        free(job);
    }
}

static void sync_job_run(SyncJob *job)
{
    int err = 0;
    if (job->writeback) {  /* nothing waits for it, nothing is reported: see start_writeback */
        (void)sync_file_range(job->fd, job->off, job->len, SYNC_FILE_RANGE_WRITE);
        sync_job_release(job);
        return;
    }
    while (fdatasync(job->fd) != 0) {
        if (errno != EINTR) {
            err = errno;
            break;
        }
    }
    pthread_mutex_lock(&job->mu);
    job->err = err;
    job->done = 1;
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
    sync_job_release(job);
}

static void *sync_thread_main(void *unused)
{
    for (;;) {
        pthread_mutex_lock(&sync_pool_mu);
        while (sync_queue_head == NULL) {
            sync_idle++;
            pthread_cond_wait(&sync_pool_cv, &sync_pool_mu);
            sync_idle--;
        }
        SyncJob *job = sync_queue_head;
        if ((sync_queue_head = job->next) == NULL)
            sync_queue_tail = NULL;
        pthread_mutex_unlock(&sync_pool_mu);
        sync_job_run(job);
    }
    return NULL;
}

/* A forked child has none of its parent's threads: it starts its own. */
static void sync_pool_after_fork(void)
{
    pthread_mutex_init(&sync_pool_mu, NULL);
    pthread_cond_init(&sync_pool_cv, NULL);
    sync_queue_head = sync_queue_tail = NULL;
    sync_threads = sync_idle = 0;
}

/* Queue `job` for a pool thread, starting one if none is idle and there is room;
 * 0, or -1 if no thread runs and none could be started (the caller syncs itself). */
static int sync_pool_submit(SyncJob *job)
{
    pthread_mutex_lock(&sync_pool_mu);
    if (sync_idle == 0 && sync_threads < SYNC_THREADS) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 64 << 10);
        if (pthread_create(&thread, &attr, sync_thread_main, NULL) == 0)
            sync_threads++;
        pthread_attr_destroy(&attr);
    }
    if (sync_threads == 0) {
        pthread_mutex_unlock(&sync_pool_mu);
        return -1;
    }
    job->next = NULL;
    if (sync_queue_tail != NULL)
        sync_queue_tail->next = job;
    else
        sync_queue_head = job;
    sync_queue_tail = job;
    pthread_cond_signal(&sync_pool_cv);
    pthread_mutex_unlock(&sync_pool_mu);
    return 0;
}

static PyObject *start_fdatasync(PyObject *module, PyObject *arg)
{
    long value = PyLong_AsLong(arg);
    if (value == -1 && PyErr_Occurred())
        return NULL;
    if (value < 0 || value > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "start_fdatasync: not a file descriptor");
        return NULL;
    }
    SyncJob *job = calloc(1, sizeof(SyncJob));
    if (job == NULL)
        return PyErr_NoMemory();
    pthread_mutex_init(&job->mu, NULL);
    pthread_cond_init(&job->cv, NULL);
    job->fd = (int)value;
    job->refs = 2;  /* the pool's and the pending sync's */
    PendingSyncObject *pending = PyObject_New(PendingSyncObject, &PendingSyncType);
    if (pending == NULL) {
        job->refs = 1;
        sync_job_release(job);
        return NULL;
    }
    pending->job = job;
    if (sync_pool_submit(job) < 0) {  /* no thread to be had: sync here, as the caller would have */
        Py_BEGIN_ALLOW_THREADS
        sync_job_run(job);
        Py_END_ALLOW_THREADS
    }
    return (PyObject *)pending;
}

/* -- start_writeback: a streamed body's write-back, started as its pieces arrive -------
 *
 * start_writeback(fd, lo, hi) -> None: sync_file_range(fd, lo, hi - lo,
 * SYNC_FILE_RANGE_WRITE) on a pool thread. The device gets a body's bytes while the
 * rest of it still arrives, so the data fdatasync at its last byte has only its tail
 * (and the journal's commit) left to write. Asynchronous and unreported: it makes
 * nothing durable (the fdatasync does [I-APPEND-3]), and its errors surface there.
 * On a pool thread, not the caller's: the call may block while ext4 allocates the
 * blocks, and the caller is the event loop. A descriptor closed (and reused) before
 * the job runs costs a write-back started elsewhere, nothing more. */
static PyObject *start_writeback(PyObject *module, PyObject *args)
{
    int fd;
    long long lo, hi;
    if (!PyArg_ParseTuple(args, "iLL:start_writeback", &fd, &lo, &hi))
        return NULL;
    if (fd < 0 || lo < 0 || hi <= lo)
        Py_RETURN_NONE;
    SyncJob *job = calloc(1, sizeof(SyncJob));
    if (job == NULL)
        return PyErr_NoMemory();
    pthread_mutex_init(&job->mu, NULL);
    pthread_cond_init(&job->cv, NULL);
    job->fd = fd;
    job->writeback = 1;
    job->off = lo;
    job->len = hi - lo;
    job->refs = 1;  /* the pool's only */
    if (sync_pool_submit(job) < 0)  /* no thread: the data sync writes it all, as before */
        sync_job_release(job);
    Py_RETURN_NONE;
}

static PyObject *pending_sync_exception(PendingSyncObject *self, PyObject *Py_UNUSED(ignored))
{
    SyncJob *job = self->job;
    int err;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&job->mu);
    while (!job->done)
        pthread_cond_wait(&job->cv, &job->mu);
    err = job->err;
    pthread_mutex_unlock(&job->mu);
    Py_END_ALLOW_THREADS
    if (err == 0)
        Py_RETURN_NONE;
    return PyObject_CallFunction(PyExc_OSError, "is", err, strerror(err));
}

static void pending_sync_dealloc(PendingSyncObject *self)
{
    sync_job_release(self->job);  /* a sync still running frees the job itself */
    PyObject_Free(self);
}

static PyMethodDef pending_sync_methods[] = {
    {"exception", (PyCFunction)pending_sync_exception, METH_NOARGS,
     "Wait for the sync (the GIL dropped); the OSError it raised, or None."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PendingSyncType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "herald.fragment._spool_native.PendingSync",
    .tp_basicsize = sizeof(PendingSyncObject),
    .tp_dealloc = (destructor)pending_sync_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An fdatasync under way on a thread of its own (see start_fdatasync).",
    .tp_methods = pending_sync_methods,
};

static PyMethodDef sync_methods[] = {
    {"start_fdatasync", (PyCFunction)start_fdatasync, METH_O,
     "Start fdatasync(fd) on a thread that never takes the GIL; its PendingSync."},
    {"start_writeback", (PyCFunction)start_writeback, METH_VARARGS,
     "Start the write-back of [lo, hi) of fd on a pool thread (no wait, no report)."},
    {NULL, NULL, 0, NULL},
};

/* Add start_fdatasync and the PendingSync type to `module`; -1 with an exception set on failure. */
int spool_syncs_add(PyObject *module)
{
    if (PyType_Ready(&PendingSyncType) < 0 || PyModule_AddFunctions(module, sync_methods) < 0)
        return -1;
    Py_INCREF(&PendingSyncType);
    if (PyModule_AddObject(module, "PendingSync", (PyObject *)&PendingSyncType) < 0) {
        Py_DECREF(&PendingSyncType);
        return -1;
    }
    pthread_atfork(NULL, NULL, sync_pool_after_fork);
    return 0;
}
