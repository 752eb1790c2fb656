/* _slots.h: what the daemon's C fast paths share (monitor/checks/_quietpath.c, monitor/reports/_dayaccrue.c,
 * monitor/stores/_rowflat.c): reading the fields of slotted Python classes by offset, and reading a field as a
 * double only where Python's comparisons and arithmetic on it would give the same result.
 *
 * Why offsets: an attribute look-up costs tens of ns (type dictionary, descriptor call); a slot is a pointer at a
 * fixed offset in the object, which its member descriptor holds. A fast path reads each class's offsets once
 * (`offset_of`, in its `bind`) and checks every object's type exactly before reading a field (`FIELD`).
 * Licence: Apache-2.0, as the rest of pretreat-monitor.
 */

#ifndef PRETREAT_SLOTS_H
#define PRETREAT_SLOTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* the slot at ``off`` of ``o`` (NULL where it was never set) */
#define FIELD(o, off) (*(PyObject **)((char *)(o) + (off)))

/* where ``type`` keeps its slot ``name``; -1 with TypeError if it is not a plain slot of ``type`` (or of a base):
 * a member descriptor of another class set as a class attribute would give an offset into some other layout */
static inline int offset_of(PyTypeObject *type, const char *name, Py_ssize_t *off) {
    PyObject *d = PyObject_GetAttrString((PyObject *)type, name);
    if (d == NULL)
        return -1;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX
        || !PyType_IsSubtype(type, PyDescr_TYPE(d))) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        Py_DECREF(d);
        return -1;
    }
    Py_ssize_t at = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    if (at < (Py_ssize_t)sizeof(PyObject) || at > type->tp_basicsize - (Py_ssize_t)sizeof(PyObject *)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot inside the object", type->tp_name, name);
        return -1;
    }
    *off = at;
    return 0;
}

/* the type check a fast path's ``bind`` makes of a class whose fields it reads by offset: a plain class (the
 * metaclass ``type``), whose attributes are looked up the usual way (no __getattribute__ or __getattr__ of its own,
 * which would give Python's code other values than the slots hold); -1 with TypeError otherwise */
static inline int plain_class(PyTypeObject *type) {
    if (!Py_IS_TYPE(type, &PyType_Type) || type->tp_getattro != PyObject_GenericGetAttr) {
        PyErr_Format(PyExc_TypeError, "%s is not a plain class", type->tp_name);
        return -1;
    }
    return 0;
}

/* a float field's value, or 0 (the caller leaves the case to Python) when unset or not exactly a float */
static inline int as_float(PyObject *o, double *x) {
    if (o == NULL || !PyFloat_CheckExact(o))
        return 0;
    *x = PyFloat_AS_DOUBLE(o);
    return 1;
}

/* a number field's value: a float, or an int a double holds exactly (|x| <= 2**53: a limit written as an integer
 * in the site file), with which a double compares and subtracts as Python does it; else 0 (Python's case) */
static inline int as_double(PyObject *o, double *x) {
    if (as_float(o, x))
        return 1;
    if (o == NULL || !PyLong_CheckExact(o))
        return 0;
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || n > (1LL << 53) || n < -(1LL << 53))
        return 0; /* (PyLong_AsLongLongAndOverflow cannot fail on an int) */
    *x = (double)n;
    return 1;
}

/* (site, channel) -> a channel's state in a dict keyed by (site, channel) tuples, remembered by identity for
 * one call of a fast path (a batch interleaves few channels at a time: most look-ups build no tuple) */
#define CHANNEL_CACHE 8
typedef struct {
    PyObject *site[CHANNEL_CACHE], *channel[CHANNEL_CACHE], *state[CHANNEL_CACHE]; /* strong references */
    int n;
} ChannelCache;

/* the state of (``site``, ``channel``) in ``states`` (borrowed: from the cache, or from ``states`` once the cache
 * is full); NULL without an exception when the channel is not in ``states`` or its site or channel is not exactly
 * a str (Python's case: a subclass's hash or equality is Python code), NULL with one on failure.
 * No Python code runs here: the key's allocation could start the cyclic collector, whose finalizers could change
 * the batch a fast path is walking (its borrowed samples), so the collector is paused for the look-up. */
static inline PyObject *channel_state(ChannelCache *c, PyObject *states, PyObject *site, PyObject *channel) {
    for (int k = 0; k < c->n; k++)
        if (c->site[k] == site && c->channel[k] == channel)
            return c->state[k];
    if (!PyUnicode_CheckExact(site) || !PyUnicode_CheckExact(channel))
        return NULL;
    int collecting = PyGC_Disable();
    PyObject *key = PyTuple_Pack(2, site, channel);
    PyObject *state = key == NULL ? NULL : PyDict_GetItemWithError(states, key); /* borrowed */
    Py_XDECREF(key);
    if (collecting)
        PyGC_Enable();
    if (state != NULL && c->n < CHANNEL_CACHE) {
        c->site[c->n] = Py_NewRef(site);
        c->channel[c->n] = Py_NewRef(channel);
        c->state[c->n] = Py_NewRef(state);
        c->n++;
    }
    return state;
}

static inline void channel_cache_clear(ChannelCache *c) {
    for (int k = 0; k < c->n; k++) {
        Py_DECREF(c->site[k]);
        Py_DECREF(c->channel[k]);
        Py_DECREF(c->state[k]);
    }
    c->n = 0;
}

#endif
