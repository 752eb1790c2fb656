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
 * `insert(conn, ids, batch, seq, good, codes)` goes one step further: it inserts the batch's rows itself, through
 * the writer's own connection and inside its open transaction, with the GIL released for all of SQLite's work, and
 * returns the batch's earliest time (Python's ``min`` of the times, for the arrivals ring), or None where it leaves
 * the batch to Python (the cases above, a time or value that is not exactly a float, None or an int of 64 bits, a
 * reason Python cannot encode, no transaction open). Why: through Python's sqlite3 module every one of the batch's
 * hundreds of thousands of parameters is bound with the GIL held, and every statement of 4,096 rows hands the GIL
 * back and forth with the event loop; flat out, those stretches were time the event loop polling the instruments
 * waited (bench/RESULTS.md). The rows are the same rows (same columns, values, seq numbers, one per sample); they go
 * in sorted by channel and, within a channel, in submission order, as `flatten`'s do. A failed step raises the
 * exception Python's sqlite3 module raises for that result code (IntegrityError for a constraint, so the writer
 * retries the batch row by row; OperationalError for the file) with SQLite's message; the rows stepped before it are
 * in the transaction, which the writer rolls back, as it does after a failed multi-row statement.
 *
 * Which SQLite: the functions are looked up (dlsym) in the library Python's own ``_sqlite3`` module loaded, so the
 * connection is always used by the SQLite that opened it, never by a second copy (two copies would break each
 * other's file locks). The connection's handle is read from Python's Connection object, whose first field after
 * the object header is the ``sqlite3 *`` in every CPython from 2.5 to 3.13 (Modules/_sqlite/connection.h); Python
 * uses this path only on the versions it knows (`historian_rows`) and checks the handle names the connection's file
 * (`probe`) before the first insert.
 *
 * `bind(Sample)` must be called once first: it reads where the slotted class keeps each field (its member
 * descriptors' offsets). Licence: Apache-2.0, as the rest of pretreat-monitor.
 */

#include "../_slots.h"

#include <dlfcn.h>
#include <limits.h>
#include <string.h>

static PyTypeObject *sample_type;
static Py_ssize_t s_time, s_site, s_channel, s_value, s_unit, s_quality, s_reason;


/* where a row sorts: by channel id, then the sample's index in the batch (the tie-break that makes the sort stable,
 * as Python's sort on the id is); the first member of both walks' rows (`Row`, `Ins`), so one comparison serves */
typedef struct {
    long long id;
    Py_ssize_t at;
} Key;

static int by_channel(const void *a, const void *b) {
    const Key *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* What both walks check first: ``bind`` called, the arguments' types, seq numbers within 64 bits. Returns the batch
 * held as a tuple of the caller's own (Python code the walk may run, see `channel_id`, cannot free it) with
 * ``*first`` and ``*n`` set; None (a new reference) for Python's case; NULL with an exception. */
static PyObject *held_batch(const char *who, PyObject *ids, PyObject *batch, PyObject *seq, PyObject *codes,
                            long long *first, Py_ssize_t *n) {
    if (sample_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    if (!PyDict_CheckExact(ids) || !PyDict_CheckExact(codes) || !PyLong_CheckExact(seq)
        || !(PyList_CheckExact(batch) || PyTuple_CheckExact(batch))) {
        PyErr_Format(PyExc_TypeError, "%s: ids and codes must be dicts, batch a list or tuple, seq an int", who);
        return NULL;
    }
    *n = PySequence_Fast_GET_SIZE(batch);
    int overflow;
    *first = PyLong_AsLongLongAndOverflow(seq, &overflow);
    if (overflow || *first > LLONG_MAX - *n)
        Py_RETURN_NONE; /* seq numbers past 2**63: Python's ints */
    return PySequence_Tuple(batch);
}

typedef struct {
    Key key;        /* the channel id's value and the sample's index */
    PyObject *cid;  /* the channel id object (a reference of the row's own) */
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

/* the channel id of (site, channel, unit) in ``ids``: 1 with ``*cid`` (a new reference) and ``*id`` set; -1 with
 * KeyError(key) for a channel not registered yet, as a dict says it (the caller registers it and asks again), or
 * another error; 0 for an id that is not an int of 64 bits (Python's case).
 * The look-up may run Python code: a key registered from a str subclass compares with its own __eq__, which could
 * change the batch, a sample's fields or ``ids`` itself. So callers hold what they use afterwards (the batch as a
 * tuple of their own, every field they still need, the id) and read nothing borrowed from a sample after it. */
static int channel_id(PyObject *ids, PyObject *site, PyObject *channel, PyObject *unit, PyObject **cid, long long *id) {
    PyObject *key = PyTuple_Pack(3, site, channel, unit);
    if (key == NULL)
        return -1;
    *cid = PyDict_GetItemWithError(ids, key); /* borrowed */
    if (*cid == NULL) {
        if (!PyErr_Occurred()) {
            PyObject *arg = PyTuple_Pack(1, key);
            if (arg != NULL) {
                PyErr_SetObject(PyExc_KeyError, arg);
                Py_DECREF(arg);
            }
        }
        Py_DECREF(key);
        return -1;
    }
    Py_DECREF(key);
    Py_INCREF(*cid);
    int overflow;
    *id = PyLong_CheckExact(*cid) ? PyLong_AsLongLongAndOverflow(*cid, &overflow) : (overflow = 1, 0);
    if (overflow)
        Py_CLEAR(*cid);
    return !overflow;
}

/* whether hashing and comparing ``o`` runs no Python code: a str, or a subclass (a `Quality` member) that keeps
 * str's hash and comparison */
static inline int str_like(PyObject *o) {
    return Py_TYPE(o)->tp_hash == PyUnicode_Type.tp_hash && Py_TYPE(o)->tp_richcompare == PyUnicode_Type.tp_richcompare;
}

/* the rows ``rows[0:n]`` (sorted here) as one flat list of ``width`` parameters a row */
static PyObject *flat(Row *rows, Py_ssize_t n, int width, long long seq, PyObject *const *items) {
    qsort(rows, (size_t)n, sizeof(Row), by_channel);
    PyObject *out = PyList_New(n * width);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *s = items[rows[r].key.at];
        PyObject *number = PyLong_FromLongLong(seq + rows[r].key.at);
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
    long long first;
    Py_ssize_t n;
    PyObject *own = held_batch("flatten", ids, batch, seq, codes, &first, &n);
    if (own == NULL || own == Py_None)
        return own;
    PyObject *const *items = PySequence_Fast_ITEMS(own);
    Row *rows = PyMem_Malloc(sizeof(Row) * (size_t)(n ? n : 1));
    if (rows == NULL) {
        Py_DECREF(own);
        return PyErr_NoMemory();
    }
    /* The samples' fields are read all along: no finalizer may run meanwhile, so the cyclic collector, which an
     * allocation below could start, is paused until the end; a site, channel, unit or quality whose hash or equality
     * is not str's would run Python code, and is Python's case (but see `channel_id` for the keys in ``ids``) */
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
        int plain = q == good && PyUnicode_GET_LENGTH(reason) == 0;
        PyObject *code = NULL;
        if (!plain) {
            if (!str_like(q)) {
                result = Py_NewRef(Py_None);
                goto done;
            }
            code = PyDict_GetItemWithError(codes, q);
            if (code == NULL) {
                if (PyErr_Occurred())
                    goto done;
                result = Py_NewRef(Py_None);
                goto done;
            }
        }
        PyObject *cid; /* (looked up last: nothing borrowed from the sample is read after it) */
        long long id;
        int found = channel_id(ids, site, channel, unit, &cid, &id);
        if (found < 0)
            goto done;
        if (found == 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        Row row = {{id, i}, cid, code};
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
    for (Py_ssize_t k = 0; k < np; k++)
        Py_DECREF(rows[k].cid);
    for (Py_ssize_t k = n - nf; k < n; k++)
        Py_DECREF(rows[k].cid);
    if (collecting)
        PyGC_Enable();
    PyMem_Free(rows);
    Py_DECREF(own);
    return result;
}

/* -- the rows inserted here, the GIL released (`insert`) -------------------------------------------------------- */

/* SQLite's types and result codes, declared here rather than from sqlite3.h: the functions come from the library
 * Python loaded (`bind_sqlite`), so this module needs neither SQLite's headers nor its link at build time */
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
#define SQ_OK 0
#define SQ_DONE 101
#define SQ_NOMEM 7
#define SQ_TOOBIG 18
#define SQ_CONSTRAINT 19
#define SQ_MISMATCH 20
#define SQ_MISUSE 21
#define SQ_RANGE 25
#define SQ_STATIC ((void (*)(void *))0)

static struct {
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*bind_int64)(sqlite3_stmt *, int, long long);
    int (*bind_double)(sqlite3_stmt *, int, double);
    int (*bind_null)(sqlite3_stmt *, int);
    int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
    int (*step)(sqlite3_stmt *);
    int (*reset)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    const char *(*errmsg)(sqlite3 *);
    int (*extended_errcode)(sqlite3 *);
    int (*get_autocommit)(sqlite3 *);
    const char *(*db_filename)(sqlite3 *, const char *);
} sq;
static PyTypeObject *connection_type;  /* sqlite3.Connection, exactly */
static PyObject *sqlite_module;         /* for its exception classes */

/* Python's Connection object, as far as this module reads it */
typedef struct {
    PyObject_HEAD
    sqlite3 *db;
} ConnectionHead;

static PyObject *bind_sqlite(PyObject *Py_UNUSED(self), PyObject *args) {
    const char *library;
    PyTypeObject *ct;
    if (!PyArg_ParseTuple(args, "sO!:bind_sqlite", &library, &PyType_Type, &ct))
        return NULL;
    void *h = dlopen(library, RTLD_NOW | RTLD_NOLOAD);  /* only a library already loaded: Python's _sqlite3 */
    if (h == NULL)
        Py_RETURN_FALSE;
#define LOOK(field, name) (*(void **)&sq.field = dlsym(h, name)) == NULL
    int missing = LOOK(prepare_v2, "sqlite3_prepare_v2") || LOOK(bind_int64, "sqlite3_bind_int64")
        || LOOK(bind_double, "sqlite3_bind_double") || LOOK(bind_null, "sqlite3_bind_null")
        || LOOK(bind_text, "sqlite3_bind_text") || LOOK(step, "sqlite3_step") || LOOK(reset, "sqlite3_reset")
        || LOOK(finalize, "sqlite3_finalize") || LOOK(errmsg, "sqlite3_errmsg")
        || LOOK(extended_errcode, "sqlite3_extended_errcode")
        || LOOK(get_autocommit, "sqlite3_get_autocommit") || LOOK(db_filename, "sqlite3_db_filename");
#undef LOOK
    dlclose(h);  /* (RTLD_NOLOAD took a reference; the module itself keeps the library loaded) */
    if (missing) {
        memset(&sq, 0, sizeof sq);
        Py_RETURN_FALSE;
    }
    PyObject *m = PyImport_ImportModule("sqlite3");
    if (m == NULL)
        return NULL;
    Py_XSETREF(sqlite_module, m);
    Py_INCREF(ct);
    Py_XSETREF(connection_type, ct);
    Py_RETURN_TRUE;
}

static sqlite3 *handle(PyObject *conn) {
    if (connection_type == NULL || sq.step == NULL || !Py_IS_TYPE(conn, connection_type))
        return NULL;
    return ((ConnectionHead *)conn)->db;
}

/* `probe(conn)`: the main database file's name as SQLite itself has it on this connection's handle ("" for an
 * in-memory database), or None when the handle cannot be read; Python compares it with PRAGMA database_list */
static PyObject *probe(PyObject *Py_UNUSED(self), PyObject *conn) {
    sqlite3 *db = handle(conn);
    if (db == NULL)
        Py_RETURN_NONE;
    const char *name = sq.db_filename(db, "main");
    return PyUnicode_DecodeFSDefault(name ? name : "");
}

typedef struct {
    Key key;                 /* the channel id's value and the sample's index */
    long long ival;          /* an int value */
    double time, value;
    int vkind;               /* 0 NULL, 1 a double, 2 an int */
    int code;                /* the quality's code */
    PyObject *reason;        /* a new reference while SQLite reads its UTF-8 (NULL: the empty reason) */
    const char *text;
    Py_ssize_t len;
} Ins;

/* the exception Python's sqlite3 module raises for result code ``rc`` (Modules/_sqlite/util.c), with SQLite's
 * message (cut at 511 bytes: decoded with replacement characters) and its ``sqlite_errorcode``, the extended code
 * ``code`` (``sqlite_errorname``, which Python spells from a table of its own, is not set) */
static void raise_sqlite(int rc, int code, const char *message) {
    const char *name;
    switch (rc & 0xff) {
    case 2: case 12: name = "InternalError"; break;             /* INTERNAL, NOTFOUND */
    case 1: case 3: case 4: case 5: case 6: case 8: case 9: case 10: case 13: case 14: case 15: case 16: case 17:
        name = "OperationalError"; break;                       /* ERROR, PERM ... BUSY, READONLY, IOERR, FULL ... */
    case SQ_CONSTRAINT: case SQ_MISMATCH: name = "IntegrityError"; break;
    case SQ_TOOBIG: name = "DataError"; break;
    case SQ_MISUSE: case SQ_RANGE: name = "InterfaceError"; break;
    case SQ_NOMEM: PyErr_NoMemory(); return;
    default: name = "DatabaseError";                           /* CORRUPT, NOTADB, AUTH, FORMAT, NOLFS ... */
    }
    PyObject *cls = PyObject_GetAttrString(sqlite_module, name);
    if (cls == NULL)
        return;
    PyObject *text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
    PyObject *exc = text == NULL ? NULL : PyObject_CallOneArg(cls, text);
    PyObject *number = exc == NULL ? NULL : PyLong_FromLong(code);
    if (number != NULL && PyObject_SetAttrString(exc, "sqlite_errorcode", number) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(number);
    Py_XDECREF(exc);
    Py_XDECREF(text);
    Py_DECREF(cls);
}

static const char INSERT_SQL[] =
    "INSERT INTO readings (channel_id, time, seq, value, quality, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

static PyObject *insert(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "insert(conn, ids, batch, seq, good, codes)");
        return NULL;
    }
    PyObject *conn = args[0], *ids = args[1], *batch = args[2], *seq = args[3], *good = args[4], *codes = args[5];
    sqlite3 *db = handle(conn);
    if (db == NULL || sq.get_autocommit(db))
        Py_RETURN_NONE; /* not bound, closed, or no transaction open: Python's case */
    long long first;
    Py_ssize_t n;
    PyObject *own = held_batch("insert", ids, batch, seq, codes, &first, &n);
    if (own == NULL || own == Py_None)
        return own;
    int overflow;
    PyObject *gc = PyDict_GetItemWithError(codes, good); /* borrowed */
    long good_long = gc != NULL && PyLong_CheckExact(gc) ? PyLong_AsLongAndOverflow(gc, &overflow) : (overflow = 1, 0);
    if (overflow || good_long < INT_MIN || good_long > INT_MAX) {
        Py_DECREF(own);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE; /* no int code for a good reading: Python's case */
    }
    int good_code = (int)good_long;
    PyObject *const *items = PySequence_Fast_ITEMS(own);
    Ins *rows = PyMem_Malloc(sizeof(Ins) * (size_t)(n ? n : 1));
    if (rows == NULL) {
        Py_DECREF(own);
        return PyErr_NoMemory();
    }
    int collecting = PyGC_Disable(); /* as in `flatten`: no finalizer may change the batch while it is read */
    Py_ssize_t held = 0;              /* rows[0:held] own a reference to their reason */
    PyObject *result = NULL;
    double earliest = Py_HUGE_VAL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = items[i];
        if (!Py_IS_TYPE(s, sample_type))
            goto python;
        PyObject *site = FIELD(s, s_site), *channel = FIELD(s, s_channel), *unit = FIELD(s, s_unit);
        PyObject *q = FIELD(s, s_quality), *reason = FIELD(s, s_reason), *t = FIELD(s, s_time);
        PyObject *v = FIELD(s, s_value);
        if (site == NULL || channel == NULL || unit == NULL || q == NULL || reason == NULL || t == NULL || v == NULL
            || !PyUnicode_CheckExact(reason) || !PyUnicode_CheckExact(site) || !PyUnicode_CheckExact(channel)
            || !PyUnicode_CheckExact(unit) || !PyFloat_CheckExact(t))
            goto python;
        Ins *r = &rows[i];
        r->key.at = i;
        r->time = PyFloat_AS_DOUBLE(t);
        if (i == 0 || r->time < earliest) /* Python's min: the first, then each one less than the least so far */
            earliest = r->time;
        if (v == Py_None)
            r->vkind = 0;
        else if (PyFloat_CheckExact(v)) {
            r->vkind = 1;
            r->value = PyFloat_AS_DOUBLE(v);
        } else if (PyLong_CheckExact(v)) {
            r->vkind = 2;
            r->ival = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow)
                goto python;
        } else
            goto python;
        if (q == good)
            r->code = good_code;
        else {
            if (!str_like(q)) /* its look-up would run Python code: Python's case (a `Quality` member is str-like) */
                goto python;
            PyObject *code = PyDict_GetItemWithError(codes, q); /* borrowed */
            if (code == NULL && PyErr_Occurred())
                goto done;
            if (code == NULL || !PyLong_CheckExact(code))
                goto python; /* a quality without a code */
            long c = PyLong_AsLongAndOverflow(code, &overflow);
            if (overflow || c < INT_MIN || c > INT_MAX)
                goto python;
            r->code = (int)c;
        }
        /* the reason is held from here on: SQLite reads its UTF-8 with the GIL released, while other threads run */
        r->reason = Py_NewRef(reason);
        held = i + 1;
        r->text = "";
        r->len = 0;
        if (PyUnicode_GET_LENGTH(reason)) {
            r->text = PyUnicode_AsUTF8AndSize(reason, &r->len);
            if (r->text == NULL || r->len > INT_MAX) {
                PyErr_Clear(); /* (a lone surrogate: Python's sqlite3 module raises it, on its own path) */
                goto python;
            }
        }
        PyObject *cid; /* looked up last: nothing borrowed from the sample is read after it (see `channel_id`) */
        int found = channel_id(ids, site, channel, unit, &cid, &r->key.id);
        if (found < 0)
            goto done;
        if (found == 0)
            goto python;
        Py_DECREF(cid);
    }
    qsort(rows, (size_t)n, sizeof(Ins), by_channel);
    if (collecting) { /* nothing below reads the batch: the collector runs again for the threads that run now */
        PyGC_Enable();
        collecting = 0;
    }
    int rc = SQ_OK, code = SQ_OK;
    char message[512] = "";
    Py_BEGIN_ALLOW_THREADS
    sqlite3_stmt *st = NULL;
    rc = sq.prepare_v2(db, INSERT_SQL, -1, &st, NULL);
    for (Py_ssize_t k = 0; rc == SQ_OK && k < n; k++) {
        const Ins *r = &rows[k];
        if ((rc = sq.bind_int64(st, 1, r->key.id)) || (rc = sq.bind_double(st, 2, r->time))
            || (rc = sq.bind_int64(st, 3, first + r->key.at))
            || (rc = r->vkind == 1 ? sq.bind_double(st, 4, r->value)
                     : r->vkind == 2 ? sq.bind_int64(st, 4, r->ival) : sq.bind_null(st, 4))
            || (rc = sq.bind_int64(st, 5, r->code)) || (rc = sq.bind_text(st, 6, r->text, (int)r->len, SQ_STATIC)))
            break;
        rc = sq.step(st);
        if (rc != SQ_DONE) {
            code = sq.extended_errcode(db);
            snprintf(message, sizeof message, "%s", sq.errmsg(db));
            break;
        }
        rc = sq.reset(st);
    }
    if (rc != SQ_OK && message[0] == 0) {
        code = sq.extended_errcode(db);
        snprintf(message, sizeof message, "%s", sq.errmsg(db));
    }
    if (st != NULL)
        sq.finalize(st);
    Py_END_ALLOW_THREADS
    if (rc != SQ_OK)
        raise_sqlite(rc, code, message);
    else
        result = PyFloat_FromDouble(earliest);
    goto done;
python:
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        Py_XDECREF(rows[i].reason);
    if (collecting)
        PyGC_Enable();
    PyMem_Free(rows);
    Py_DECREF(own);
    return result;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(Sample): where the class keeps its fields."},
    {"flatten", (PyCFunction)(void (*)(void))flatten, METH_FASTCALL,
     "flatten(ids, batch, seq, good, codes) -> (plain, full), or None: Python flattens this batch."},
    {"bind_sqlite", bind_sqlite, METH_VARARGS,
     "bind_sqlite(library, Connection) -> bool: SQLite's functions from the library Python's sqlite3 loaded."},
    {"probe", probe, METH_O, "probe(conn) -> the main file's name on the connection's handle, or None."},
    {"insert", (PyCFunction)(void (*)(void))insert, METH_FASTCALL,
     "insert(conn, ids, batch, seq, good, codes) -> the earliest time, or None: Python inserts this batch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rowflat", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__rowflat(void) { return PyModule_Create(&module); }
