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
 *   - a register that is not an int in 0..65535 (a uint16 decoder takes any int: outside 0..2**53 it is Python's),
 *     or an offset past the registers read;
 *   - a scale or offset that is not a float, a span end that is neither a float nor an int a double holds exactly,
 *     an index outside ``out``, or an object that is not exactly a `_Target`.
 * Every good sample it makes is what Python's loop would have made: same type, same field objects (``now``, the
 * site, channel and unit strings are shared, as Python shares them), the value's float bit for bit.
 *
 * `bind(Target, Sample, good, decoders)` must be called once first: it reads where each slotted class keeps its
 * fields, and which five functions are the integer decoders (uint16, uint16 byte-swapped, int16, int16 byte-swapped,
 * uint32 ABCD), in that order. Licence: Apache-2.0, as the rest of pretreat-monitor.
 */

#include "../../monitor/_slots.h"

static PyTypeObject *target_type, *sample_type;
static PyObject *good_quality, *empty_reason;
static PyObject *decoders[5];
static Py_ssize_t t_index, t_offset, t_decode, t_site, t_channel, t_unit, t_scale, t_value_offset, t_lo, t_hi;
static Py_ssize_t s_time, s_site, s_channel, s_value, s_unit, s_quality, s_reason;

enum { UINT16, UINT16_SWAPPED, INT16, INT16_SWAPPED, UINT32_ABCD };

static PyObject *bind(PyObject *Py_UNUSED(self), PyObject *args) {
    PyTypeObject *tt, *st;
    PyObject *good, *decs;
    if (!PyArg_ParseTuple(args, "O!O!OO!:bind", &PyType_Type, &tt, &PyType_Type, &st, &good, &PyTuple_Type, &decs))
        return NULL;
    if (PyTuple_GET_SIZE(decs) != 5) {
        PyErr_SetString(PyExc_TypeError, "bind: five decoders");
        return NULL;
    }
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
     * other state (a __dict__, a weak reference slot, more slots) or a __new__ of its own must be called */
    if (st->tp_dictoffset != 0 || st->tp_weaklistoffset != 0 || st->tp_new != PyBaseObject_Type.tp_new
        || st->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + 7 * sizeof(PyObject *))) {
        PyErr_Format(PyExc_TypeError, "%s holds more than its seven fields", st->tp_name);
        return NULL;
    }
    PyObject *empty = PyUnicode_FromString("");
    if (empty == NULL)
        return NULL;
    t_index = t[0], t_offset = t[1], t_decode = t[2], t_site = t[3], t_channel = t[4], t_unit = t[5];
    t_scale = t[6], t_value_offset = t[7], t_lo = t[8], t_hi = t[9];
    s_time = s[0], s_site = s[1], s_channel = s[2], s_value = s[3], s_unit = s[4], s_quality = s[5];
    s_reason = s[6];
    Py_XSETREF(empty_reason, empty);
    Py_XSETREF(target_type, (PyTypeObject *)Py_NewRef(tt));
    Py_XSETREF(sample_type, (PyTypeObject *)Py_NewRef(st));
    Py_XSETREF(good_quality, Py_NewRef(good));
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
    /* ``values`` is not changed below: nothing here runs Python code (the list's old items are released only
     * after the loop, see ``old``), so its items and length stay as read here */
    Py_ssize_t nregs = PySequence_Fast_GET_SIZE(values);
    PyObject *const *regs = PySequence_Fast_ITEMS(values);
    Py_ssize_t i = start;
    /* the items ``out`` held before: released once the walk is over, since releasing one can run Python code
     * (a __del__) that could change ``targets``' objects or ``out`` under the loop */
    PyObject *old[64];
    int nold = 0;
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
        if (nold == 64)
            break; /* (more channels than a block of 125 registers holds twice: Python's, after the release) */
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
        old[nold++] = PyList_GET_ITEM(out, at);
        PyList_SET_ITEM(out, at, s);
    }
    for (int k = 0; k < nold; k++)
        Py_XDECREF(old[k]);
    return PyLong_FromSsize_t(i);
fail:
    for (int k = 0; k < nold; k++)
        Py_XDECREF(old[k]);
    return NULL;
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
