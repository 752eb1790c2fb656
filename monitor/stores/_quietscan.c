/* _quietscan: one channel's stored readings stepped in C, handing Python only those that can change the check
 * engine's state (monitor/audit_scan.py, for `pretreat audit`).
 *
 * Why: the audit replays every stored reading through the engine (`monitor.checks.engine.Processor`). Nearly all
 * of them are quiet: good, inside the channel's quiet band [lo, hi], before the band's deadline ``until`` and no
 * further than ``max_gap`` from the previous reading. A quiet reading only moves the processor's ``last``/``gv``
 * and, while a slug baseline minute is accumulating, adds its value to that minute's sum. In Python each costs
 * ~1 µs of CPU, most of it making the row's Python objects; here it is one sqlite3_step and four comparisons.
 *
 * `Scanner.next(lo, hi, until, gap, last, gv, acc)` runs the quiet-band test of `Processor.good` on each row in
 * (time, seq) order, with exactly the engine's comparisons on the same IEEE doubles, and stops at the first row
 * that fails it (a bad quality, a NULL value, outside the band, at or after the deadline, or more than ``gap``
 * after the previous reading): that row goes back to Python, which judges it with the engine's slow path and
 * calls again with the new band. ``acc`` (None: no baseline accumulating) is the slug minute's sum so far; the
 * quiet values are added to it one by one in row order, as `SlugDetector.add_quiet` adds them, so the sum is
 * the engine's to the bit (no compiler contraction: setup.py builds with -ffp-contract=off).
 *
 * The same test is registered on the scanner's connection as the SQL function quiet(time, value, quality): a
 * statement that filters with ``NOT quiet(...)`` lets SQLite skip quiet rows inside its scan (no return from
 * sqlite3_step per row). Valid only while SQLite visits the rows in (time, seq) order: `next` raises Error if
 * the statement sorted (several channel ids: run those without the filter, the loop tests each row).
 *
 * A row with a column of an unexpected storage class (the table is STRICT, so only a damaged or hand-made file
 * has one) is never tested here: it goes back to Python as the sqlite3 module would have read it.
 *
 * The scanner opens the historian read-only with the SQLite C API (the process's one libsqlite3, see setup.py)
 * and releases the GIL while it steps. One scanner is used by one thread at a time (a second caller while it
 * steps gets RuntimeError). Licence: Apache-2.0, as the rest of pretreat-monitor.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <sqlite3.h>
#include <stdint.h>

static PyObject *QuietError;

typedef struct {
    PyObject_HEAD
    sqlite3 *db;
    sqlite3_stmt *st;
    sqlite3_int64 over;  /* the quality code judged with its number (over_range), besides 0 (good) */
    int busy;            /* a call is stepping (the GIL released) */
    int done;            /* SQLITE_DONE seen */
    /* the processor's state during a call of next(): band, gap, last reading, slug minute's sum */
    double lo, hi, until, gap, last, gv, sum;
    int accumulating;
    int filtered;        /* SQLite has called quiet() */
    long long quiet;     /* quiet readings taken in this call */
} Scanner;

/* `Processor.good`'s fast path, comparison for comparison: take a quiet reading (1) or leave it to Python (0).
 * Its callers check the storage classes first (a NULL value is a bad reading; another class is unexpected) and
 * only then read the values (reading a value can convert it, and its class with it). */
static inline int take_quiet(Scanner *s, double t, double v, sqlite3_int64 q) {
    if (q != 0 && q != s->over)
        return 0;  /* a bad reading: Python judges it */
    if (!(t < s->until && t - s->last <= s->gap && s->lo <= v && v <= s->hi))
        return 0;
    s->last = t;
    s->gv = v;
    if (s->accumulating)
        s->sum += v;
    s->quiet++;
    return 1;
}

/* SQL function quiet(time, value, quality): `take_quiet` evaluated by SQLite inside the scan, so that a quiet
 * row never leaves the virtual machine. Only valid while rows are visited in (time, seq) order (one channel id:
 * the primary key's order; `next` refuses a statement that sorted). Not deterministic: it has state. */
static void quiet_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    Scanner *s = sqlite3_user_data(ctx);
    s->filtered = 1;
    int quiet = sqlite3_value_type(argv[0]) == SQLITE_FLOAT && sqlite3_value_type(argv[1]) == SQLITE_FLOAT
                && sqlite3_value_type(argv[2]) == SQLITE_INTEGER
                && take_quiet(s, sqlite3_value_double(argv[0]), sqlite3_value_double(argv[1]),
                              sqlite3_value_int64(argv[2]));
    sqlite3_result_int(ctx, quiet);
}

/* `take_quiet` on the statement's current row (time, value, quality) */
static inline int take_row(Scanner *s, sqlite3_stmt *st) {
    return sqlite3_column_type(st, 0) == SQLITE_FLOAT && sqlite3_column_type(st, 1) == SQLITE_FLOAT
           && sqlite3_column_type(st, 2) == SQLITE_INTEGER
           && take_quiet(s, sqlite3_column_double(st, 0), sqlite3_column_double(st, 1), sqlite3_column_int64(st, 2));
}

static void set_sqlite_error(Scanner *s, const char *what) {
    PyErr_Format(QuietError, "%s: %s", what, s->db ? sqlite3_errmsg(s->db) : "out of memory opening the database");
}

static void scanner_close_handles(Scanner *s) {
    sqlite3_finalize(s->st);
    s->st = NULL;
    sqlite3_close(s->db);
    s->db = NULL;
}

static void Scanner_dealloc(Scanner *s) {
    scanner_close_handles(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int bind_params(Scanner *s, PyObject *params) {
    Py_ssize_t n = PyTuple_GET_SIZE(params);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyTuple_GET_ITEM(params, i);
        int rc;
        if (PyLong_Check(p)) {
            long long x = PyLong_AsLongLong(p);
            if (x == -1 && PyErr_Occurred())
                return -1;
            rc = sqlite3_bind_int64(s->st, (int)i + 1, x);
        } else if (PyFloat_Check(p)) {
            rc = sqlite3_bind_double(s->st, (int)i + 1, PyFloat_AS_DOUBLE(p));
        } else {
            PyErr_SetString(PyExc_TypeError, "parameters: int or float only");
            return -1;
        }
        if (rc != SQLITE_OK) {
            set_sqlite_error(s, "binding a parameter");
            return -1;
        }
    }
    return 0;
}

static int Scanner_init(Scanner *s, PyObject *args, PyObject *kwds) {
    const char *uri, *sql;
    PyObject *params;
    long long over;
    int busy_ms;
    static char *kwlist[] = {"uri", "sql", "params", "over_range", "busy_ms", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ssO!Li", kwlist, &uri, &sql, &PyTuple_Type, &params, &over,
                                     &busy_ms))
        return -1;
    if (s->db || s->busy) {
        PyErr_SetString(PyExc_RuntimeError, "scanner already open");
        return -1;
    }
    s->over = over;
    s->done = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(s->db, busy_ms);
        rc = sqlite3_create_function(s->db, "quiet", 3, SQLITE_UTF8 | SQLITE_DIRECTONLY, s, quiet_fn, NULL, NULL);
    }
    if (rc == SQLITE_OK) {
        rc = sqlite3_prepare_v2(s->db, sql, -1, &s->st, NULL);
    }
    Py_END_ALLOW_THREADS
    if (rc != SQLITE_OK) {
        set_sqlite_error(s, "opening the historian");
        scanner_close_handles(s);
        return -1;
    }
    if (sqlite3_column_count(s->st) != 3) {
        PyErr_SetString(PyExc_ValueError, "sql must select (time, value, quality)");
        scanner_close_handles(s);
        return -1;
    }
    if (bind_params(s, params)) {
        scanner_close_handles(s);
        return -1;
    }
    return 0;
}

/* A column as Python's sqlite3 module returns it (no converters). */
static PyObject *column_object(sqlite3_stmt *st, int i) {
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER:
        return PyLong_FromLongLong(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT:
        return PyFloat_FromDouble(sqlite3_column_double(st, i));
    case SQLITE_TEXT:
        return PyUnicode_DecodeUTF8((const char *)sqlite3_column_text(st, i), sqlite3_column_bytes(st, i), NULL);
    case SQLITE_BLOB:
        return PyBytes_FromStringAndSize((const char *)sqlite3_column_blob(st, i), sqlite3_column_bytes(st, i));
    default:
        return Py_NewRef(Py_None);
    }
}

PyDoc_STRVAR(next_doc,
"next(lo, hi, until, gap, last, gv, acc) -> (quiet, last, gv, acc, row)\n\n"
"Step past the quiet readings (see the module doc) and return how many there were, the processor's new\n"
"``last`` and ``gv``, the slug minute's new sum (``acc`` as given when None) and the row that stopped the scan,\n"
"(time, value, quality) as the sqlite3 module reads it, or None at the end of the rows.");

static PyObject *Scanner_next(Scanner *s, PyObject *args) {
    double lo, hi, until, gap, last, gv;
    PyObject *acc;
    if (!PyArg_ParseTuple(args, "ddddddO", &lo, &hi, &until, &gap, &last, &gv, &acc))
        return NULL;
    double sum = 0.0;
    int accumulating = acc != Py_None;
    if (accumulating) {
        sum = PyFloat_AsDouble(acc);
        if (sum == -1.0 && PyErr_Occurred())
            return NULL;
    }
    if (s->busy) {
        PyErr_SetString(PyExc_RuntimeError, "scanner in use by another thread");
        return NULL;
    }
    if (!s->st) {
        PyErr_SetString(PyExc_ValueError, "scanner closed");
        return NULL;
    }
    s->lo = lo; s->hi = hi; s->until = until; s->gap = gap; s->last = last; s->gv = gv;
    s->sum = sum; s->accumulating = accumulating; s->quiet = 0;
    int rc = SQLITE_DONE;
    if (!s->done) {
        sqlite3_stmt *st = s->st;
        s->busy = 1;
        Py_BEGIN_ALLOW_THREADS
        /* a statement filtering with quiet() returns only rows it refused, which fail here too (same state) */
        while ((rc = sqlite3_step(st)) == SQLITE_ROW && take_row(s, st))
            ;
        Py_END_ALLOW_THREADS
        s->busy = 0;
        if (rc == SQLITE_DONE)
            s->done = 1;
        else if (rc != SQLITE_ROW) {
            set_sqlite_error(s, "reading the historian");
            return NULL;
        }
        if (s->filtered && (sqlite3_stmt_status(st, SQLITE_STMTSTATUS_SORT, 0)
                            || sqlite3_stmt_status(st, SQLITE_STMTSTATUS_AUTOINDEX, 0))) {
            PyErr_SetString(QuietError, "the statement sorted its rows: quiet() needs them in (time, seq) order");
            return NULL;
        }
    }
    PyObject *row = NULL;
    if (rc == SQLITE_ROW) {
        PyObject *t = column_object(s->st, 0), *v = column_object(s->st, 1), *q = column_object(s->st, 2);
        if (t && v && q)
            row = PyTuple_Pack(3, t, v, q);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(q);
        if (!row)
            return NULL;
    } else {
        row = Py_NewRef(Py_None);
    }
    PyObject *acc_out = accumulating ? PyFloat_FromDouble(s->sum) : Py_NewRef(Py_None);
    if (!acc_out) {
        Py_DECREF(row);
        return NULL;
    }
    return Py_BuildValue("(LddNN)", s->quiet, s->last, s->gv, acc_out, row);
}

PyDoc_STRVAR(close_doc, "close(): release the statement and the connection (the rows not read are dropped).");

static PyObject *Scanner_close(Scanner *s, PyObject *unused) {
    (void)unused;
    if (s->busy) {
        PyErr_SetString(PyExc_RuntimeError, "scanner in use by another thread");
        return NULL;
    }
    scanner_close_handles(s);
    Py_RETURN_NONE;
}

static PyMethodDef Scanner_methods[] = {
    {"next", (PyCFunction)Scanner_next, METH_VARARGS, next_doc},
    {"close", (PyCFunction)Scanner_close, METH_NOARGS, close_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(Scanner_doc,
"Scanner(uri, sql, params, over_range, busy_ms)\n\n"
"Open ``uri`` (an SQLite URI, read-only) and prepare ``sql``, which selects (time, value, quality) of one\n"
"channel's readings in (time, seq) order, with ``params`` (ints and floats) bound. ``over_range``: the quality\n"
"code judged with its number like good (0). Raises _quietscan.Error with SQLite's message when the file cannot\n"
"be read.");

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "monitor.stores._quietscan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = Scanner_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_quietscan",
    "One channel's readings stepped in C past the check engine's quiet band (see monitor/audit_scan.py).", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__quietscan(void) {
    if (PyType_Ready(&ScannerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    QuietError = PyErr_NewException("_quietscan.Error", NULL, NULL);
    if (PyModule_AddObjectRef(m, "Error", QuietError) < 0
        || PyModule_AddObjectRef(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
