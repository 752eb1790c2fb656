/* _quietpath: the daemon's check engine stepping over quiet in-order readings in C (monitor/checks/engine.py,
 * `CheckEngine._process_live`).
 *
 * Why: nearly every reading the daemon judges is quiet: good, in order, inside its channel's quiet band [lo, hi],
 * before the band's deadline ``until`` and no further than ``max_gap`` from the previous reading. Such a reading
 * only moves the processor's ``last``/``glast``/``gv``, goes to the window's pending list (``pend``, moved into
 * the window arrays in bulk by `LiveProcessor.sync`) and, while a slug baseline minute accumulates, is added to
 * that minute by `SlugDetector.add_quiet`. In Python each costs ~300 ns of CPU (bench/bench_late.py); the live
 * engine's window and checkpoints made it dearer than the replay engine's `Processor.good`. Here it is a few
 * pointer loads and the same comparisons.
 *
 * `run(samples, start, procs, good, over_range)` walks ``samples`` (a list or tuple of `Sample`) from ``start``
 * and returns the index of the first sample Python must judge (or ``len(samples)``): a sample of a channel not in
 * ``procs``, a bad or value-less one, a time or value that is not a float, a reading outside the quiet test
 * (`LiveProcessor.good`'s, comparison for comparison, on the same IEEE doubles: older than ``glast``, at or after
 * ``until``, more than ``gap`` after ``last``, outside [lo, hi]). A time or value that is not a float goes to
 * Python (which judges ``float(value)``, and subtracts integer times exactly); so do processor fields that are
 * neither floats nor integers a double holds exactly (Python compares those exactly whatever their size). Nothing
 * is computed here but ``t - last``, one IEEE subtraction of a float time, as Python makes it (a float minus an
 * int is the float minus the int's double there too).
 *
 * A member of a group of several channels (a flow meter and the sampler count it paces: ``lo``/``hi`` empty,
 * its band in ``mlo``/``mhi``) is quiet on the same terms and in the group's order (after the group's newest
 * reading, or at the same time and not before it in the site file: ``rank`` against the group's ``rank``); its
 * quiet reading moves every member's ``glast`` and the group's ``rank``, as `Group.advance` does. Python's path
 * for it (`LiveProcessor.good`) appends to the window arrays at once, this one to ``pend``: the same readings
 * reach the arrays in the same order (every path that adds to the arrays moves ``pend`` there first).
 *
 * `bind(Sample, LiveProcessor, Group, pend_max)` must be called once first: it reads where the slotted classes
 * keep each field (their member descriptors' offsets), so a field is one pointer load, not an attribute look-up,
 * and how many samples a processor's ``pend`` may hold (`PEND_MAX`): a sample that finds it full is left to
 * Python. A sample, processor or group of another type is left to Python. Licence: Apache-2.0, as the rest of
 * pretreat-monitor.
 */

#include "../_slots.h"

static PyTypeObject *sample_type, *proc_type, *group_type;
static Py_ssize_t s_time, s_site, s_channel, s_value, s_quality;
static Py_ssize_t p_glast, p_until, p_last, p_gap, p_lo, p_hi, p_gv, p_acc, p_pend, p_mlo, p_mhi, p_rank, p_g;
static Py_ssize_t g_members, g_rank;
static Py_ssize_t pend_max = 64;  /* samples a processor's ``pend`` holds at most: `bind`'s third argument */
static PyObject *str_add_quiet;


static PyObject *bind(PyObject *Py_UNUSED(self), PyObject *args) {
    PyTypeObject *st, *pt, *gt;
    Py_ssize_t most;
    if (!PyArg_ParseTuple(args, "O!O!O!n:bind", &PyType_Type, &st, &PyType_Type, &pt, &PyType_Type, &gt, &most))
        return NULL;
    if (most < 1) {
        PyErr_SetString(PyExc_ValueError, "bind: the pending list's bound must be at least 1");
        return NULL;
    }
    if (offset_of(st, "time", &s_time) || offset_of(st, "site", &s_site) || offset_of(st, "channel", &s_channel)
        || offset_of(st, "value", &s_value) || offset_of(st, "quality", &s_quality)
        || offset_of(pt, "glast", &p_glast) || offset_of(pt, "until", &p_until) || offset_of(pt, "last", &p_last)
        || offset_of(pt, "gap", &p_gap) || offset_of(pt, "lo", &p_lo) || offset_of(pt, "hi", &p_hi)
        || offset_of(pt, "gv", &p_gv) || offset_of(pt, "acc", &p_acc) || offset_of(pt, "pend", &p_pend)
        || offset_of(pt, "mlo", &p_mlo) || offset_of(pt, "mhi", &p_mhi) || offset_of(pt, "rank", &p_rank)
        || offset_of(pt, "g", &p_g) || offset_of(gt, "members", &g_members) || offset_of(gt, "rank", &g_rank))
        return NULL;
    Py_INCREF(st);
    Py_INCREF(pt);
    Py_INCREF(gt);
    Py_XSETREF(sample_type, st);
    Py_XSETREF(proc_type, pt);
    Py_XSETREF(group_type, gt);
    pend_max = most;
    Py_RETURN_NONE;
}

static inline void set_field(PyObject *o, Py_ssize_t off, PyObject *v) {
    PyObject *old = FIELD(o, off);
    Py_INCREF(v);
    FIELD(o, off) = v;
    Py_XDECREF(old);  /* a float: no code runs */
}

/* A group member's quiet test beyond the window's (``v`` outside ``lo``/``hi``): its group when ``v`` is inside
 * ``mlo``/``mhi`` and the reading comes in the group's order, else NULL (Python's case). Borrowed reference. */
static PyObject *quiet_group(PyObject *p, double t, double glast, double v) {
    double mlo, mhi;
    if (!as_double(FIELD(p, p_mlo), &mlo) || !as_double(FIELD(p, p_mhi), &mhi) || !(mlo <= v && v <= mhi))
        return NULL;
    PyObject *g = FIELD(p, p_g);
    if (g == NULL || !Py_IS_TYPE(g, group_type))
        return NULL;
    PyObject *members = FIELD(g, g_members), *rank = FIELD(p, p_rank), *grank = FIELD(g, g_rank);
    if (members == NULL || !PyList_CheckExact(members) || rank == NULL || !PyLong_CheckExact(rank)
        || grank == NULL || !PyLong_CheckExact(grank))
        return NULL;
    if (!(t > glast)) {  /* same time as the group's newest reading: quiet only if not before it in the file */
        int overflow;
        long long r = PyLong_AsLongLongAndOverflow(rank, &overflow);
        if (overflow)
            return NULL;
        long long gr = PyLong_AsLongLongAndOverflow(grank, &overflow);
        if (overflow || r < gr)
            return NULL;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(members); k++)
        if (!Py_IS_TYPE(PyList_GET_ITEM(members, k), proc_type))
            return NULL;
    return g;
}

static PyObject *run(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "run(samples, start, procs, good, over_range)");
        return NULL;
    }
    PyObject *seq = args[0], *procs = args[2], *good = args[3], *over = args[4];
    if (sample_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    if (!PyDict_CheckExact(procs) || !(PyList_CheckExact(seq) || PyTuple_CheckExact(seq))) {
        PyErr_SetString(PyExc_TypeError, "run: samples must be a list or tuple, procs a dict");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    ChannelCache cache = {.n = 0};
    int failed = 0;
    for (;; i++) {
        /* the sequence is read again each time: add_quiet runs Python code */
        Py_ssize_t n = PyList_CheckExact(seq) ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
        if (i >= n || i < 0)
            break;
        PyObject *s = PyList_CheckExact(seq) ? PyList_GET_ITEM(seq, i) : PyTuple_GET_ITEM(seq, i);
        if (!Py_IS_TYPE(s, sample_type))
            break;
        PyObject *q = FIELD(s, s_quality), *tv = FIELD(s, s_time), *vv = FIELD(s, s_value);
        PyObject *site = FIELD(s, s_site), *channel = FIELD(s, s_channel);
        double t, v;
        if ((q != good && q != over) || !as_float(tv, &t) || !as_float(vv, &v) || site == NULL || channel == NULL)
            break;
        PyObject *p = channel_state(&cache, procs, site, channel);
        if (p == NULL) {
            failed = PyErr_Occurred() != NULL;
            break;  /* a channel not configured: Python counts it */
        }
        if (!Py_IS_TYPE(p, proc_type))
            break;
        double glast, until, last, gap, lo, hi;
        if (!as_double(FIELD(p, p_glast), &glast) || !as_double(FIELD(p, p_until), &until)
            || !as_double(FIELD(p, p_last), &last) || !as_double(FIELD(p, p_gap), &gap)
            || !as_double(FIELD(p, p_lo), &lo) || !as_double(FIELD(p, p_hi), &hi))
            break;
        /* `LiveProcessor.good`'s fast path */
        if (!(glast <= t && t < until && t - last <= gap))
            break;
        PyObject *g = NULL;
        if (!(lo <= v && v <= hi) && (g = quiet_group(p, t, glast, v)) == NULL)
            break;
        PyObject *pend = FIELD(p, p_pend), *acc = FIELD(p, p_acc);
        if (pend == NULL || !PyList_CheckExact(pend) || acc == NULL || FIELD(p, p_gv) == NULL)
            break;
        if (PyList_GET_SIZE(pend) >= pend_max)
            break;  /* full: Python judges this one, moving the pending samples into the window arrays first */
        set_field(p, p_last, tv);
        if (g == NULL) {
            set_field(p, p_glast, tv);
        } else {  /* `Group.advance`: every member's glast, the group's rank */
            PyObject *members = FIELD(g, g_members);
            for (Py_ssize_t k = 0; k < PyList_GET_SIZE(members); k++)
                set_field(PyList_GET_ITEM(members, k), p_glast, tv);
            set_field(g, g_rank, FIELD(p, p_rank));
        }
        set_field(p, p_gv, vv);
        if (PyList_Append(pend, s) < 0) {
            failed = 1;
            break;
        }
        if (acc != Py_None) {
            Py_INCREF(acc);
            PyObject *r = PyObject_CallMethodOneArg(acc, str_add_quiet, vv);
            Py_DECREF(acc);
            if (r == NULL) {
                failed = 1;
                break;
            }
            Py_DECREF(r);
        }
    }
    channel_cache_clear(&cache);
    return failed ? NULL : PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(Sample, LiveProcessor, Group, pend_max): where the classes keep their fields."},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(samples, start, procs, good, over_range) -> index of the first sample Python must judge."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_quietpath", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__quietpath(void) {
    str_add_quiet = PyUnicode_InternFromString("add_quiet");
    if (str_add_quiet == NULL)
        return NULL;
    return PyModule_Create(&module);
}
