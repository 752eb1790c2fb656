/* _sealscan: the minute index of one channel-day of readings, computed in C (monitor/stores/seal_scan.py).
 *
 * Why: in Python each reading costs ~4 µs of CPU, nearly all of it handing the row from SQLite to Python
 * objects; here a reading is one sqlite3_step and a few stores into column buffers. The bytes produced are
 * exactly those of `monitor.stores.seal_scan.minute_index` (pinned by tests/unit/test_seal_format.py and compared
 * with the Python path over randomized days by tests/unit/test_seal_native.py):
 *   for each minute with readings, in (time, seq) order: "<HI16s" (minute of the day, count, the first 16
 *   bytes of SHA-256 over: little-endian float64 times, int64 seqs, float64 values (0 where NULL), one byte
 *   each NULL flag, one byte each quality code, uint32 reason lengths in code points, then the reasons' UTF-8).
 *
 * A Scanner opens the historian read-only with the SQLite C API (the process's one libsqlite3, the library
 * Python's sqlite3 module uses: two copies of SQLite in one process would break each other's POSIX locks),
 * prepares the SELECT it is given (seal_scan.READINGS_SQL) once and runs it for each channel-day asked, releasing
 * the GIL for all of each scan, so the daemon's event loop and other sealing threads run meanwhile (scan_day:
 * the same for one day on a connection of its own).
 *
 * A row the Python path would see differently is never guessed at: a column of an unexpected storage class
 * (the table is STRICT, so only a damaged or hand-made file has one), a quality outside 0..255, a reason that
 * is not valid UTF-8 (Python's sqlite3 refuses to decode it). Then the call returns None and the caller runs
 * the Python path for that channel-day, which behaves exactly as it always did.
 *
 * SHA-256: written for this project from FIPS 180-4 (portable C), plus the Intel SHA extensions path
 * (SHA-NI, chosen at run time by CPUID) following the instruction sequence Intel documents for them.
 * Licence: Apache-2.0, as the rest of pretreat-monitor.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define SEALSCAN_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

/* ---- SHA-256 --------------------------------------------------------------------------------------------- */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

typedef void (*blocks_fn)(uint32_t state[8], const uint8_t *data, size_t blocks);

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_blocks_c(uint32_t state[8], const uint8_t *p, size_t blocks) {
    while (blocks--) {
        uint32_t w[64];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
        for (int i = 16; i < 64; i++) {
            uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
            uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
        uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
        for (int i = 0; i < 64; i++) {
            uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
            uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
        }
        state[0] += a; state[1] += b; state[2] += c; state[3] += d;
        state[4] += e; state[5] += f; state[6] += g; state[7] += h;
        p += 64;
    }
}

#ifdef SEALSCAN_X86
/* The SHA extensions keep the state as ABEF / CDGH halves; each sha256rnds2 does two rounds, each 4-word group
 * of the message schedule is extended with sha256msg1 / sha256msg2 (W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) +
 * W[t-16]). */
__attribute__((target("sha,sse4.1,ssse3")))
static void sha256_blocks_ni(uint32_t state[8], const uint8_t *p, size_t blocks) {
    const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i st1 = _mm_loadu_si128((const __m128i *)&state[4]);
    tmp = _mm_shuffle_epi32(tmp, 0xB1);           /* CDAB */
    st1 = _mm_shuffle_epi32(st1, 0x1B);           /* EFGH */
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);   /* ABEF */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);        /* CDGH */
    while (blocks--) {
        __m128i abef = st0, cdgh = st1, w[4];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            __m128i m;
            if (i < 4)
                m = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), mask);
            else
                m = _mm_sha256msg2_epu32(
                    _mm_add_epi32(_mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]),
                                  _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4)),
                    w[(i + 3) & 3]);
            w[i & 3] = m;
            __m128i k = _mm_add_epi32(m, _mm_loadu_si128((const __m128i *)&K256[4 * i]));
            st1 = _mm_sha256rnds2_epu32(st1, st0, k);
            st0 = _mm_sha256rnds2_epu32(st0, st1, _mm_shuffle_epi32(k, 0x0E));
        }
        st0 = _mm_add_epi32(st0, abef);
        st1 = _mm_add_epi32(st1, cdgh);
        p += 64;
    }
    tmp = _mm_shuffle_epi32(st0, 0x1B);           /* FEBA */
    st1 = _mm_shuffle_epi32(st1, 0xB1);           /* DCHG */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0);        /* DCBA */
    st1 = _mm_alignr_epi8(st1, tmp, 8);           /* HGFE */
    _mm_storeu_si128((__m128i *)&state[0], st0);
    _mm_storeu_si128((__m128i *)&state[4], st1);
}

static int cpu_has_sha_ni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9)))  /* SSE4.1, SSSE3 */
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 29) & 1;  /* SHA */
}
#endif

static blocks_fn sha256_blocks = sha256_blocks_c;
static const char *sha256_impl = "portable C";

typedef struct {
    uint32_t state[8];
    uint64_t length;  /* bytes */
    uint8_t buf[64];
    size_t used;
} sha256_ctx;

static void sha256_init(sha256_ctx *c) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->state, iv, sizeof iv);
    c->length = 0;
    c->used = 0;
}

static void sha256_update(sha256_ctx *c, const void *data, size_t n) {
    const uint8_t *p = data;
    c->length += n;
    if (c->used) {
        size_t take = 64 - c->used < n ? 64 - c->used : n;
        memcpy(c->buf + c->used, p, take);
        c->used += take; p += take; n -= take;
        if (c->used < 64)
            return;
        sha256_blocks(c->state, c->buf, 1);
        c->used = 0;
    }
    if (n >= 64) {
        sha256_blocks(c->state, p, n / 64);
        p += n / 64 * 64;
        n %= 64;
    }
    memcpy(c->buf, p, n);
    c->used = n;
}

static void sha256_final(sha256_ctx *c, uint8_t out[32]) {
    uint64_t bits = c->length * 8;
    uint8_t pad[72] = {0x80};
    size_t padlen = (c->used < 56 ? 56 : 120) - c->used;
    for (int i = 0; i < 8; i++)
        pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, pad, padlen + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->state[i] >> 24); out[4 * i + 1] = (uint8_t)(c->state[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->state[i] >> 8); out[4 * i + 3] = (uint8_t)c->state[i];
    }
}

/* ---- one minute's readings, column by column ------------------------------------------------------------- */

typedef struct {
    size_t n, cap;          /* readings in the minute, room for */
    uint8_t *times, *seqs, *values, *nulls, *quality, *lengths;  /* little-endian columns */
    uint8_t *reasons;       /* the reasons' UTF-8, one after the other */
    size_t rlen, rcap;
} minute_buf;

static void put_u64le(uint8_t *p, uint64_t x) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(x >> (8 * i));
}

static int grow(minute_buf *m) {
    size_t cap = m->cap ? m->cap * 2 : 256;
    uint8_t **cols[6] = {&m->times, &m->seqs, &m->values, &m->nulls, &m->quality, &m->lengths};
    size_t width[6] = {8, 8, 8, 1, 1, 4};
    for (int i = 0; i < 6; i++) {
        uint8_t *p = realloc(*cols[i], cap * width[i]);
        if (!p)
            return -1;
        *cols[i] = p;
    }
    m->cap = cap;
    return 0;
}

static void buf_free(minute_buf *m) {
    free(m->times); free(m->seqs); free(m->values); free(m->nulls); free(m->quality); free(m->lengths);
    free(m->reasons);
}

/* Code points of valid UTF-8 (as Python's strict decoder: no overlong forms, no surrogates, ≤ U+10FFFF);
 * -1 if invalid. */
static long utf8_code_points(const uint8_t *s, size_t n) {
    long count = 0;
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; count++; continue; }
        size_t need;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { need = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; cp = c & 0x07; }
        else return -1;
        if (i + need >= n)  /* truncated */
            return -1;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return -1;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return -1;
        i += need + 1;
        count++;
    }
    return count;
}

/* Python's float floor division (Objects/floatobject.c, float_divmod), so the minute is the one
 * `(t - day_start) // MINUTE` gives. */
static double py_floordiv(double vx, double wx) {
    double mod = fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod) {
        if ((wx < 0) != (mod < 0))
            div -= 1.0;
    }
    if (div) {
        double floordiv = floor(div);
        if (div - floordiv > 0.5)
            floordiv += 1.0;
        return floordiv;
    }
    return copysign(0.0, vx / wx);
}

/* ---- the channel-day --------------------------------------------------------------------------------------- */

enum { SCAN_OK = 0, SCAN_UNUSUAL = 1, SCAN_SQLITE = 2, SCAN_NOMEM = 3 };
#define RECORD 22  /* <HI16s */

typedef struct {
    uint8_t *out;           /* the minute index */
    size_t out_len, out_cap;
    int64_t count;
    char error[512];
} scan_result;

static int flush_minute(minute_buf *m, long minute, scan_result *r) {
    sha256_ctx c;
    uint8_t digest[32];
    sha256_init(&c);
    sha256_update(&c, m->times, m->n * 8);
    sha256_update(&c, m->seqs, m->n * 8);
    sha256_update(&c, m->values, m->n * 8);
    sha256_update(&c, m->nulls, m->n);
    sha256_update(&c, m->quality, m->n);
    sha256_update(&c, m->lengths, m->n * 4);
    sha256_update(&c, m->reasons, m->rlen);
    sha256_final(&c, digest);
    if (r->out_len + RECORD > r->out_cap) {
        size_t cap = r->out_cap ? r->out_cap * 2 : 1440 * RECORD;
        uint8_t *p = realloc(r->out, cap);
        if (!p)
            return SCAN_NOMEM;
        r->out = p;
        r->out_cap = cap;
    }
    uint8_t *o = r->out + r->out_len;
    o[0] = (uint8_t)minute; o[1] = (uint8_t)(minute >> 8);
    for (int i = 0; i < 4; i++)
        o[2 + i] = (uint8_t)((uint64_t)m->n >> (8 * i));
    memcpy(o + 6, digest, 16);
    r->out_len += RECORD;
    m->n = 0;
    m->rlen = 0;
    return SCAN_OK;
}

/* Appends the current row to the minute; SCAN_UNUSUAL when the Python path would see it differently. */
static int add_row(sqlite3_stmt *st, double t, int tt, minute_buf *m) {
    int ts = sqlite3_column_type(st, 1), tv = sqlite3_column_type(st, 2);
    int tq = sqlite3_column_type(st, 3), tr = sqlite3_column_type(st, 4);
    if ((tt != SQLITE_FLOAT && tt != SQLITE_INTEGER) || ts != SQLITE_INTEGER || tq != SQLITE_INTEGER
        || tr != SQLITE_TEXT || (tv != SQLITE_FLOAT && tv != SQLITE_INTEGER && tv != SQLITE_NULL))
        return SCAN_UNUSUAL;
    sqlite3_int64 q = sqlite3_column_int64(st, 3);
    if (q < 0 || q > 255)
        return SCAN_UNUSUAL;
    const uint8_t *text = sqlite3_column_text(st, 4);
    size_t tlen = (size_t)sqlite3_column_bytes(st, 4);
    if (!text && tlen)
        return SCAN_NOMEM;
    long points = utf8_code_points(text, tlen);
    if (points < 0 || (uint64_t)points > UINT32_MAX)
        return SCAN_UNUSUAL;
    if (m->n == m->cap && grow(m))
        return SCAN_NOMEM;
    size_t i = m->n;
    double v = tv == SQLITE_NULL ? 0.0 : sqlite3_column_double(st, 2);
    uint64_t bits;
    memcpy(&bits, &t, 8);
    put_u64le(m->times + 8 * i, bits);
    put_u64le(m->seqs + 8 * i, (uint64_t)sqlite3_column_int64(st, 1));
    memcpy(&bits, &v, 8);
    put_u64le(m->values + 8 * i, bits);
    m->nulls[i] = tv == SQLITE_NULL;
    m->quality[i] = (uint8_t)q;
    for (int k = 0; k < 4; k++)
        m->lengths[4 * i + k] = (uint8_t)((uint64_t)points >> (8 * k));
    if (m->rlen + tlen > m->rcap) {
        size_t cap = m->rcap ? m->rcap : 4096;
        while (cap < m->rlen + tlen)
            cap *= 2;
        uint8_t *p = realloc(m->reasons, cap);
        if (!p)
            return SCAN_NOMEM;
        m->reasons = p;
        m->rcap = cap;
    }
    if (tlen)
        memcpy(m->reasons + m->rlen, text, tlen);
    m->rlen += tlen;
    m->n++;
    return SCAN_OK;
}

static int step_rows(sqlite3_stmt *st, double day_start, scan_result *r) {
    minute_buf m = {0};
    int status = SCAN_OK, rc;
    long minute = -1;
    double end = 0.0;  /* the current minute's end: the first reading at or after it starts the next one */
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int tt = sqlite3_column_type(st, 0);
        double t = sqlite3_column_double(st, 0);
        if (minute >= 0 && !(t < end)) {
            if ((status = flush_minute(&m, minute, r)))
                break;
            minute = -1;
        }
        if (minute < 0) {
            double f = py_floordiv(t - day_start, 60.0);
            if (!(f >= 0.0 && f <= 65535.0)) {  /* "<H" would not hold it: the Python path raises */
                status = SCAN_UNUSUAL;
                break;
            }
            minute = (long)f;
            end = day_start + (double)(minute + 1) * 60.0;
            if (!(t < end)) {  /* cannot happen for a time in the day; the Python path decides */
                status = SCAN_UNUSUAL;
                break;
            }
        }
        if ((status = add_row(st, t, tt, &m)))
            break;
        r->count++;
    }
    if (status == SCAN_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
        status = SCAN_SQLITE;
    if (status == SCAN_OK && minute >= 0)
        status = flush_minute(&m, minute, r);
    buf_free(&m);
    return status;
}

/* A connection and the seals' statement, kept across the channel-days one thread scans.
 *
 * Why kept: opening a connection per channel-day made each scan fill a fresh page cache, and every page it
 * allocates goes through sqlite3_malloc, which (SQLITE_CONFIG_MEMSTATUS, on in the system's libsqlite3 and
 * fixed once Python's sqlite3 has initialised the library) takes SQLite's one process-wide memory mutex around
 * malloc itself; a fresh allocation page-faults while holding it. Two scanning threads queued on that mutex
 * (perf: ~40 % of their context switches were waits in sqlite3Malloc) and, on a loaded machine, a thread
 * preempted while holding it stalled the other for a whole time slice: two threads took as long as one. A
 * kept connection allocates its cache once; scanning a day then calls no allocator per page or per row. */
typedef struct {
    sqlite3 *db;
    sqlite3_stmt *st;
} scanner;

static void scanner_close(scanner *s) {
    sqlite3_finalize(s->st);
    sqlite3_close(s->db);
    s->st = NULL;
    s->db = NULL;
}

/* No mmap (PRAGMA mmap_size): it saved ~8 % of a scan's CPU here, but a file truncated under a mapping by another
 * process (a hand repair, a restore) kills the daemon with SIGBUS, where a read() only fails the scan. */
static int scanner_open(scanner *s, const char *uri, const char *sql, int busy_ms, char *error, size_t error_len) {
    int rc = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(s->db, busy_ms);
        rc = sqlite3_prepare_v2(s->db, sql, -1, &s->st, NULL);
    }
    if (rc != SQLITE_OK) {
        snprintf(error, error_len, "%s", s->db ? sqlite3_errmsg(s->db) : "out of memory opening the database");
        scanner_close(s);
        return SCAN_SQLITE;
    }
    return SCAN_OK;
}

/* One channel-day: its own read transaction (the statement's, ended by the reset), as a fresh connection's. */
static int scanner_run(scanner *s, sqlite3_int64 channel, double day_start, double day_end, sqlite3_int64 seq_max,
                       scan_result *r) {
    sqlite3_bind_int64(s->st, 1, channel);
    sqlite3_bind_double(s->st, 2, day_start);
    sqlite3_bind_double(s->st, 3, day_end);
    sqlite3_bind_int64(s->st, 4, seq_max);
    int status = step_rows(s->st, day_start, r);
    if (status == SCAN_SQLITE)
        snprintf(r->error, sizeof r->error, "%s", sqlite3_errmsg(s->db));
    sqlite3_reset(s->st);
    return status;
}

static PyObject *ScanError;

/* The Python value of a scan: (count, index), None (SCAN_UNUSUAL) or NULL with the error set. */
static PyObject *scan_value(int status, scan_result *r) {
    PyObject *out = NULL;
    if (status == SCAN_OK)
        out = Py_BuildValue("(Ly#)", (long long)r->count, r->out ? (const char *)r->out : "", (Py_ssize_t)r->out_len);
    else if (status == SCAN_UNUSUAL)
        out = Py_NewRef(Py_None);
    else if (status == SCAN_NOMEM)
        PyErr_NoMemory();
    else
        PyErr_SetString(ScanError, r->error);
    free(r->out);
    return out;
}

PyDoc_STRVAR(scan_day_doc,
"scan_day(uri, sql, channel_id, day_start, day_end, seq_max, busy_ms) -> (count, index) | None\n\n"
"Open ``uri`` (an SQLite URI, read-only), run ``sql`` with (channel_id, day_start, day_end, seq_max) and return\n"
"the readings' count and minute index. None: a row the Python path would read differently (run that path).\n"
"Raises _sealscan.Error with SQLite's message when the file cannot be read. Many days: a Scanner.");

static PyObject *scan_day(PyObject *self, PyObject *args) {
    const char *uri, *sql;
    long long channel, seq_max;
    double day_start, day_end;
    int busy_ms;
    (void)self;
    if (!PyArg_ParseTuple(args, "ssLddLi", &uri, &sql, &channel, &day_start, &day_end, &seq_max, &busy_ms))
        return NULL;
    scan_result r = {0};
    scanner s = {0};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scanner_open(&s, uri, sql, busy_ms, r.error, sizeof r.error);
    if (status == SCAN_OK)
        status = scanner_run(&s, channel, day_start, day_end, seq_max, &r);
    scanner_close(&s);
    Py_END_ALLOW_THREADS
    return scan_value(status, &r);
}

/* ---- Scanner: the Python object around a kept connection ---------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    scanner s;
    int busy;  /* a scan runs (the GIL released): the connection is NOMUTEX, one thread at a time */
} Scanner;

static void Scanner_dealloc(Scanner *self) {
    scanner_close(&self->s);  /* cannot be busy: a running scan holds a reference */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Scanner_init(Scanner *self, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"uri", "sql", "busy_ms", NULL};
    const char *uri, *sql;
    int busy_ms;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ssi", kw, &uri, &sql, &busy_ms))
        return -1;
    if (self->s.db) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner is already open");
        return -1;
    }
    char error[512] = "";
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scanner_open(&self->s, uri, sql, busy_ms, error, sizeof error);
    Py_END_ALLOW_THREADS
    if (status != SCAN_OK) {
        PyErr_SetString(ScanError, error);
        return -1;
    }
    return 0;
}

static PyObject *Scanner_scan(Scanner *self, PyObject *args) {
    long long channel, seq_max;
    double day_start, day_end;
    if (!PyArg_ParseTuple(args, "LddL", &channel, &day_start, &day_end, &seq_max))
        return NULL;
    if (!self->s.db || self->busy) {
        PyErr_SetString(PyExc_RuntimeError, self->busy ? "Scanner is scanning in another thread"
                                                       : "Scanner is closed");
        return NULL;
    }
    scan_result r = {0};
    int status;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    status = scanner_run(&self->s, channel, day_start, day_end, seq_max, &r);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    return scan_value(status, &r);
}

static PyObject *Scanner_close(Scanner *self, PyObject *unused) {
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner is scanning in another thread");
        return NULL;
    }
    scanner_close(&self->s);
    Py_RETURN_NONE;
}

static PyMethodDef Scanner_methods[] = {
    {"scan", (PyCFunction)Scanner_scan, METH_VARARGS,
     "scan(channel_id, day_start, day_end, seq_max) -> (count, index) | None: as scan_day, on this connection."},
    {"close", (PyCFunction)Scanner_close, METH_NOARGS, "close(): close the connection (again: nothing)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_sealscan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("Scanner(uri, sql, busy_ms): a read-only connection to ``uri`` with ``sql``\n"
                        "prepared, kept for many channel-days; one thread at a time (its scan releases the GIL)."),
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
};

PyDoc_STRVAR(sha256_doc, "sha256(data) -> bytes: this module's SHA-256 (tests compare it with hashlib).");

static PyObject *py_sha256(PyObject *self, PyObject *arg) {
    Py_buffer b;
    uint8_t digest[32];
    sha256_ctx c;
    (void)self;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE))
        return NULL;
    sha256_init(&c);
    sha256_update(&c, b.buf, (size_t)b.len);
    sha256_final(&c, digest);
    PyBuffer_Release(&b);
    return PyBytes_FromStringAndSize((const char *)digest, 32);
}

PyDoc_STRVAR(use_portable_doc, "use_portable(flag): hash with the portable C SHA-256 even where SHA-NI exists "
             "(tests: both implementations give hashlib's digests).");

static PyObject *use_portable(PyObject *self, PyObject *arg) {
    (void)self;
    int flag = PyObject_IsTrue(arg);
    if (flag < 0)
        return NULL;
    sha256_blocks = sha256_blocks_c;
    sha256_impl = "portable C";
#ifdef SEALSCAN_X86
    if (!flag && cpu_has_sha_ni()) {
        sha256_blocks = sha256_blocks_ni;
        sha256_impl = "SHA-NI";
    }
#endif
    return PyUnicode_FromString(sha256_impl);
}

PyDoc_STRVAR(sha256_impl_doc, "sha256_impl() -> str: which SHA-256 the scans use (SHA-NI or portable C).");

static PyObject *py_sha256_impl(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return PyUnicode_FromString(sha256_impl);
}

static PyMethodDef methods[] = {
    {"sha256_impl", py_sha256_impl, METH_NOARGS, sha256_impl_doc},
    {"scan_day", scan_day, METH_VARARGS, scan_day_doc},
    {"sha256", py_sha256, METH_O, sha256_doc},
    {"use_portable", use_portable, METH_O, use_portable_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sealscan",
    "The seals' minute index of a channel-day computed in C (see monitor/stores/seal_scan.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sealscan(void) {
#ifdef SEALSCAN_X86
    if (cpu_has_sha_ni()) {
        sha256_blocks = sha256_blocks_ni;
        sha256_impl = "SHA-NI";
    }
#endif
    if (PyType_Ready(&ScannerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    ScanError = PyErr_NewException("_sealscan.Error", NULL, NULL);
    if (PyModule_AddObjectRef(m, "Error", ScanError) < 0
        || PyModule_AddObjectRef(m, "Scanner", (PyObject *)&ScannerType) < 0
        || PyModule_AddStringConstant(m, "sqlite_version", sqlite3_libversion()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
