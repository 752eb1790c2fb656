/* _dayaccrue: the day aggregates' accrual of ordinary readings in C (monitor/reports/aggregates.py,
 * `DailyAggregator.observe` and `_Chan.sample`).
 *
 * Why: every reading the daemon records is accrued to its channel's day (counts, min/max, sum, the held-value
 * integral and the covered time). In Python that is ~0.7 µs of CPU a reading, the largest share of what the
 * daemon spends per poll besides the poll itself (bench/bench_peers.py, flat out). Nearly every reading is the
 * ordinary case `_Chan.sample` writes out inline: in order, of the cursor's day, no maintenance pending, and
 * (a good one) within the max gap of the previous good reading of the same day, with no excursion in progress, no
 * totaliser and no maintenance stretch. Here that case is a few pointer loads, the same comparisons and the same
 * IEEE additions and products, in the same order. A flow rate's rolling peak is `_Chan.rolling` (and the
 * `PeakWindow` methods it calls) written out here, on the window's ``array('d')`` through the buffer protocol
 * (Python's `_Chan.rolling` when the window is not as expected); a pH or band channel's excursion test is
 * `_Chan.excursion` itself, called from here, except for a reading inside the range with no excursion open
 * (``ok_lo``/``ok_hi``), which it would not change.
 *
 * `run(samples, start, chans, good, maintenance)` walks ``samples`` (a list or tuple of `Sample`) from ``start``,
 * accrues each ordinary reading, and returns the index of the first sample Python must accrue (or
 * ``len(samples)``): a sample of another type or of a channel not in ``chans`` (Python counts it), a maintenance
 * sample, a time or a good value that is not a float, and every case `_Chan.sample` does not write out inline.
 * Nothing is changed for a sample handed to Python: every test is made before the first field is written. State
 * fields that are neither floats nor integers a double holds exactly (|n| <= 2**53, as Python compares them) go to
 * Python too; so do sums that are not floats, and counts that are not ints.
 *
 * `bind(Sample, _Chan, DayCursor, _Day, PeakWindow, peak_window)` must be called once first: it reads where the
 * slotted classes keep each field (their member descriptors' offsets), so a field is one pointer load, not an attribute look-up. Objects of
 * other types are left to Python. Licence: Apache-2.0, as the rest of pretreat-monitor.
 */

#include "../_slots.h"

static PyTypeObject *sample_type, *chan_type, *cursor_type, *day_type, *window_type;
static Py_ssize_t s_time, s_site, s_channel, s_value, s_quality;
static Py_ssize_t c_last_t, c_ml, c_cursor, c_days, c_good_t, c_good_v, c_max_gap, c_outside, c_is_total, c_mseg,
    c_rolling_peak, c_violates, c_exc_start, c_ok_lo, c_ok_hi, c_window, c_run_integral;
static Py_ssize_t w_buf, w_head;
static double peak_window = 1800.0;  /* s: `plan.PEAK_WINDOW`, `bind`'s last argument */
static Py_ssize_t k_start, k_end, k_day;
static PyObject *str_rolling, *str_excursion, *str_frombytes;
static Py_ssize_t d_peak30, d_peak30_t;
static Py_ssize_t d_count, d_first_t, d_last_t, d_good, d_vsum, d_vmin, d_vmin_t, d_vmax, d_vmax_t, d_integral,
    d_covered, d_volume, d_resets;


static PyObject *bind(PyObject *Py_UNUSED(self), PyObject *args) {
    PyTypeObject *st, *ct, *kt, *dt, *wt;
    double window;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!d:bind", &PyType_Type, &st, &PyType_Type, &ct, &PyType_Type, &kt,
                          &PyType_Type, &dt, &PyType_Type, &wt, &window))
        return NULL;
    if (offset_of(st, "time", &s_time) || offset_of(st, "site", &s_site) || offset_of(st, "channel", &s_channel)
        || offset_of(st, "value", &s_value) || offset_of(st, "quality", &s_quality)
        || offset_of(ct, "last_t", &c_last_t) || offset_of(ct, "ml", &c_ml) || offset_of(ct, "cursor", &c_cursor)
        || offset_of(ct, "days", &c_days) || offset_of(ct, "good_t", &c_good_t)
        || offset_of(ct, "good_v", &c_good_v) || offset_of(ct, "max_gap", &c_max_gap)
        || offset_of(ct, "outside", &c_outside) || offset_of(ct, "is_total", &c_is_total)
        || offset_of(ct, "mseg", &c_mseg) || offset_of(ct, "rolling_peak", &c_rolling_peak)
        || offset_of(ct, "violates", &c_violates) || offset_of(ct, "exc_start", &c_exc_start)
        || offset_of(ct, "ok_lo", &c_ok_lo) || offset_of(ct, "ok_hi", &c_ok_hi)
        || offset_of(ct, "window", &c_window) || offset_of(ct, "run_integral", &c_run_integral)
        || offset_of(wt, "buf", &w_buf) || offset_of(wt, "head", &w_head) || offset_of(dt, "peak30", &d_peak30)
        || offset_of(dt, "peak30_t", &d_peak30_t)
        || offset_of(kt, "start", &k_start) || offset_of(kt, "end", &k_end) || offset_of(kt, "day", &k_day)
        || offset_of(dt, "count", &d_count) || offset_of(dt, "first_t", &d_first_t)
        || offset_of(dt, "last_t", &d_last_t) || offset_of(dt, "good", &d_good) || offset_of(dt, "vsum", &d_vsum)
        || offset_of(dt, "vmin", &d_vmin) || offset_of(dt, "vmin_t", &d_vmin_t) || offset_of(dt, "vmax", &d_vmax)
        || offset_of(dt, "vmax_t", &d_vmax_t) || offset_of(dt, "integral", &d_integral)
        || offset_of(dt, "covered", &d_covered) || offset_of(dt, "volume", &d_volume)
        || offset_of(dt, "resets", &d_resets))
        return NULL;
    Py_INCREF(st);
    Py_INCREF(ct);
    Py_INCREF(kt);
    Py_INCREF(dt);
    Py_INCREF(wt);
    Py_XSETREF(sample_type, st);
    Py_XSETREF(chan_type, ct);
    Py_XSETREF(cursor_type, kt);
    Py_XSETREF(day_type, dt);
    Py_XSETREF(window_type, wt);
    peak_window = window;
    Py_RETURN_NONE;
}

/* a count: an int that can be incremented without overflow, else 0 */
static inline int as_count(PyObject *o, long long *n) {
    if (o == NULL || !PyLong_CheckExact(o))
        return 0;
    int overflow;
    *n = PyLong_AsLongLongAndOverflow(o, &overflow);
    return !overflow && *n < LLONG_MAX;
}

/* a time field Python set: None, a float or an int (replacing it runs no code: `put`) */
static inline int is_time(PyObject *o) {
    return o != NULL && (o == Py_None || PyFloat_CheckExact(o) || PyLong_CheckExact(o));
}

/* the field holds ``v`` (a new reference, stolen; NULL: allocation failed, nothing changed) */
static inline int put(PyObject *o, Py_ssize_t off, PyObject *v) {
    if (v == NULL)
        return -1;
    PyObject *old = FIELD(o, off);
    FIELD(o, off) = v;
    Py_XDECREF(old); /* a float, an int or None: no code runs */
    return 0;
}

static inline void set_field(PyObject *o, Py_ssize_t off, PyObject *v) {
    Py_INCREF(v);
    put(o, off, v);
}

/* ``buf``'s doubles (an ``array('d')``): 1, with ``view`` to release; 0 when it is not one (Python's case) */
static int doubles(PyObject *buf, Py_buffer *view) {
    if (PyObject_GetBuffer(buf, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "d") != 0) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* `_Chan.rolling` (with `PeakWindow`'s methods) for the reading ``t``/``v`` (``tv`` its time object) and its day
 * ``acc``, the same doubles in the same order: 1 done, 0 for Python (nothing changed), -1 error. */
static int rolling_c(PyObject *ch, PyObject *tv, double t, double v, PyObject *acc) {
    PyObject *w = FIELD(ch, c_window), *run_o = FIELD(ch, c_run_integral), *peak_o = FIELD(acc, d_peak30);
    double run, peak = 0.0;
    long long head;
    if (w == NULL || !Py_IS_TYPE(w, window_type) || !as_float(run_o, &run) || peak_o == NULL
        || (peak_o != Py_None && !as_float(peak_o, &peak)) || FIELD(acc, d_peak30_t) == NULL)
        return 0;
    PyObject *buf = FIELD(w, w_buf), *head_o = FIELD(w, w_head);
    if (buf == NULL || head_o == NULL || !PyLong_CheckExact(head_o) || !as_count(head_o, &head))
        return 0;
    Py_buffer view;
    if (!doubles(buf, &view))
        return 0;
    Py_ssize_t n = view.len / 8;
    if (head < 0 || head > n || head % 3 != 0 || n % 3 != 0) {
        PyBuffer_Release(&view);
        return 0;
    }
    const double *b = (const double *)view.buf;
    int had = n > head;
    if (had)
        run = b[n - 2] + b[n - 1] * (t - b[n - 3]);
    PyBuffer_Release(&view);
    /* from here on a failure is an error, as it would be in Python: the window is being changed */
    double triple[3] = {t, run, v};
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)triple, sizeof triple);
    if (bytes == NULL)
        return -1;
    PyObject *r = PyObject_CallMethodOneArg(buf, str_frombytes, bytes);
    Py_DECREF(bytes);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    if (had && put(ch, c_run_integral, PyFloat_FromDouble(run)) < 0)
        return -1;
    double edge = t - peak_window, t_first, i_first, v_first;
    long long head0 = head;
    if (PyObject_GetBuffer(buf, &view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    n = view.len / 8;
    b = (const double *)view.buf;
    while ((n - head) / 3 > 1 && b[head + 3] <= edge) {  /* `PeakWindow.popleft`, compacting as it does */
        head += 3;
        if (head >= 3 * 256 && 2 * head >= n) {
            PyBuffer_Release(&view);
            if (PySequence_DelSlice(buf, 0, (Py_ssize_t)head) < 0)
                return -1;
            head = head0 = 0;
            if (put(w, w_head, PyLong_FromLong(0)) < 0 || PyObject_GetBuffer(buf, &view, PyBUF_C_CONTIGUOUS) < 0)
                return -1;
            n = view.len / 8;
            b = (const double *)view.buf;
        }
    }
    t_first = b[head], i_first = b[head + 1], v_first = b[head + 2];
    PyBuffer_Release(&view);
    if (head != head0 && put(w, w_head, PyLong_FromLongLong(head)) < 0)
        return -1;
    if (t_first <= edge) {
        double avg = (run - (i_first + v_first * (edge - t_first))) / peak_window;
        if (peak_o == Py_None || avg > peak) {
            if (put(acc, d_peak30, PyFloat_FromDouble(avg)) < 0)
                return -1;
            set_field(acc, d_peak30_t, tv);
        }
    }
    return 1;
}

/* Accrue the ordinary sample ``s`` to the channel ``ch``: 1 done, 0 for Python (nothing changed), -1 error. */
static int accrue(PyObject *s, PyObject *ch, PyObject *good) {
    PyObject *q = FIELD(s, s_quality), *tv = FIELD(s, s_time), *vv = FIELD(s, s_value);
    double t, last, start, end;
    if (q == NULL || !as_float(tv, &t) || !as_double(FIELD(ch, c_last_t), &last) || t < last)
        return 0; /* the first reading, a late one (counted there) */
    if (FIELD(ch, c_ml) != Py_None)
        return 0; /* a maintenance stretch to close */
    PyObject *cur = FIELD(ch, c_cursor), *days = FIELD(ch, c_days);
    if (cur == NULL || !Py_IS_TYPE(cur, cursor_type) || days == NULL || !PyDict_CheckExact(days))
        return 0;
    if (!as_double(FIELD(cur, k_start), &start) || !as_double(FIELD(cur, k_end), &end) || !(start <= t && t < end))
        return 0; /* another day than the cursor's */
    PyObject *day = FIELD(cur, k_day);
    if (day == NULL)
        return 0;
    PyObject *acc = PyDict_GetItemWithError(days, day); /* borrowed */
    if (acc == NULL)
        return PyErr_Occurred() ? -1 : 0; /* the day's first reading since the last flush */
    if (!Py_IS_TYPE(acc, day_type))
        return 0;
    long long count, ngood = 0;
    if (!as_count(FIELD(acc, d_count), &count) || !is_time(FIELD(acc, d_first_t)) || !is_time(FIELD(acc, d_last_t))
        || !is_time(FIELD(acc, d_vmin_t)) || !is_time(FIELD(acc, d_vmax_t)))
        return 0;
    if (q != good) {
        /* a bad reading (maintenance went to Python above): counted and timed, nothing else */
        PyObject *n = PyLong_FromLongLong(count + 1);
        if (put(acc, d_count, n) < 0)
            return -1;
        if (FIELD(acc, d_first_t) == Py_None)
            set_field(acc, d_first_t, tv);
        set_field(acc, d_last_t, tv);
        set_field(ch, c_last_t, tv);
        return 1;
    }
    double v, t0, v0, max_gap, vsum, integral, covered, vmin = 0.0, vmax = 0.0;
    PyObject *mseg = FIELD(ch, c_mseg), *vmin_o = FIELD(acc, d_vmin), *vmax_o = FIELD(acc, d_vmax);
    if (!as_float(vv, &v) || !as_double(FIELD(ch, c_good_t), &t0) || !as_double(FIELD(ch, c_good_v), &v0)
        || !as_double(FIELD(ch, c_max_gap), &max_gap))
        return 0;
    double gap = t - t0;
    /* `_Chan.sample`'s inline case: two readings of one day, neither down nor outside, nothing else to do; or a
     * counter's (a flow total, a sampler's count: `_Chan.interval`'s one-day case, its increase added to the day's
     * volume, a decrease counted as a reset) */
    PyObject *total = FIELD(ch, c_is_total);
    if (!(start <= t0 && gap <= max_gap) || FIELD(ch, c_outside) != Py_False
        || (total != Py_False && total != Py_True) || mseg == NULL || !PyList_CheckExact(mseg)
        || PyList_GET_SIZE(mseg) != 0)
        return 0;
    double volume = 0.0, delta = v - v0;
    long long resets = 0;
    if (total == Py_True && (!as_float(FIELD(acc, d_volume), &volume) || !as_count(FIELD(acc, d_resets), &resets)))
        return 0;
    PyObject *rolling = FIELD(ch, c_rolling_peak), *violates = FIELD(ch, c_violates);
    if ((rolling != Py_False && rolling != Py_True) || violates == NULL)
        return 0;
    /* `_Chan.excursion` changes nothing for a reading inside the range with no excursion open (and ``outside``
     * is False here): its call is skipped then */
    double ok_lo, ok_hi;
    int excursion = violates != Py_None;
    if (excursion && FIELD(ch, c_exc_start) == Py_None && as_double(FIELD(ch, c_ok_lo), &ok_lo)
        && as_double(FIELD(ch, c_ok_hi), &ok_hi) && ok_lo <= v && v <= ok_hi)
        excursion = 0;
    if (!as_count(FIELD(acc, d_good), &ngood) || !as_float(FIELD(acc, d_vsum), &vsum)
        || !as_float(FIELD(acc, d_integral), &integral) || !as_float(FIELD(acc, d_covered), &covered))
        return 0;
    if (vmin_o == NULL || (vmin_o != Py_None && !as_double(vmin_o, &vmin)) || vmax_o == NULL
        || (vmax_o != Py_None && !as_double(vmax_o, &vmax)) || FIELD(acc, d_vmin_t) == NULL
        || FIELD(acc, d_vmax_t) == NULL)
        return 0;
    /* the new values first: an allocation that fails leaves the state as it was */
    PyObject *n_count = PyLong_FromLongLong(count + 1), *n_good = PyLong_FromLongLong(ngood + 1);
    PyObject *n_vsum = PyFloat_FromDouble(vsum + v), *n_integral = PyFloat_FromDouble(integral + v0 * gap);
    PyObject *n_covered = PyFloat_FromDouble(covered + gap), *n_total = NULL;
    if (total == Py_True)
        n_total = delta < 0 ? PyLong_FromLongLong(resets + 1) : PyFloat_FromDouble(volume + delta);
    if (n_count == NULL || n_good == NULL || n_vsum == NULL || n_integral == NULL || n_covered == NULL
        || (total == Py_True && n_total == NULL)) {
        Py_XDECREF(n_count);
        Py_XDECREF(n_good);
        Py_XDECREF(n_vsum);
        Py_XDECREF(n_integral);
        Py_XDECREF(n_covered);
        Py_XDECREF(n_total);
        return -1;
    }
    Py_INCREF(tv); /* the sample's own objects, held until stored: `rolling` and `excursion` run Python code */
    Py_INCREF(vv);
    put(ch, c_last_t, Py_NewRef(tv));
    put(acc, d_count, n_count);
    if (FIELD(acc, d_first_t) == Py_None)
        set_field(acc, d_first_t, tv);
    set_field(acc, d_last_t, tv);
    put(acc, d_good, n_good);
    put(acc, d_vsum, n_vsum);
    if (vmin_o == Py_None || v < vmin) {
        set_field(acc, d_vmin, vv);
        set_field(acc, d_vmin_t, tv);
    }
    if (vmax_o == Py_None || v > vmax) {
        set_field(acc, d_vmax, vv);
        set_field(acc, d_vmax_t, tv);
    }
    put(acc, d_integral, n_integral);
    put(acc, d_covered, n_covered);
    if (n_total != NULL)
        put(acc, delta < 0 ? d_resets : d_volume, n_total);
    /* the flow rate's 30-minute peak and the pH or band excursion: `_Chan.rolling` and `_Chan.excursion`
     * themselves, in `_Chan.sample`'s order (an exception propagates as it would from there) */
    if (rolling == Py_True || excursion) {
        int failed = 0;
        Py_INCREF(acc);
        if (rolling == Py_True) {
            int done = rolling_c(ch, tv, t, v, acc);
            failed = done < 0;
            if (done == 0) {
                PyObject *r = PyObject_CallMethodObjArgs(ch, str_rolling, tv, vv, acc, NULL);
                failed = r == NULL;
                Py_XDECREF(r);
            }
        }
        if (!failed && excursion) {
            PyObject *r = PyObject_CallMethodObjArgs(ch, str_excursion, tv, vv, NULL);
            failed = r == NULL;
            Py_XDECREF(r);
        }
        Py_DECREF(acc);
        if (failed) {
            Py_DECREF(tv);
            Py_DECREF(vv);
            return -1;
        }
    }
    put(ch, c_good_t, tv);
    put(ch, c_good_v, vv);
    return 1;
}

static PyObject *run(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "run(samples, start, chans, good, maintenance)");
        return NULL;
    }
    PyObject *seq = args[0], *chans = args[2], *good = args[3], *maintenance = args[4];
    if (sample_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    if (!PyDict_CheckExact(chans) || !(PyList_CheckExact(seq) || PyTuple_CheckExact(seq))) {
        PyErr_SetString(PyExc_TypeError, "run: samples must be a list or tuple, chans a dict");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    ChannelCache cache = {.n = 0};
    int failed = 0;
    for (;; i++) {
        /* the sequence is read again each time: `_Chan.rolling` and `_Chan.excursion` run Python code */
        Py_ssize_t n = PyList_CheckExact(seq) ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
        if (i >= n || i < 0)
            break;
        PyObject *s = PyList_CheckExact(seq) ? PyList_GET_ITEM(seq, i) : PyTuple_GET_ITEM(seq, i);
        if (!Py_IS_TYPE(s, sample_type) || FIELD(s, s_quality) == maintenance)
            break;
        PyObject *site = FIELD(s, s_site), *channel = FIELD(s, s_channel);
        if (site == NULL || channel == NULL)
            break;
        PyObject *ch = channel_state(&cache, chans, site, channel);
        if (ch == NULL) {
            failed = PyErr_Occurred() != NULL;
            break; /* a channel not configured: Python counts it */
        }
        if (!Py_IS_TYPE(ch, chan_type))
            break;
        Py_INCREF(s); /* held across the Python `accrue` may call: the sample (its time and value) and the state */
        Py_INCREF(ch);
        int r = accrue(s, ch, good);
        Py_DECREF(ch);
        Py_DECREF(s);
        if (r <= 0) {
            failed = r < 0;
            break;
        }
    }
    channel_cache_clear(&cache);
    return failed ? NULL : PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(Sample, _Chan, DayCursor, _Day): where the classes keep their fields."},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(samples, start, chans, good, maintenance) -> index of the first sample Python must accrue."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dayaccrue", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dayaccrue(void) {
    str_rolling = PyUnicode_InternFromString("rolling");
    str_excursion = PyUnicode_InternFromString("excursion");
    str_frombytes = PyUnicode_InternFromString("frombytes");
    if (str_rolling == NULL || str_excursion == NULL || str_frombytes == NULL)
        return NULL;
    return PyModule_Create(&module);
}
