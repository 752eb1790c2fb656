/* _blockdecode: a block's good readings as samples, in C (drivers/modbus/driver.py, `decode_block`).
 *
 * Why: a poll turns each register it read into a `Sample`: decode, scale, check the instrument's span, build the
 * sample. In Python that is a decoder call, an `in_span` call and the dataclass's __init__ per channel, ~0.7 µs a
 * channel with the GIL held; flat out, a sixth of the event loop's time (bench/bench_peers.py). Here it is the same
 * arithmetic and comparisons, and the sample's fields set directly.
 *
 * `run(values, targets, start, out, now)` walks the `_Target`s ``targets[start:]`` and, for each whose value is in
 * its span, stores ``Sample(now, site, channel, value, unit)`` at ``out[index]``, where ``value`` is
 * ``decode(values, offset) * scale + value_offset`` computed as Python computes it (one multiply, one add, no fused
 * multiply-add: setup.py builds this without contraction). It returns the position of the first target it leaves to
 * Python, or ``len(targets)``:
 *   - a value outside its span, NaN or infinite (`_judge` says why and builds the bad sample);
 *   - a decoder other than the five integer ones bound (bits, 32-bit floats, swapped words: struct in Python);
 *   - a register that is not exactly an int in 0..65535 (the link's words always are), or an offset past the
 *     registers read;
 *   - a scale or offset that is not a float, a span end that is neither a float nor an int a double holds exactly,
 *     an index outside ``out``, or an object that is not exactly a `_Target`.
 * Every good sample it makes is what Python's loop would have made: same type, same field objects (``now``, the
 * site, channel and unit strings are shared, as Python shares them; the quality and reason are the class's own
 * defaults), the value's float bit for bit.
 *
 * No Python code runs during a walk: the cyclic garbage collector, which a sample's allocation could start and which
 * runs finalizers (code that could change ``values``, ``out`` or a target under the walk), is paused for it and
 * resumed after, as it was; the items ``out`` held are released after the walk too, unless they are None.
 *
 * `bind(Target, Sample, defaults, decoders)` must be called once first: it reads where each slotted class keeps its
 * fields, the sample's (quality, reason) defaults, and which five functions are the integer decoders (uint16, uint16
 * byte-swapped, int16, int16 byte-swapped, uint32 ABCD), in that order. It refuses a sample class that is made
 * otherwise than by setting its seven fields (more state, a metaclass, a __new__, a __post_init__, its own
 * __setattr__, abstract). Licence: Apache-2.0, as the rest of pretreat-monitor.
 */

#include "../../monitor/_slots.h"

static PyTypeObject *target_type, *sample_type;
static PyObject *good_quality, *empty_reason; /* the class's defaults */
static PyObject *decoders[5];
static Py_ssize_t t_index, t_offset, t_decode, t_site, t_channel, t_unit, t_scale, t_value_offset, t_lo, t_hi;
static Py_ssize_t s_time, s_site, s_channel, s_value, s_unit, s_quality, s_reason;

enum { UINT16, UINT16_SWAPPED, INT16, INT16_SWAPPED, UINT32_ABCD };

static PyObject *bind(PyObject *Py_UNUSED(self), PyObject *args) {
    PyTypeObject *tt, *st;
    PyObject *defaults, *decs;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:bind", &PyType_Type, &tt, &PyType_Type, &st, &PyTuple_Type, &defaults,
                          &PyTuple_Type, &decs))
        return NULL;
    if (PyTuple_GET_SIZE(decs) != 5 || PyTuple_GET_SIZE(defaults) != 2) {
        PyErr_SetString(PyExc_TypeError, "bind: the (quality, reason) defaults and five decoders");
        return NULL;
    }
    if (plain_class(tt) || plain_class(st))
        return NULL;
    Py_ssize_t t[10], s[7]; /* (kept only once every check passed: a refused bind leaves the former one whole) */
    if (offset_of(tt, "index", &t[0]) || offset_of(tt, "offset", &t[1]) || offset_of(tt, "decode", &t[2])
        || offset_of(tt, "site", &t[3]) || offset_of(tt, "channel", &t[4]) || offset_of(tt, "unit", &t[5])
        || offset_of(tt, "scale", &t[6]) || offset_of(tt, "value_offset", &t[7]) || offset_of(tt, "lo", &t[8])
        || offset_of(tt, "hi", &t[9]))
        return NULL;
    if (offset_of(st, "time", &s[0]) || offset_of(st, "site", &s[1]) || offset_of(st, "channel", &s[2])
        || offset_of(st, "value", &s[3]) || offset_of(st, "unit", &s[4]) || offset_of(st, "quality", &s[5])
        || offset_of(st, "reason", &s[6]))
        return NULL;
    /* a sample is made here by setting its seven fields, as the dataclass's __init__ sets them: a class with any
     * other state (a __dict__, a weak reference slot, more slots), a __new__, a __post_init__ or a __setattr__ of
     * its own, or abstract, must be called (the seven offsets, inside seven slots' room, are then distinct too) */
    int distinct = 1;
    for (int a = 0; a < 7; a++)
        for (int b = a + 1; b < 7; b++)
            distinct &= s[a] != s[b];
    int post_init = PyObject_HasAttrString((PyObject *)st, "__post_init__");
    if (st->tp_dictoffset != 0 || st->tp_weaklistoffset != 0 || st->tp_new != PyBaseObject_Type.tp_new
        || st->tp_setattro != PyObject_GenericSetAttr || PyType_HasFeature(st, Py_TPFLAGS_IS_ABSTRACT) || post_init
        || st->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + 7 * sizeof(PyObject *)) || !distinct) {
        PyErr_Format(PyExc_TypeError, "%s is made otherwise than by setting its seven fields", st->tp_name);
        return NULL;
    }
    t_index = t[0], t_offset = t[1], t_decode = t[2], t_site = t[3], t_channel = t[4], t_unit = t[5];
    t_scale = t[6], t_value_offset = t[7], t_lo = t[8], t_hi = t[9];
    s_time = s[0], s_site = s[1], s_channel = s[2], s_value = s[3], s_unit = s[4], s_quality = s[5];
    s_reason = s[6];
    Py_XSETREF(target_type, (PyTypeObject *)Py_NewRef(tt));
    Py_XSETREF(sample_type, (PyTypeObject *)Py_NewRef(st));
    Py_XSETREF(good_quality, Py_NewRef(PyTuple_GET_ITEM(defaults, 0)));
    Py_XSETREF(empty_reason, Py_NewRef(PyTuple_GET_ITEM(defaults, 1)));
    for (int k = 0; k < 5; k++)
        Py_XSETREF(decoders[k], Py_NewRef(PyTuple_GET_ITEM(decs, k)));
    Py_RETURN_NONE;
}

/* register ``i`` of ``regs`` (``n`` of them) as 0..65535, or -1: Python's case */
static inline long reg_at(PyObject *const *regs, Py_ssize_t n, Py_ssize_t i) {
    if (i < 0 || i >= n || !PyLong_CheckExact(regs[i]))
        return -1;
    int overflow;
    long r = PyLong_AsLongAndOverflow(regs[i], &overflow);
    return overflow || r < 0 || r > 0xFFFF ? -1 : r;
}

/* the decoded register value (as Python's decoder returns it, then made a double exactly), or 0: Python's case */
static inline int decode(PyObject *dec, PyObject *const *regs, Py_ssize_t n, Py_ssize_t i, double *raw) {
    long r;
    if (dec == decoders[UINT16]) {
        if ((r = reg_at(regs, n, i)) < 0)
            return 0;
        *raw = (double)r;
    } else if (dec == decoders[UINT16_SWAPPED]) {
        if ((r = reg_at(regs, n, i)) < 0)
            return 0;
        *raw = (double)(((r & 0xFF) << 8) | (r >> 8));
    } else if (dec == decoders[INT16]) {
        if ((r = reg_at(regs, n, i)) < 0)
            return 0;
        *raw = (double)((r ^ 0x8000) - 0x8000);
    } else if (dec == decoders[INT16_SWAPPED]) {
        if ((r = reg_at(regs, n, i)) < 0)
            return 0;
        long s = ((r & 0xFF) << 8) | (r >> 8);
        *raw = (double)((s ^ 0x8000) - 0x8000);
    } else if (dec == decoders[UINT32_ABCD]) {
        long lo;
        if ((r = reg_at(regs, n, i)) < 0 || i > PY_SSIZE_T_MAX - 1 || (lo = reg_at(regs, n, i + 1)) < 0)
            return 0;
        *raw = (double)(((unsigned long)r << 16) | (unsigned long)lo);
    } else {
        return 0;
    }
    return 1;
}

static PyObject *run(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "run(values, targets, start, out, now)");
        return NULL;
    }
    PyObject *values = args[0], *targets = args[1], *out = args[3], *now = args[4];
    if (sample_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    if (!(PyList_CheckExact(values) || PyTuple_CheckExact(values)) || !PyTuple_CheckExact(targets)
        || !PyList_CheckExact(out) || !PyLong_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "run: values a list or tuple, targets a tuple, start an int, out a list");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(targets);
    if (start < 0 || start > n) {
        PyErr_SetString(PyExc_ValueError, "run: start outside the targets");
        return NULL;
    }
    /* No Python code runs from here to the end of the walk (the collector paused, the items ``out`` held released
     * after it): ``values``, ``out``, the targets and their fields stay as they are read here */
    int collecting = PyGC_Disable();
    Py_ssize_t nregs = PySequence_Fast_GET_SIZE(values);
    PyObject *const *regs = PySequence_Fast_ITEMS(values);
    Py_ssize_t i = start;
    PyObject *old[64]; /* the items other than None ``out`` held: releasing one can run a __del__ */
    int nold = 0;
    PyObject *result = NULL;
    for (; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(targets, i);
        if (!Py_IS_TYPE(t, target_type))
            break;
        PyObject *index = FIELD(t, t_index), *offset = FIELD(t, t_offset), *dec = FIELD(t, t_decode);
        PyObject *site = FIELD(t, t_site), *channel = FIELD(t, t_channel), *unit = FIELD(t, t_unit);
        double scale, shift, lo, hi, raw;
        if (index == NULL || offset == NULL || dec == NULL || site == NULL || channel == NULL || unit == NULL
            || !PyLong_CheckExact(index) || !PyLong_CheckExact(offset) || !as_float(FIELD(t, t_scale), &scale)
            || !as_float(FIELD(t, t_value_offset), &shift) || !as_double(FIELD(t, t_lo), &lo)
            || !as_double(FIELD(t, t_hi), &hi))
            break;
        Py_ssize_t at = PyLong_AsSsize_t(index), off = PyLong_AsSsize_t(offset);
        if (at == -1 || off == -1) {
            PyErr_Clear(); /* (-1 itself, or too large: Python's case either way) */
            break;
        }
        if (at < 0 || at >= PyList_GET_SIZE(out) || !decode(dec, regs, nregs, off, &raw))
            break;
        double value = raw * scale + shift;
        if (!(lo <= value && value <= hi && value - value == 0.0))
            break;
        PyObject *was = PyList_GET_ITEM(out, at);
        if (was != Py_None && nold == 64)
            break; /* (a full ``old``: Python's, after the release; the driver's ``out`` holds None) */
        PyObject *v = PyFloat_FromDouble(value);
        if (v == NULL)
            goto fail;
        PyObject *s = sample_type->tp_alloc(sample_type, 0);
        if (s == NULL) {
            Py_DECREF(v);
            goto fail;
        }
        FIELD(s, s_time) = Py_NewRef(now);
        FIELD(s, s_site) = Py_NewRef(site);
        FIELD(s, s_channel) = Py_NewRef(channel);
        FIELD(s, s_value) = v;
        FIELD(s, s_unit) = Py_NewRef(unit);
        FIELD(s, s_quality) = Py_NewRef(good_quality);
        FIELD(s, s_reason) = Py_NewRef(empty_reason);
        PyList_SET_ITEM(out, at, s);
        if (was == Py_None)
            Py_DECREF(was); /* (None is never freed: no code runs) */
        else
            old[nold++] = was;
    }
    result = PyLong_FromSsize_t(i);
fail:
    if (collecting)
        PyGC_Enable();
    for (int k = 0; k < nold; k++)
        Py_XDECREF(old[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS,
     "bind(Target, Sample, good, decoders): where the classes keep their fields, which decoders are the integer ones."},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(values, targets, start, out, now) -> the position of the first target Python handles, or len(targets)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_blockdecode", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__blockdecode(void) { return PyModule_Create(&module); }
