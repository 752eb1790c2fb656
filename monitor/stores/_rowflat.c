/* _rowflat: a batch of samples as the historian's row parameters, in C (monitor/stores/historian_rows.py,
 * `flatten`).
 *
 * Why: the historian's writer thread turns every sample into the parameters of its ``readings`` row, grouped by
 * channel, before SQLite inserts them. In Python that is a tuple and a dictionary look-up per sample, a tuple of
 * parameters per row, a sort and a flattening, ~0.3 µs a sample with the GIL held: flat out, time the event loop
 * polling the instruments waits for (bench/bench_peers.py). Here it is the same look-ups and one list.
 *
 * `flatten(ids, batch, seq, good, codes)` returns what `historian_rows.flatten` returns, element for element: the
 * good readings without a reason as (channel id, time, seq, value) rows and every other sample as (channel id, time,
 * seq, value, quality code, reason) rows, each kind sorted by channel id and, within a channel, in submission order
 * (Python's stable sort on the id), flattened into one list each; seq numbers are ``seq`` plus the sample's index.
 * A (site, channel, unit) not in ``ids`` raises KeyError as the Python does (the caller registers the channel and
 * asks again). It returns None, and Python flattens the batch, for anything else out of the ordinary: an object
 * that is not a `Sample`, a site, channel, unit or reason that is not exactly a str, a quality without a code, a
 * channel id that is not an int.
 *
 * `bind(Sample)` must be called once first: it reads where the slotted class keeps each field (its member
 * descriptors' offsets). Licence: Apache-2.0, as the rest of pretreat-monitor.
 */

#include "../_slots.h"

static PyTypeObject *sample_type;
static Py_ssize_t s_time, s_site, s_channel, s_value, s_unit, s_quality, s_reason;


typedef struct {
    long long id;   /* the channel id's value: the sort key */
    Py_ssize_t at;  /* the sample's index: the tie-break that makes the sort stable */
    PyObject *cid;  /* the channel id object (borrowed from ``ids``, which the caller keeps alive) */
    PyObject *code; /* the quality's code (borrowed from ``codes``); NULL for a plain row */
} Row;

static PyObject *bind(PyObject *Py_UNUSED(self), PyObject *args) {
    PyTypeObject *st;
    if (!PyArg_ParseTuple(args, "O!:bind", &PyType_Type, &st))
        return NULL;
    if (plain_class(st) || offset_of(st, "time", &s_time) || offset_of(st, "site", &s_site) || offset_of(st, "channel", &s_channel)
        || offset_of(st, "value", &s_value) || offset_of(st, "unit", &s_unit)
        || offset_of(st, "quality", &s_quality) || offset_of(st, "reason", &s_reason))
        return NULL;
    Py_INCREF(st);
    Py_XSETREF(sample_type, st);
    Py_RETURN_NONE;
}

static int by_channel(const void *a, const void *b) {
    const Row *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* the rows ``rows[0:n]`` (sorted here) as one flat list of ``width`` parameters a row */
static PyObject *flat(Row *rows, Py_ssize_t n, int width, long long seq, PyObject *const *items) {
    qsort(rows, (size_t)n, sizeof(Row), by_channel);
    PyObject *out = PyList_New(n * width);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *s = items[rows[r].at];
        PyObject *number = PyLong_FromLongLong(seq + rows[r].at);
        if (number == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyObject **slot = &PyList_GET_ITEM(out, r * width);  /* (the list's items, filled in place) */
        slot[0] = Py_NewRef(rows[r].cid);
        slot[1] = Py_NewRef(FIELD(s, s_time));
        slot[2] = number;
        slot[3] = Py_NewRef(FIELD(s, s_value));
        if (width == 6) {
            slot[4] = Py_NewRef(rows[r].code);
            slot[5] = Py_NewRef(FIELD(s, s_reason));
        }
    }
    return out;
}

static PyObject *flatten(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "flatten(ids, batch, seq, good, codes)");
        return NULL;
    }
    PyObject *ids = args[0], *batch = args[1], *seq = args[2], *good = args[3], *codes = args[4];
    if (sample_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    if (!PyDict_CheckExact(ids) || !PyDict_CheckExact(codes) || !PyLong_CheckExact(seq)
        || !(PyList_CheckExact(batch) || PyTuple_CheckExact(batch))) {
        PyErr_SetString(PyExc_TypeError, "flatten: ids and codes must be dicts, batch a list or tuple, seq an int");
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(batch);
    int overflow;
    long long first = PyLong_AsLongLongAndOverflow(seq, &overflow);
    if (overflow || first > LLONG_MAX - n)
        Py_RETURN_NONE; /* seq numbers past 2**63: Python's ints */
    PyObject *const *items = PySequence_Fast_ITEMS(batch);
    Row *rows = PyMem_Malloc(sizeof(Row) * (size_t)(n ? n : 1));
    if (rows == NULL)
        return PyErr_NoMemory();
    /* ``items`` and the samples' fields are read all along: no finalizer may run meanwhile (one could change the
     * batch), so the cyclic collector, which an allocation below could start, is paused until the end; and a site,
     * channel or unit that is not exactly a str (its __hash__ or __eq__ would be Python code) is Python's case */
    int collecting = PyGC_Disable();
    /* plain rows fill ``rows`` from the front, the others from the back (then reversed: submission order) */
    Py_ssize_t np = 0, nf = 0;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = items[i];
        if (!Py_IS_TYPE(s, sample_type)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        PyObject *site = FIELD(s, s_site), *channel = FIELD(s, s_channel), *unit = FIELD(s, s_unit);
        PyObject *q = FIELD(s, s_quality), *reason = FIELD(s, s_reason);
        if (site == NULL || channel == NULL || unit == NULL || q == NULL || reason == NULL
            || FIELD(s, s_time) == NULL || FIELD(s, s_value) == NULL || !PyUnicode_CheckExact(reason)
            || !PyUnicode_CheckExact(site) || !PyUnicode_CheckExact(channel) || !PyUnicode_CheckExact(unit)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        PyObject *key = PyTuple_Pack(3, site, channel, unit);
        if (key == NULL)
            goto done;
        PyObject *cid = PyDict_GetItemWithError(ids, key); /* borrowed */
        if (cid == NULL) {
            if (!PyErr_Occurred()) { /* a channel not registered yet: KeyError(key), as a dict says it */
                PyObject *arg = PyTuple_Pack(1, key);
                if (arg != NULL) {
                    PyErr_SetObject(PyExc_KeyError, arg);
                    Py_DECREF(arg);
                }
            }
            Py_DECREF(key);
            goto done;
        }
        Py_DECREF(key);
        long long id = PyLong_CheckExact(cid) ? PyLong_AsLongLongAndOverflow(cid, &overflow) : (overflow = 1, 0);
        if (overflow) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        int plain = q == good && PyUnicode_GET_LENGTH(reason) == 0;
        PyObject *code = NULL;
        if (!plain) {
            code = PyDict_GetItemWithError(codes, q);
            if (code == NULL) {
                if (PyErr_Occurred())
                    goto done;
                result = Py_NewRef(Py_None);
                goto done;
            }
        }
        Row row = {id, i, cid, code};
        if (plain)
            rows[np++] = row;
        else
            rows[n - 1 - nf++] = row;
    }
    for (Py_ssize_t a = n - nf, b = n - 1; a < b; a++, b--) { /* the others in submission order */
        Row x = rows[a];
        rows[a] = rows[b];
        rows[b] = x;
    }
    PyObject *p = flat(rows, np, 4, first, items);
    PyObject *f = p == NULL ? NULL : flat(rows + (n - nf), nf, 6, first, items);
    if (f != NULL)
        result = PyTuple_Pack(2, p, f);
    Py_XDECREF(p);
    Py_XDECREF(f);
done:
    if (collecting)
        PyGC_Enable();
    PyMem_Free(rows);
    return result;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(Sample): where the class keeps its fields."},
    {"flatten", (PyCFunction)(void (*)(void))flatten, METH_FASTCALL,
     "flatten(ids, batch, seq, good, codes) -> (plain, full), or None: Python flattens this batch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rowflat", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__rowflat(void) { return PyModule_Create(&module); }
