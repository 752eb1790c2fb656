/* _untrack: take the daemon's samples out of the cyclic garbage collector's sight (monitor/sample.py,
 * `release_from_gc`).
 *
 * Why: a `Sample` is a slotted class, so CPython tracks every one for the cyclic collector, although a sample
 * can never be part of a reference cycle (its fields are a float, strings, a float or None and a `Quality`
 * member, none of which can refer back to a sample). The daemon keeps each sample alive for up to a historian
 * commit interval and the check engine's pending list, so at 1,000 instruments x 10 channels a second nearly
 * every one survived the youngest generation's pass and was scanned again in the middle one: ~100,000 samples
 * a pass, 30-190 ms with the GIL held, the event loop's worst stalls (bench/bench_peers.py). Untracked, a
 * sample is freed by reference counting as before and never scanned; this is what CPython itself does for
 * tuples and dicts that hold only atoms.
 *
 * `untrack(samples, type)` untracks every item of the list or tuple ``samples`` whose type is exactly ``type``
 * and returns how many it untracked; anything else is left as it is. PyObject_GC_UnTrack may be called again on
 * an untracked object (the type's dealloc does so). Licence: Apache-2.0, as the rest of pretreat-monitor.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *untrack(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *seq;
    PyTypeObject *type;
    if (!PyArg_ParseTuple(args, "OO!:untrack", &seq, &PyType_Type, &type))
        return NULL;
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "untrack: samples must be a list or a tuple");
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), done = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = items[i];
        if (Py_IS_TYPE(o, type) && PyObject_GC_IsTracked(o)) {
            PyObject_GC_UnTrack(o);
            done++;
        }
    }
    return PyLong_FromSsize_t(done);
}

static PyMethodDef methods[] = {
    {"untrack", untrack, METH_VARARGS, "untrack(samples, type) -> int: untrack the items of exactly that type"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_untrack", NULL, -1, methods};

PyMODINIT_FUNC PyInit__untrack(void) { return PyModule_Create(&module); }
