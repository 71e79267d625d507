/* tokpack's compiled byte-level BPE encoder: tiktoken's encode_ordinary ids, on UTF-8 bytes.
 *
 * tokpack/vocab/compiled.py says what it does and why it is C. The encoder is one translation unit
 * (so the hot path inlines across its parts): this file, the Python types and the module, includes
 * each part once, in the order a text goes through them:
 *   _bpe_base.h    the build's switches, keys and hashes of bytes, aligned tables;
 *   _bpe_scan.h    the pre-tokenizer: one scanner per pattern over UTF-8 bytes (byte classes for
 *                  ASCII, _bpe_classes.h's two-stage table for the rest), and window scanners that
 *                  find a pattern's pieces 64 bytes at a time;
 *   _bpe_tables.h  the vocabulary: every token by its bytes (read-only, shared by threads), and the
 *                  cut table (which character boundaries some token spans);
 *   _bpe_cache.h   a thread's piece cache: what tiktoken gives each piece seen before;
 *   _bpe_merge.h   tiktoken's byte_pair_merge of a piece that misses: a scan for short pieces, an
 *                  indexed heap of blocks for long ones (n log n at any length);
 *   _bpe_encode.h  a piece's ids (cache, vocabulary, cut, merge) and the loop over a text's pieces,
 *                  a str's UTF-8 (ASCII in place, any other transcoded as tiktoken treats lone
 *                  surrogates), and bytes checked as UTF-8 (read in place).
 *
 * C11 and the CPython API only (SSE2 intrinsics where the compiler has them, SSSE3's where the CPU
 * has them, asked at load); no third-party code.
 */
#include "_bpe_base.h"
#include "_bpe_scan.h"
#include "_bpe_tables.h"
#include "_bpe_cache.h"
#include "_bpe_merge.h"
#include "_bpe_encode.h"

/* ------------------------------------------------------------------------------------------ */
/* A buffer of ids handed to numpy (np.frombuffer) without a copy                             */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t count;
    Py_ssize_t itemsize;
    char *format;
    Py_ssize_t exports;
} Buffer;

static void buffer_dealloc(Buffer *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int buffer_get(Buffer *self, Py_buffer *view, int flags) {
    int done = PyBuffer_FillInfo(view, (PyObject *)self, self->data ? self->data : (void *)"",
                                 self->count * self->itemsize, 1, flags);
    if (done < 0) return -1;
    view->itemsize = self->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? self->format : NULL;
    if (flags & PyBUF_ND) {
        view->ndim = 1;
        view->shape = &self->count;
        view->strides = (flags & PyBUF_STRIDES) ? &view->itemsize : NULL;
    }
    return 0;
}

static PyBufferProcs buffer_procs = {(getbufferproc)buffer_get, NULL};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tokpack.vocab._bpe.Buffer",
    .tp_basicsize = sizeof(Buffer),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_buffer = &buffer_procs,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory the encoder wrote (ids or ends), read with numpy.frombuffer.",
};

/* A Buffer owning `data` (freed with it, or now if the object cannot be made). */
static PyObject *buffer_wrap(void *data, Py_ssize_t count, Py_ssize_t itemsize, char *format) {
    Buffer *b = PyObject_New(Buffer, &BufferType);
    if (!b) { free(data); return NULL; }
    b->data = data;
    b->count = count;
    b->itemsize = itemsize;
    b->format = format;
    b->exports = 0;
    return (PyObject *)b;
}

/* ------------------------------------------------------------------------------------------ */
/* Cache: the Python type                                                                     */
/* ------------------------------------------------------------------------------------------ */

static int cache_init(Cache *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"set_bits", "row_bits", NULL};
    int set_bits = 17, row_bits = 13;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|ii", names, &set_bits, &row_bits)) return -1;
    if (set_bits < 0 || set_bits > 30 || row_bits < 0 || row_bits > 30) {
        PyErr_SetString(PyExc_ValueError, "set_bits and row_bits must be from 0 to 30");
        return -1;
    }
    block_free(&self->entry_block);
    block_free(&self->over_block);
    block_free(&self->row_block);
    block_free(&self->pair_block);
    size_t sets = (size_t)1 << set_bits, rows = (size_t)1 << row_bits;
    if (block_new(&self->entry_block, 2 * sets * sizeof(Entry)) < 0 || block_new(&self->row_block, rows * sizeof(Row)) < 0
        || block_new(&self->over_block, 8 * sets * sizeof(uint32_t)) < 0
        || block_new(&self->pair_block, 2 * PAIRS * sizeof(uint64_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    self->entries = self->entry_block.data;
    self->over = self->over_block.data;
    self->set_mask = sets - 1;
    self->rows = self->row_block.data;
    self->pairs = self->pair_block.data; /* (a key of 0 is no pair's: the left id is stored + 1) */
    self->row_mask = rows - 1;
    memset(self->stats, 0, sizeof(self->stats));
    memset(self->short_rows, 0, sizeof(self->short_rows));
    return 0;
}

static void cache_dealloc(Cache *self) {
    block_free(&self->entry_block);
    block_free(&self->over_block);
    block_free(&self->row_block);
    block_free(&self->pair_block);
    free(self->text);
    free(self->scratch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *cache_stats(Cache *self, PyObject *unused) {
    (void)unused;
    size_t held = 0, rows_held = 0;
    for (size_t k = 0; k < 2 * (self->set_mask + 1); k++) held += (self->entries[k].hi >> 56) != 0; /* (a key's length) */
    for (size_t k = 0; k <= self->row_mask; k++) rows_held += self->rows[k].len != 0;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:n,s:n,s:n,s:n,s:n,s:n}",
                         "parts", (unsigned long long)self->stats[STAT_PARTS],
                         "part_hits", (unsigned long long)self->stats[STAT_PART_HITS],
                         "hits", (unsigned long long)self->stats[STAT_HITS],
                         "misses", (unsigned long long)self->stats[STAT_MISSES],
                         "uncached", (unsigned long long)self->stats[STAT_UNCACHED],
                         "tokens", (unsigned long long)self->stats[STAT_TOKENS],
                         "entries", (Py_ssize_t)(2 * (self->set_mask + 1)),
                         "entries_held", (Py_ssize_t)held,
                         "rows", (Py_ssize_t)(self->row_mask + 1),
                         "rows_held", (Py_ssize_t)rows_held,
                         "bytes", (Py_ssize_t)((self->set_mask + 1) * (2 * sizeof(Entry) + 8 * sizeof(uint32_t))
                                               + (self->row_mask + 1) * sizeof(Row)),
                         "buffer_bytes", (Py_ssize_t)(self->text_cap + self->scratch_cap * 12));
}

static PyMethodDef cache_methods[] = {
    {"stats", (PyCFunction)cache_stats, METH_NOARGS,
     "What the cache did and holds: hits, misses (merged, then kept), uncached (merged, too long to "
     "keep), tokens (pieces that are a token), its entries and rows and how many hold a piece, its "
     "bytes, and the bytes of its thread's buffers."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CacheType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tokpack.vocab._bpe.Cache",
    .tp_basicsize = sizeof(Cache),
    .tp_dealloc = (destructor)cache_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Cache(set_bits=17, row_bits=13): one thread's piece cache (2 << set_bits entries of "
              "pieces of up to 15 bytes and 4 ids, two for one of 5 to 12 ids, 1 << row_bits rows of "
              "pieces of up to 128 bytes and 28 "
              "ids, fixed) and "
              "its scratch. One call uses it at a time.",
    .tp_methods = cache_methods,
    .tp_init = (initproc)cache_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------------ */
/* Encoder: the Python type                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* tokens from (joined, ends, ids): the tokens' bytes one after another, each one's end and id (one
   int64 each); 0, or -1 with a Python error. The buffers stay held in `held` until released. */
static int joined_tokens(PyObject *given, Tokens *tokens, Py_buffer held[3]) {
    if (!PyArg_ParseTuple(given, "y*y*y*", &held[0], &held[1], &held[2])) return -1;
    Py_ssize_t count = held[1].len / (Py_ssize_t)sizeof(int64_t);
    if (held[1].len != count * (Py_ssize_t)sizeof(int64_t) || held[2].len != held[1].len
        || (count && ((const int64_t *)held[1].buf)[count - 1] != held[0].len)) {
        for (int k = 0; k < 3; k++) PyBuffer_Release(&held[k]);
        PyErr_SetString(PyExc_ValueError, "(joined, ends, ids): one int64 end and id per token, the last end "
                                          "the length of joined");
        return -1;
    }
    memset(tokens, 0, sizeof(*tokens));
    tokens->joined = held[0].buf;
    tokens->joined_len = held[0].len;
    tokens->ends = held[1].buf;
    tokens->ids = held[2].buf;
    tokens->count = count;
    return 0;
}

static int encoder_init(Encoder *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"ranks", "mode", NULL};
    PyObject *ranks;
    int mode;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oi", names, &ranks, &mode)) return -1;
    if (!PyDict_Check(ranks) && !PyTuple_Check(ranks)) {
        PyErr_SetString(PyExc_TypeError, "ranks must be a dict {token bytes: id} or a tuple (joined, ends, ids)");
        return -1;
    }
    if (mode < MODE_GPT2 || mode > MODE_POLISH_PHRASE) {
        PyErr_Format(PyExc_ValueError, "no scanner numbered %d", mode);
        return -1;
    }
    if (self->pair_rank) {
        PyErr_SetString(PyExc_RuntimeError, "an Encoder is initialised once");
        return -1;
    }
    self->mode = mode;
    if (PyDict_Check(ranks)) {
        Tokens tokens = {ranks, NULL, NULL, 0, 0, NULL, NULL, 0};
        return tables_build(self, &tokens, 1);
    }
    Tokens tokens;
    Py_buffer held[3];
    if (joined_tokens(ranks, &tokens, held) < 0) return -1;
    int built = tables_build(self, &tokens, 1);
    for (int k = 0; k < 3; k++) PyBuffer_Release(&held[k]);
    return built;
}

static void encoder_dealloc(Encoder *self) {
    tables_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_ready(Encoder *self, Cache *cache) {
    if (!self->pair_rank) {
        PyErr_SetString(PyExc_RuntimeError, "the Encoder was not initialised");
        return -1;
    }
    if (!cache->entries) {
        PyErr_SetString(PyExc_RuntimeError, "the Cache was not initialised");
        return -1;
    }
    if (cache->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a Cache serves one call at a time");
        return -1;
    }
    return 0;
}

static PyObject *encoder_encode(Encoder *self, PyObject *args) {
    PyObject *texts;
    Cache *cache;
    if (!PyArg_ParseTuple(args, "OO!", &texts, &CacheType, &cache)) return NULL;
    if (check_ready(self, cache) < 0) return NULL;
    PyObject *seq = PySequence_Fast(texts, "texts must be a sequence of str or bytes");
    if (!seq) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    /* the strs, held: another thread may change the list while this one encodes without the GIL */
    PyObject **held = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(PyObject *));
    int64_t *ends = malloc((size_t)(count ? count : 1) * sizeof(int64_t));
    if (!held || !ends) {
        PyMem_Free(held);
        free(ends);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    size_t total = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *text = items[k];
        if (PyBytes_Check(text)) {
            /* (about as many ids as a str of its characters: most of a text's bytes are ASCII) */
            total += (size_t)PyBytes_GET_SIZE(text) - (size_t)PyBytes_GET_SIZE(text) / 4;
            continue;
        }
        if (!PyUnicode_Check(text)) {
            PyErr_Format(PyExc_TypeError, "texts[%zd] is %.80s, not str or bytes", k, Py_TYPE(text)->tp_name);
            PyMem_Free(held);
            free(ends);
            Py_DECREF(seq);
            return NULL;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(text) < 0) {
            PyMem_Free(held);
            free(ends);
            Py_DECREF(seq);
            return NULL;
        }
#endif
        total += (size_t)PyUnicode_GET_LENGTH(text);
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        held[k] = items[k];
        Py_INCREF(held[k]);
    }
    Py_DECREF(seq);
    /* room for an id every two characters at first (most texts need fewer; more grows it): a
       larger first room made malloc map new pages for every call instead of reusing its heap's */
    Out out = {NULL, 0, 0, 0};
    int failed = out_room(&out, total / 2 + 64);
    Py_ssize_t invalid = -1; /* the first bytes item that is not UTF-8, if any */
    size_t invalid_at = 0;
    cache->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < count && !failed; k++) {
        size_t n;
        const uint8_t *s;
        if (PyBytes_Check(held[k])) { /* read in place, once checked */
            s = (const uint8_t *)PyBytes_AS_STRING(held[k]);
            n = (size_t)PyBytes_GET_SIZE(held[k]);
            invalid_at = utf8_invalid(s, n);
            if (invalid_at != n) {
                invalid = k;
                break;
            }
        } else {
            s = str_utf8(cache, held[k], &n);
        }
        failed = !s || encode_utf8(self, cache, s, n, &out) < 0;
        ends[k] = (int64_t)out.len;
    }
    Py_END_ALLOW_THREADS
    cache->busy = 0;
    if (invalid >= 0) utf8_error(held[invalid], invalid_at);
    for (Py_ssize_t k = 0; k < count; k++) Py_DECREF(held[k]);
    PyMem_Free(held);
    if (failed || invalid >= 0) {
        free(out.ids);
        free(ends);
        return invalid >= 0 ? NULL : PyErr_NoMemory();
    }
    if (out.len < out.cap) {
        uint32_t *shrunk = realloc(out.ids, (out.len ? out.len : 1) * sizeof(uint32_t));
        if (shrunk) out.ids = shrunk;
    }
    PyObject *ids = buffer_wrap(out.ids, (Py_ssize_t)out.len, sizeof(uint32_t), "I");
    if (!ids) { free(ends); return NULL; }
    PyObject *bounds = buffer_wrap(ends, count, sizeof(int64_t), "q");
    if (!bounds) { Py_DECREF(ids); return NULL; }
    return Py_BuildValue("(NN)", ids, bounds);
}

static PyObject *encoder_pieces(Encoder *self, PyObject *args) {
    PyObject *text;
    Cache *cache;
    int windows = 1;
    if (!PyArg_ParseTuple(args, "UO!|p", &text, &CacheType, &cache, &windows)) return NULL;
    if (check_ready(self, cache) < 0) return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) return NULL;
#endif
    size_t n;
    const uint8_t *s = str_utf8(cache, text, &n);
    if (!s) return PyErr_NoMemory();
    PyObject *ends = PyList_New(0);
    if (!ends) return NULL;
    for (size_t i = 0; i < n;) {
        /* as encode finds them: a window's starts, else one piece from the byte scanner */
        uint64_t starts = windows && i + 64 <= n ? window_starts(self->mode, s, i) & ~(uint64_t)1 : 0;
        size_t from = i;
        if (!starts) i = piece_end(self->mode, s, i, n);
        do {
            if (starts) {
                i = from + (size_t)__builtin_ctzll(starts);
                starts &= starts - 1;
            }
            PyObject *end = PyLong_FromSize_t(i);
            if (!end || PyList_Append(ends, end) < 0) {
                Py_XDECREF(end);
                Py_DECREF(ends);
                return NULL;
            }
            Py_DECREF(end);
        } while (starts);
    }
    PyObject *utf8 = PyBytes_FromStringAndSize((const char *)s, (Py_ssize_t)n);
    if (!utf8) { Py_DECREF(ends); return NULL; }
    return Py_BuildValue("(NN)", utf8, ends);
}

static PyObject *encoder_merge(Encoder *self, PyObject *args) {
    Py_buffer piece;
    Cache *cache;
    if (!PyArg_ParseTuple(args, "y*O!", &piece, &CacheType, &cache)) return NULL;
    if (check_ready(self, cache) < 0) { PyBuffer_Release(&piece); return NULL; }
    size_t n = (size_t)piece.len;
    uint32_t *ids = malloc((n ? n : 1) * sizeof(uint32_t));
    size_t count = 0;
    if (ids && n == 1) { ids[0] = self->byte_rank[((const uint8_t *)piece.buf)[0]]; count = 1; }
    else if (ids && n > 1) {
        const uint8_t *p = piece.buf;
        cache->busy = 1;
        Py_BEGIN_ALLOW_THREADS
        count = merge(self, cache, p, n, p + n, ids);
        Py_END_ALLOW_THREADS
        cache->busy = 0;
    }
    PyBuffer_Release(&piece);
    if (!ids || count == (size_t)-1) { free(ids); return PyErr_NoMemory(); }
    return buffer_wrap(ids, (Py_ssize_t)count, sizeof(uint32_t), "I");
}

static PyMethodDef encoder_methods[] = {
    {"encode", (PyCFunction)encoder_encode, METH_VARARGS,
     "encode(texts, cache) -> (ids, ends): every text's ids (uint32) and the end of each text's ids "
     "(int64), as buffers for numpy.frombuffer. A text is a str, or bytes read as UTF-8 in place once "
     "checked: the first that is not UTF-8 raises the UnicodeDecodeError bytes.decode would (its object "
     "that bytes, its start the first byte of the first sequence that is no character). Releases the GIL "
     "while it encodes."},
    {"pieces", (PyCFunction)encoder_pieces, METH_VARARGS,
     "pieces(text, cache, windows=True) -> (utf8, ends): the text's UTF-8 (lone surrogates as "
     "tiktoken's encode_ordinary treats them) and the end of each pre-tokenizer piece in it, in bytes, "
     "found as encode finds them (windows=False: by the byte scanner alone)."},
    {"merge", (PyCFunction)encoder_merge, METH_VARARGS,
     "merge(piece, cache) -> ids: tiktoken's byte_pair_merge of the bytes (without the shortcut for "
     "a piece that is a token), as a buffer for numpy.frombuffer."},
    {NULL, NULL, 0, NULL},
};

static PyObject *encoder_n_tokens(Encoder *self, void *unused) {
    (void)unused;
    return PyLong_FromSsize_t(self->n_tokens);
}

static PyObject *encoder_bytes(Encoder *self, void *unused) {
    (void)unused;
    return PyLong_FromSize_t(65536 * sizeof(uint32_t) + self->tiny_buckets * sizeof(TinyBucket)
                             + self->mid_buckets * sizeof(MidBucket)
                             + (self->filter_mask + 1) * sizeof(uint64_t) + (self->long_mask + 1) * sizeof(LongSlot));
}

static PyGetSetDef encoder_getset[] = {
    {"n_tokens", (getter)encoder_n_tokens, NULL, "How many tokens the ranks hold.", NULL},
    {"table_bytes", (getter)encoder_bytes, NULL, "The bytes of the vocabulary's tables.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tokpack.vocab._bpe.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_dealloc = (destructor)encoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Encoder(ranks, mode): the tables of one vocabulary ({token bytes: id}, every single byte "
              "present, ids below MAX_ID) and one scanner (mode: 1 gpt2, 2 gpt4/cl100k, 3 o200k, 4 polish, "
              "5 polish-phrase). Read-only once made: any number of threads may use it, each with its "
              "own Cache.",
    .tp_methods = encoder_methods,
    .tp_getset = encoder_getset,
    .tp_init = (initproc)encoder_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------------ */
/* A tiktoken rank file's text, read                                                          */
/* ------------------------------------------------------------------------------------------ */

/* Each byte's value in base64 ('=' 0), or -1 for a byte base64 does not use ('=' apart). */
static int8_t base64_value[256];

static void base64_init(void) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    memset(base64_value, -1, sizeof(base64_value));
    for (int k = 0; k < 64; k++) base64_value[(uint8_t)digits[k]] = (int8_t)k;
    base64_value['='] = 0;
}

static int compare_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Whether two of the tokens (joined, ends: as Tokens reads them) have the same bytes; -1 without
   memory. */
static int repeated_token(const uint8_t *joined, const int64_t *ends, size_t count) {
    uint64_t size = 256;
    while (size < 2 * (uint64_t)count + 2) size *= 2;
    uint32_t *slots = calloc(size, sizeof(uint32_t)); /* a token's index + 1; 0: empty */
    if (!slots) return -1;
    int found = 0;
    for (size_t k = 0; k < count && !found; k++) {
        size_t start = k ? (size_t)ends[k - 1] : 0, len = (size_t)ends[k] - start;
        uint64_t i = bytes_hash(joined + start, len) & (size - 1);
        for (; slots[i]; i = (i + 1) & (size - 1)) {
            size_t other = slots[i] - 1, other_start = other ? (size_t)ends[other - 1] : 0;
            if ((size_t)ends[other] - other_start == len && memcmp(joined + other_start, joined + start, len) == 0) {
                found = 1;
                break;
            }
        }
        slots[i] = (uint32_t)(k + 1);
    }
    free(slots);
    return found;
}

static PyObject *module_utf8_characters(PyObject *unused, PyObject *args) {
    (void)unused;
    Py_buffer given;
    if (!PyArg_ParseTuple(args, "y*", &given)) return NULL;
    size_t characters = utf8_characters(given.buf, (size_t)given.len);
    PyBuffer_Release(&given);
    return PyLong_FromSize_t(characters);
}

static PyObject *module_utf8_checks(PyObject *unused, PyObject *args) {
    (void)unused;
    Py_buffer given;
    if (!PyArg_ParseTuple(args, "y*", &given)) return NULL;
    const uint8_t *s = given.buf;
    size_t n = (size_t)given.len, at = utf8_scan(s, n);
    PyObject *vector = Py_None;
#ifdef TP_SSSE3
    if (ssse3_ok) vector = utf8_valid(s, n) ? Py_True : Py_False;
#endif
    PyBuffer_Release(&given);
    return Py_BuildValue("(On)", vector, at == n ? (Py_ssize_t)-1 : (Py_ssize_t)at);
}

/* rank_files.parse_rank_text's fast path: the tokens of a text laid out as tiktoken writes a rank
   file (every line `base64 rank` and a newline: padded base64 of at least one byte, a decimal rank
   of 1 to 10 digits below 2**32; no token or rank repeated), or None for any other text. */
static PyObject *module_parse_ranks(PyObject *unused, PyObject *args) {
    (void)unused;
    Py_buffer given;
    if (!PyArg_ParseTuple(args, "y*", &given)) return NULL;
    const uint8_t *s = given.buf;
    size_t n = (size_t)given.len, count = 0;
    if (n == 0 || s[n - 1] != '\n' || n > ((size_t)1 << 40)) { PyBuffer_Release(&given); Py_RETURN_NONE; }
    for (const uint8_t *q = s; (q = memchr(q, '\n', (size_t)(s + n - q))) != NULL; q++) count++;
    if (count >= ((size_t)1 << 31)) { PyBuffer_Release(&given); Py_RETURN_NONE; }
    PyObject *joined = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n / 4 * 3 + 3));
    int64_t *ends = malloc((count ? count : 1) * sizeof(int64_t)), *ids = malloc((count ? count : 1) * sizeof(int64_t));
    if (!joined || !ends || !ids) {
        Py_XDECREF(joined);
        free(ends);
        free(ids);
        PyBuffer_Release(&given);
        return PyErr_NoMemory();
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(joined), *o = out;
    int ok = 1, canonical = 1, ascending = 1;
    size_t at = 0;
    for (size_t k = 0; k < count && ok; k++) {
        const uint8_t *line = s + at, *newline = memchr(line, '\n', n - at);
        const uint8_t *space = memchr(line, ' ', (size_t)(newline - line));
        if (!space) { ok = 0; break; }
        size_t size = (size_t)(space - line), digits = (size_t)(newline - space - 1);
        if (size < 4 || size % 4 || digits < 1 || digits > 10) { ok = 0; break; }
        /* '=' only as the padding: the last byte, or the last two */
        size_t pads = (line[size - 1] == '=') + (line[size - 2] == '=');
        if (line[size - 2] == '=' && line[size - 1] != '=') { ok = 0; break; }
        for (size_t q = 0; q + pads < size; q++) {
            if (line[q] == '=' || base64_value[line[q]] < 0) { ok = 0; break; }
        }
        if (!ok) break;
        for (size_t q = 0; q < size; q += 4) {
            uint32_t a = (uint32_t)base64_value[line[q]], b = (uint32_t)base64_value[line[q + 1]];
            uint32_t c = (uint32_t)base64_value[line[q + 2]], d = (uint32_t)base64_value[line[q + 3]];
            o[0] = (uint8_t)(a << 2 | b >> 4);
            o[1] = (uint8_t)(b << 4 | c >> 2);
            o[2] = (uint8_t)(c << 6 | d);
            o += 3;
        }
        o -= pads;
        /* the bits a padded quantum leaves over: 0 in the canonical text */
        if ((pads == 1 && (base64_value[line[size - 2]] & 3)) || (pads == 2 && (base64_value[line[size - 3]] & 15)))
            canonical = 0;
        uint64_t rank = 0;
        for (size_t q = 1; q <= digits; q++) {
            unsigned digit = (unsigned)space[q] - '0';
            if (digit > 9) { ok = 0; break; }
            rank = rank * 10 + digit;
        }
        if (!ok || rank >= ((uint64_t)1 << 32)) { ok = 0; break; }
        if (digits > 1 && space[1] == '0') canonical = 0;
        ends[k] = (int64_t)(o - out);
        ids[k] = (int64_t)rank;
        if (k && ids[k] <= ids[k - 1]) ascending = 0;
        at = (size_t)(newline - s) + 1;
    }
    PyBuffer_Release(&given);
    if (ok && !ascending) { /* no rank repeated */
        int64_t *sorted = malloc((count ? count : 1) * sizeof(int64_t));
        if (!sorted) { Py_DECREF(joined); free(ends); free(ids); return PyErr_NoMemory(); }
        memcpy(sorted, ids, count * sizeof(int64_t));
        qsort(sorted, count, sizeof(int64_t), compare_int64);
        for (size_t k = 1; k < count && ok; k++) ok = sorted[k] != sorted[k - 1];
        free(sorted);
    }
    if (ok) {
        int repeated = repeated_token(out, ends, count);
        if (repeated < 0) { Py_DECREF(joined); free(ends); free(ids); return PyErr_NoMemory(); }
        ok = !repeated;
    }
    if (!ok) {
        Py_DECREF(joined);
        free(ends);
        free(ids);
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&joined, (Py_ssize_t)(o - out)) < 0) { free(ends); free(ids); return NULL; }
    PyObject *end_buffer = buffer_wrap(ends, (Py_ssize_t)count, sizeof(int64_t), "q");
    if (!end_buffer) { Py_DECREF(joined); free(ids); return NULL; }
    PyObject *id_buffer = buffer_wrap(ids, (Py_ssize_t)count, sizeof(int64_t), "q");
    if (!id_buffer) { Py_DECREF(joined); Py_DECREF(end_buffer); return NULL; }
    return Py_BuildValue("(NNNO)", joined, end_buffer, id_buffer, (ascending && canonical) ? Py_True : Py_False);
}

/* ------------------------------------------------------------------------------------------ */
/* The merges a tokenizer.json lists, and their text                                         */
/* ------------------------------------------------------------------------------------------ */

/* For each token of `tokens`, the length of the left part of its last join (last_join; 0: a single
   byte) in left, one int64 each, and in *stuck the index of the token of lowest id that lower ids
   cannot build (-1: none; the first in rank order, whatever the tokens' order); 0, or -1 with a
   Python error. */
static int last_joins_of(Tokens *tokens, int64_t *left, Py_ssize_t *stuck) {
    Encoder tables;
    memset(&tables, 0, sizeof(tables));
    const uint8_t *p = NULL; /* (set by tokens_next before each use; gcc cannot tell) */
    size_t n = 0, longest = 0;
    uint32_t id;
    int more;
    tokens->pos = 0;
    while ((more = tokens_next(tokens, &p, &n, &id)) > 0)
        if (n > longest) longest = n;
    if (more < 0) return -1;
    uint32_t *scratch = malloc((2 * longest + 2) * sizeof(uint32_t));
    if (!scratch) { PyErr_NoMemory(); return -1; }
    if (tables_build(&tables, tokens, 0) < 0) {
        tables_free(&tables);
        free(scratch);
        return -1;
    }
    *stuck = -1;
    uint32_t stuck_id = 0;
    tokens->pos = 0;
    for (Py_ssize_t k = 0; tokens_next(tokens, &p, &n, &id) > 0; k++) {
        long at = n < 2 ? 0 : n == 2 ? 1 : last_join(&tables, p, n, id, scratch, scratch + n + 1);
        if (at < 0 && (*stuck < 0 || id < stuck_id)) { *stuck = k; stuck_id = id; }
        left[k] = at < 0 ? 0 : at;
    }
    tables_free(&tables);
    free(scratch);
    return 0;
}

static PyObject *module_last_joins(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *list;
    Py_buffer given;
    if (!PyArg_ParseTuple(args, "O!y*", &PyList_Type, &list, &given)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(list);
    if (given.len != count * (Py_ssize_t)sizeof(int64_t)) {
        PyBuffer_Release(&given);
        PyErr_SetString(PyExc_ValueError, "ids must be one int64 per token");
        return NULL;
    }
    Tokens tokens = {NULL, list, given.buf, 0, count, NULL, NULL, 0};
    int64_t *left = malloc((size_t)(count ? count : 1) * sizeof(int64_t));
    if (!left) { PyBuffer_Release(&given); return PyErr_NoMemory(); }
    Py_ssize_t stuck;
    int found = last_joins_of(&tokens, left, &stuck);
    PyBuffer_Release(&given);
    if (found < 0) { free(left); return NULL; }
    PyObject *lefts = buffer_wrap(left, count, sizeof(int64_t), "q");
    if (!lefts) return NULL;
    return Py_BuildValue("(Nn)", lefts, stuck);
}

static PyObject *module_table_last_joins(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *table;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &table)) return NULL;
    Tokens tokens;
    Py_buffer held[3];
    if (joined_tokens(table, &tokens, held) < 0) return NULL;
    int64_t *left = malloc((size_t)(tokens.count ? tokens.count : 1) * sizeof(int64_t));
    Py_ssize_t stuck, count = tokens.count;
    int found = left ? last_joins_of(&tokens, left, &stuck) : (PyErr_NoMemory(), -1);
    for (int k = 0; k < 3; k++) PyBuffer_Release(&held[k]);
    if (found < 0) { free(left); return NULL; }
    PyObject *lefts = buffer_wrap(left, count, sizeof(int64_t), "q");
    if (!lefts) return NULL;
    return Py_BuildValue("(Nn)", lefts, stuck);
}

/* The 256 byte spellings of a list of bytes objects; 0, or -1 if it is not one. */
static int spellings_of(PyObject *list, const char **spelled, size_t *width) {
    if (PyList_GET_SIZE(list) != 256) return -1;
    for (int b = 0; b < 256; b++) {
        PyObject *s = PyList_GET_ITEM(list, b);
        if (!PyBytes_Check(s)) return -1;
        spelled[b] = PyBytes_AS_STRING(s);
        width[b] = (size_t)PyBytes_GET_SIZE(s);
    }
    return 0;
}

static PyObject *module_entries_json(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *list, *spellings;
    Py_buffer given;
    if (!PyArg_ParseTuple(args, "O!y*O!", &PyList_Type, &list, &given, &PyList_Type, &spellings)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(list);
    const char *spelled[256];
    size_t width[256];
    int bad = given.len != count * (Py_ssize_t)sizeof(int64_t) || spellings_of(spellings, spelled, width) < 0;
    const int64_t *values = given.buf;
    size_t total = 0;
    for (Py_ssize_t k = 0; !bad && k < count; k++) {
        PyObject *key = PyList_GET_ITEM(list, k);
        if (!PyBytes_Check(key) || values[k] < 0) { bad = 1; break; }
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(key);
        size_t n = (size_t)PyBytes_GET_SIZE(key), digits = 1;
        for (int64_t v = values[k]; v >= 10; v /= 10) digits++;
        total += 6 + digits; /* "": value, */
        for (size_t q = 0; q < n; q++) total += width[p[q]];
    }
    if (bad) {
        PyBuffer_Release(&given);
        PyErr_SetString(PyExc_ValueError, "entries_json takes a list of bytes, one non-negative int64 value each, "
                                          "and 256 bytes spellings");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total ? total - 2 : 0));
    if (!out) { PyBuffer_Release(&given); return NULL; }
    char *d = PyBytes_AS_STRING(out), *end = d + (total ? total - 2 : 0);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *key = PyList_GET_ITEM(list, k);
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(key);
        size_t n = (size_t)PyBytes_GET_SIZE(key);
        *d++ = '"';
        for (size_t q = 0; q < n; q++) {
            memcpy(d, spelled[p[q]], width[p[q]]);
            d += width[p[q]];
        }
        memcpy(d, "\": ", 3);
        d += 3;
        char digits[24];
        size_t used = 0;
        int64_t v = values[k];
        do { digits[used++] = (char)('0' + v % 10); v /= 10; } while (v);
        while (used) *d++ = digits[--used];
        if (d < end) { *d++ = ','; *d++ = ' '; }
    }
    PyBuffer_Release(&given);
    return out;
}

static PyObject *module_pairs_json(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *list, *spellings;
    Py_buffer given;
    if (!PyArg_ParseTuple(args, "O!y*O!", &PyList_Type, &list, &given, &PyList_Type, &spellings)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(list);
    const char *spelled[256];
    size_t width[256];
    int bad = given.len != count * (Py_ssize_t)sizeof(int64_t) || spellings_of(spellings, spelled, width) < 0;
    const int64_t *cuts = given.buf;
    size_t total = 0;
    for (Py_ssize_t k = 0; !bad && k < count; k++) {
        if (cuts[k] == 0) continue;
        PyObject *token = PyList_GET_ITEM(list, k);
        if (!PyBytes_Check(token) || cuts[k] < 0 || cuts[k] >= PyBytes_GET_SIZE(token)) { bad = 1; break; }
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(token);
        size_t n = (size_t)PyBytes_GET_SIZE(token);
        total += 10; /* ["", ""], */
        for (size_t q = 0; q < n; q++) total += width[p[q]];
    }
    if (bad) {
        PyBuffer_Release(&given);
        PyErr_SetString(PyExc_ValueError, "pairs_json takes a list of bytes, one int64 cut each (from 0 to below "
                                          "the token's length), and 256 bytes spellings");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total ? total - 2 : 0));
    if (!out) { PyBuffer_Release(&given); return NULL; }
    char *d = PyBytes_AS_STRING(out), *end = d + (total ? total - 2 : 0);
    for (Py_ssize_t k = 0; k < count; k++) {
        if (cuts[k] == 0) continue;
        PyObject *token = PyList_GET_ITEM(list, k);
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(token);
        size_t n = (size_t)PyBytes_GET_SIZE(token), cut = (size_t)cuts[k];
        *d++ = '[';
        *d++ = '"';
        for (size_t q = 0; q < n; q++) {
            if (q == cut) { memcpy(d, "\", \"", 4); d += 4; }
            memcpy(d, spelled[p[q]], width[p[q]]);
            d += width[p[q]];
        }
        *d++ = '"';
        *d++ = ']';
        if (d < end) { *d++ = ','; *d++ = ' '; }
    }
    PyBuffer_Release(&given);
    return out;
}

/* How tokenizer_json spells each byte: in at most two bytes (GPT-2's alphabet, escaped, needs no
   more), each written as two and the pointer moved by its width, so the loop has no branch;
   anything wider is copied as it is. */
typedef struct {
    const char *spelled[256];
    size_t width[256];
    char pair[256][2];
    int narrow; /* every spelling of at most two bytes */
} Spelling;

/* p[0:n] spelled at d; the end. Writes one byte past it when narrow: the caller writes there next. */
static char *spell_bytes(char *d, const uint8_t *p, size_t n, const Spelling *s) {
    if (s->narrow) {
        for (size_t q = 0; q < n; q++) {
            memcpy(d, s->pair[p[q]], 2);
            d += s->width[p[q]];
        }
        return d;
    }
    for (size_t q = 0; q < n; q++) {
        memcpy(d, s->spelled[p[q]], s->width[p[q]]);
        d += s->width[p[q]];
    }
    return d;
}

/* The decimal digits of v (non-negative) at d; the end. */
static char *write_decimal(char *d, int64_t v) {
    char digits[24];
    size_t used = 0;
    do { digits[used++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (used) *d++ = digits[--used];
    return d;
}

static size_t decimal_width(int64_t v) {
    size_t digits = 1;
    for (; v >= 10; v /= 10) digits++;
    return digits;
}

typedef struct { int64_t id; Py_ssize_t index; } Ordered;

static int compare_ordered(const void *a, const void *b) {
    const Ordered *x = a, *y = b;
    if (x->id != y->id) return (x->id > y->id) - (x->id < y->id);
    return (x->index > y->index) - (x->index < y->index);
}

static PyObject *module_tokenizer_json(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *table, *names, *spellings, *parts, *out = NULL;
    Py_buffer cut_buffer, name_buffer, held[3];
    if (!PyArg_ParseTuple(args, "O!y*O!y*O!O!", &PyTuple_Type, &table, &cut_buffer, &PyList_Type, &names,
                          &name_buffer, &PyList_Type, &spellings, &PyTuple_Type, &parts))
        return NULL;
    Tokens tokens;
    if (joined_tokens(table, &tokens, held) < 0) {
        PyBuffer_Release(&cut_buffer);
        PyBuffer_Release(&name_buffer);
        return NULL;
    }
    Py_ssize_t count = tokens.count, name_count = PyList_GET_SIZE(names);
    const uint8_t *joined = tokens.joined;
    const int64_t *ends = tokens.ends, *ids = tokens.ids, *cuts = cut_buffer.buf, *name_ids = name_buffer.buf;
    Spelling spelling;
    const size_t *width = spelling.width;
    Ordered *order = NULL;
    int bad = cut_buffer.len != count * (Py_ssize_t)sizeof(int64_t)
              || name_buffer.len != name_count * (Py_ssize_t)sizeof(int64_t)
              || spellings_of(spellings, spelling.spelled, spelling.width) < 0 || PyTuple_GET_SIZE(parts) != 3;
    spelling.narrow = 1;
    for (int b = 0; !bad && b < 256; b++) {
        memset(spelling.pair[b], 0, 2);
        if (spelling.width[b] > 2) spelling.narrow = 0;
        else memcpy(spelling.pair[b], spelling.spelled[b], spelling.width[b]);
    }
    for (int k = 0; !bad && k < 3; k++) bad = !PyBytes_Check(PyTuple_GET_ITEM(parts, k));
    /* Sizes first: the vocabulary ("key": id, ), then the merges (["left", "right"], ). */
    size_t entries = 0, pairs = 0;
    int ascending = 1;
    for (Py_ssize_t k = 0; !bad && k < count; k++) {
        int64_t start = k ? ends[k - 1] : 0, n = ends[k] - start;
        if (n < 0 || ends[k] > (int64_t)tokens.joined_len || ids[k] < 0 || cuts[k] < 0 || (cuts[k] && cuts[k] >= n)) {
            bad = 1;
            break;
        }
        if (k && ids[k] <= ids[k - 1]) ascending = 0;
        size_t spelled_width = 0;
        for (int64_t q = start; q < ends[k]; q++) spelled_width += width[joined[q]];
        entries += 6 + decimal_width(ids[k]) + spelled_width;
        if (cuts[k]) pairs += 10 + spelled_width;
    }
    for (Py_ssize_t k = 0; !bad && k < name_count; k++) {
        PyObject *name = PyList_GET_ITEM(names, k);
        if (!PyBytes_Check(name) || name_ids[k] < 0 || (k && name_ids[k] < name_ids[k - 1])) { bad = 1; break; }
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(name);
        entries += 6 + decimal_width(name_ids[k]);
        for (Py_ssize_t q = 0; q < PyBytes_GET_SIZE(name); q++) entries += width[p[q]];
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "tokenizer_json takes a table (joined, ends, ids: rising ends, ids not "
                                          "negative), one int64 cut per token (0, or from 1 to below its length), "
                                          "names (bytes) with their int64 ids in rising order, 256 bytes spellings "
                                          "and three bytes parts");
        goto done;
    }
    /* A name spelled as a token would be a second key of one spelling, whose ids Hugging Face and
       tiktoken read apart: refused, never written. */
    for (Py_ssize_t m = 0; m < name_count; m++) {
        PyObject *name = PyList_GET_ITEM(names, m);
        Py_ssize_t n = PyBytes_GET_SIZE(name);
        for (Py_ssize_t k = 0; k < count; k++) {
            int64_t start = k ? ends[k - 1] : 0;
            if (ends[k] - start == n && memcmp(joined + start, PyBytes_AS_STRING(name), (size_t)n) == 0) {
                PyErr_Format(PyExc_ValueError, "tokenizer_json: name %zd (id %lld) is spelled as the token of id %lld: "
                             "a tokenizer.json holds one id a spelling", m, (long long)name_ids[m], (long long)ids[k]);
                goto done;
            }
        }
    }
    if (!ascending) { /* the vocabulary and the merges go in id order, ties in the table's */
        order = malloc((size_t)(count ? count : 1) * sizeof(Ordered));
        if (!order) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t k = 0; k < count; k++) { order[k].id = ids[k]; order[k].index = k; }
        qsort(order, (size_t)count, sizeof(Ordered), compare_ordered);
    }
    PyObject *head = PyTuple_GET_ITEM(parts, 0), *middle = PyTuple_GET_ITEM(parts, 1), *tail = PyTuple_GET_ITEM(parts, 2);
    if (entries) entries -= 2; /* no ", " after the last */
    if (pairs) pairs -= 2;
    size_t total = (size_t)PyBytes_GET_SIZE(head) + entries + (size_t)PyBytes_GET_SIZE(middle) + pairs
                   + (size_t)PyBytes_GET_SIZE(tail);
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!out) goto done;
    char *d = PyBytes_AS_STRING(out);
    memcpy(d, PyBytes_AS_STRING(head), (size_t)PyBytes_GET_SIZE(head));
    d += PyBytes_GET_SIZE(head);
    /* The tokens and the names in id order (a token before a name of the same id). */
    Py_ssize_t t = 0, m = 0;
    while (t < count || m < name_count) {
        Py_ssize_t k = t < count ? (order ? order[t].index : t) : -1;
        int token = k >= 0 && (m >= name_count || ids[k] <= name_ids[m]);
        const uint8_t *p;
        size_t n;
        int64_t id;
        if (token) {
            int64_t start = k ? ends[k - 1] : 0;
            p = joined + start;
            n = (size_t)(ends[k] - start);
            id = ids[k];
            t++;
        } else {
            PyObject *name = PyList_GET_ITEM(names, m);
            p = (const uint8_t *)PyBytes_AS_STRING(name);
            n = (size_t)PyBytes_GET_SIZE(name);
            id = name_ids[m];
            m++;
        }
        if (t + m > 1) { *d++ = ','; *d++ = ' '; }
        *d++ = '"';
        d = spell_bytes(d, p, n, &spelling);
        memcpy(d, "\": ", 3);
        d += 3;
        d = write_decimal(d, id);
    }
    memcpy(d, PyBytes_AS_STRING(middle), (size_t)PyBytes_GET_SIZE(middle));
    d += PyBytes_GET_SIZE(middle);
    int first = 1;
    for (Py_ssize_t r = 0; r < count; r++) {
        Py_ssize_t k = order ? order[r].index : r;
        if (!cuts[k]) continue;
        int64_t start = k ? ends[k - 1] : 0;
        if (!first) { *d++ = ','; *d++ = ' '; }
        first = 0;
        memcpy(d, "[\"", 2);
        d = spell_bytes(d + 2, joined + start, (size_t)cuts[k], &spelling);
        memcpy(d, "\", \"", 4);
        d = spell_bytes(d + 4, joined + start + cuts[k], (size_t)(ends[k] - start - cuts[k]), &spelling);
        memcpy(d, "\"]", 2);
        d += 2;
    }
    memcpy(d, PyBytes_AS_STRING(tail), (size_t)PyBytes_GET_SIZE(tail));
    d += PyBytes_GET_SIZE(tail);
done:
    free(order);
    for (int k = 0; k < 3; k++) PyBuffer_Release(&held[k]);
    PyBuffer_Release(&cut_buffer);
    PyBuffer_Release(&name_buffer);
    return out;
}

static PyMethodDef module_methods[] = {
    {"parse_ranks", (PyCFunction)module_parse_ranks, METH_VARARGS,
     "parse_ranks(text) -> (joined, ends, ids, canonical) or None: the tokens of a rank file's text laid "
     "out as tiktoken writes one (every line 'base64 rank' and a newline, padded base64 of at least one "
     "byte, a rank below 2**32, no token or rank repeated), their bytes one after another (bytes), each "
     "one's end and rank (int64 buffers, in the file's order), and whether the text is the canonical "
     "one (in rank order, no leading zero, no leftover bits); None for any other text."},
    {"utf8_characters", (PyCFunction)module_utf8_characters, METH_VARARGS,
     "utf8_characters(data) -> int: the characters of UTF-8 bytes (those that are no continuation byte; "
     "data is not checked)."},
    {"utf8_checks", (PyCFunction)module_utf8_checks, METH_VARARGS,
     "utf8_checks(data) -> (valid, start): the two checks of bytes as UTF-8 the encoder makes, for tests: "
     "whether the vector check finds them UTF-8 (None where the CPU has no SSSE3), and where the "
     "character-at-a-time scan finds the first sequence that is no character (-1: none)."},
    {"last_joins", (PyCFunction)module_last_joins, METH_VARARGS,
     "last_joins(tokens, ids) -> (left, stuck): for each token (a list of bytes; ids: one int64 each, "
     "from 0 to below MAX_ID), the length of the left part of the last join tiktoken's rank rule makes "
     "when it encodes the token alone, joining only pairs that make a token of a lower id (0 for a "
     "single byte), as an int64 buffer for numpy.frombuffer; and the index of the token of lowest id "
     "that lower ids cannot build (-1: none)."},
    {"table_last_joins", (PyCFunction)module_table_last_joins, METH_VARARGS,
     "table_last_joins((joined, ends, ids)) -> (left, stuck): last_joins of a table's tokens (their bytes "
     "one after another, each one's end and id, int64 buffers), in the table's order; stuck: the index "
     "of the token of lowest id that lower ids cannot build (-1: none)."},
    {"tokenizer_json", (PyCFunction)module_tokenizer_json, METH_VARARGS,
     "tokenizer_json((joined, ends, ids), cuts, names, name_ids, spellings, (head, middle, tail)) -> bytes: "
     "head, then \"token\": id for each token of the table and each name (bytes; name_ids: int64, rising) "
     "in id order (a token before a name of the same id), joined by ', ', then middle, then [\"left\", "
     "\"right\"] for each token cut in two (cuts: int64 in the table's order, the left part's length; 0: "
     "not cut, left out) in id order, joined by ', ', then tail; each byte written as spellings[byte] "
     "says (a tokenizer.json, as json.dumps writes it); ValueError for a name spelled as one of the tokens."},
    {"pairs_json", (PyCFunction)module_pairs_json, METH_VARARGS,
     "pairs_json(tokens, cuts, spellings) -> bytes: [\"left\", \"right\"] for each token cut in two (cuts: "
     "int64, the left part's length; 0: not cut, left out), each byte written as spellings[byte] says, "
     "joined by ', ' (a tokenizer.json's merges, as json.dumps writes them)."},
    {"entries_json", (PyCFunction)module_entries_json, METH_VARARGS,
     "entries_json(keys, values, spellings) -> bytes: \"key\": value for each key (bytes, each byte written "
     "as spellings[byte] says) and value (int64, non-negative), joined by ', ' (a tokenizer.json's "
     "vocabulary, as json.dumps writes a dict)."},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------------------------------ */
/* The module                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tokpack.vocab._bpe",
    .m_doc = "tokpack's compiled BPE encoder (see tokpack.vocab.compiled).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__bpe(void) {
#ifdef TP_SSSE3
    ssse3_ok = __builtin_cpu_supports("ssse3");
#endif
    scan_check();
    base64_init();
    str_utf8_init();
    utf8_init();
    if (PyType_Ready(&BufferType) < 0 || PyType_Ready(&CacheType) < 0 || PyType_Ready(&EncoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&EncoderType);
    Py_INCREF(&CacheType);
    Py_INCREF(&BufferType);
    if (PyModule_AddObject(m, "Encoder", (PyObject *)&EncoderType) < 0
        || PyModule_AddObject(m, "Cache", (PyObject *)&CacheType) < 0
        || PyModule_AddObject(m, "Buffer", (PyObject *)&BufferType) < 0
        || PyModule_AddIntConstant(m, "MAX_ID", MAX_ID) < 0
        || PyModule_AddIntConstant(m, "SHORT", SHORT) < 0
        || PyModule_AddIntConstant(m, "WINDOWS", window_ok) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
