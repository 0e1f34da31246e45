/* fused_safetensors.h: safetensors for generated C models (C11, libc only; shipped beside the
 * generated files). Everything here runs at init or in the scorer, never inside prefill/decode.
 *
 *   fst_json_parse / fst_json_get / fst_json_free  a small strict JSON reader (depth-limited, UTF-8
 *                                                  checked, \u escapes)
 *   fst_open / fst_open_stream / fst_close         a .safetensors file: header length and JSON
 *                                                  validated, every tensor's dtype, shape and byte
 *                                                  range checked against the file before any read,
 *                                                  as fused's C++ reader does (tests/codegen/
 *                                                  test_c_safetensors.cpp, tests/fuzz/fuzz_c_safetensors.cpp)
 *   fst_bind_weights                               fills a weights region from one or more files by
 *                                                  name: every tensor the table lists must be there
 *                                                  with its shape; a tensor it does not list is an
 *                                                  error (lm_head.weight of the embedding's shape is
 *                                                  ignored when tied, as transformers does); BF16 is
 *                                                  read in place, F32 and F16 are rounded to bf16
 *                                                  (nearest even) as fused's C++ loader does
 *   fst_model_files                                a Hugging Face directory's model.safetensors, or the
 *                                                  shards its model.safetensors.index.json lists
 *   fst_write                                      writes F32/I32 tensors as a .safetensors file
 * Errors: functions return 0 on success, -1 with a sentence in `err` naming the file and the tensor. */
#ifndef FUSED_SAFETENSORS_H
#define FUSED_SAFETENSORS_H

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FST_API static inline
#define FST_MAX_RANK 8
#define FST_MAX_HEADER ((uint64_t)100000000) /* the format's own limit on the JSON header (the reference loader's) */

FST_API void fst__fail(char* err, size_t n, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && n) vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

/* ---- JSON ------------------------------------------------------------------------------------- */
typedef enum { FST_NULL, FST_BOOL, FST_NUMBER, FST_STRING, FST_ARRAY, FST_OBJECT } fst_type;

typedef struct fst_json {
  fst_type type;
  char* key;             /* member name when inside an object */
  char* str;             /* FST_STRING */
  double num;            /* FST_NUMBER, FST_BOOL */
  int is_int;            /* FST_NUMBER written without fraction or exponent */
  int64_t i;             /* its value when is_int */
  struct fst_json* kids; /* FST_ARRAY, FST_OBJECT */
  size_t n, cap;
} fst_json;

typedef struct {
  const char* p;
  const char* end;
  const char* what; /* file name, for messages */
  const char* kind; /* what the text is, for messages: "JSON", or "JSON header" (a safetensors file's) */
  char* err;
  size_t errn;
  int failed;
  int max_depth; /* containers nest at most this deep (the outermost is depth 0) */
} fst__parser;

FST_API void fst_json_free(fst_json* j) {
  size_t k;
  if (!j) return;
  for (k = 0; k < j->n; ++k) fst_json_free(&j->kids[k]);
  free(j->kids);
  free(j->key);
  free(j->str);
  j->kids = NULL;
  j->key = j->str = NULL;
  j->n = j->cap = 0;
}

FST_API int fst__perr(fst__parser* ps, const char* msg) {
  if (!ps->failed) fst__fail(ps->err, ps->errn, "%s: invalid %s: %s", ps->what, ps->kind, msg);
  ps->failed = 1;
  return -1;
}

FST_API void fst__ws(fst__parser* ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ++ps->p;
}

FST_API int fst__hex4(const char* p, unsigned* v) {
  int k;
  *v = 0;
  for (k = 0; k < 4; ++k) {
    const char c = p[k];
    *v <<= 4;
    if (c >= '0' && c <= '9') *v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') *v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') *v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  return 0;
}

/* A JSON string at ps->p (the opening quote) as a malloc'd UTF-8 C string. */
FST_API char* fst__string(fst__parser* ps) {
  const char* s = ps->p + 1;
  size_t cap = 16, len = 0;
  char* out = (char*)malloc(cap);
  if (!out) { fst__perr(ps, "out of memory"); return NULL; }
  while (s < ps->end && *s != '"') {
    unsigned cp = (unsigned char)*s++;
    int raw = 1; /* a byte as written (UTF-8 passes through unchanged) */
    if (cp < 0x20) { free(out); fst__perr(ps, "control character in a string"); return NULL; }
    if (cp == '\\') {
      raw = 0;
      if (s >= ps->end) break;
      const char e = *s++;
      switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
          if (ps->end - s < 4 || fst__hex4(s, &cp)) { free(out); fst__perr(ps, "bad \\u escape"); return NULL; }
          s += 4;
          if (cp == 0) { free(out); fst__perr(ps, "\\u0000 in a string (names are C strings)"); return NULL; }
          if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
            unsigned lo;
            if (ps->end - s < 6 || s[0] != '\\' || s[1] != 'u' || fst__hex4(s + 2, &lo) || lo < 0xDC00 || lo >= 0xE000) {
              free(out);
              fst__perr(ps, "unpaired surrogate");
              return NULL;
            }
            s += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            free(out);
            fst__perr(ps, "unpaired surrogate");
            return NULL;
          }
          break;
        default: free(out); fst__perr(ps, "bad escape"); return NULL;
      }
    }
    if (len + 5 > cap) {
      char* bigger = (char*)realloc(out, cap *= 2);
      if (!bigger) { free(out); fst__perr(ps, "out of memory"); return NULL; }
      out = bigger;
    }
    if (raw && cp >= 0x80) { /* UTF-8 as RFC 3629 has it: no overlong forms, no surrogates, at most U+10FFFF */
      unsigned lo = 0x80, hi = 0xBF;
      ptrdiff_t need = 0, k;
      if (cp >= 0xC2 && cp <= 0xDF) need = 1;
      else if (cp >= 0xE0 && cp <= 0xEF) need = 2, lo = cp == 0xE0 ? 0xA0 : 0x80, hi = cp == 0xED ? 0x9F : 0xBF;
      else if (cp >= 0xF0 && cp <= 0xF4) need = 3, lo = cp == 0xF0 ? 0x90 : 0x80, hi = cp == 0xF4 ? 0x8F : 0xBF;
      for (k = 0; need && k < need; ++k) {
        const unsigned b = k < ps->end - s ? (unsigned char)s[k] : 0;
        if (b < (k ? 0x80u : lo) || b > (k ? 0xBFu : hi)) need = 0;
      }
      if (!need) { free(out); fst__perr(ps, "a string is not valid UTF-8"); return NULL; }
      out[len++] = (char)cp;
      for (k = 0; k < need; ++k) out[len++] = *s++;
    } else if (raw || cp < 0x80) {
      out[len++] = (char)cp;
    } else if (cp < 0x800) {
      out[len++] = (char)(0xC0 | (cp >> 6));
      out[len++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out[len++] = (char)(0xE0 | (cp >> 12));
      out[len++] = (char)(0x80 | ((cp >> 6) & 0x3F));
      out[len++] = (char)(0x80 | (cp & 0x3F));
    } else {
      out[len++] = (char)(0xF0 | (cp >> 18));
      out[len++] = (char)(0x80 | ((cp >> 12) & 0x3F));
      out[len++] = (char)(0x80 | ((cp >> 6) & 0x3F));
      out[len++] = (char)(0x80 | (cp & 0x3F));
    }
  }
  if (s >= ps->end) { free(out); fst__perr(ps, "unterminated string"); return NULL; }
  out[len] = '\0';
  ps->p = s + 1;
  return out;
}

FST_API int fst__value(fst__parser* ps, fst_json* out, int depth);

FST_API int fst__push(fst__parser* ps, fst_json* parent, fst_json** kid) {
  if (parent->n == parent->cap) {
    const size_t cap = parent->cap ? parent->cap * 2 : 8;
    fst_json* bigger = (fst_json*)realloc(parent->kids, cap * sizeof(fst_json));
    if (!bigger) return fst__perr(ps, "out of memory");
    parent->kids = bigger;
    parent->cap = cap;
  }
  *kid = &parent->kids[parent->n++];
  memset(*kid, 0, sizeof(fst_json));
  return 0;
}

FST_API int fst__value(fst__parser* ps, fst_json* out, int depth) {
  memset(out, 0, sizeof *out);
  fst__ws(ps);
  if (ps->p >= ps->end) return fst__perr(ps, "unexpected end");
  const char c = *ps->p;
  if ((c == '{' || c == '[') && depth > ps->max_depth) return fst__perr(ps, "nested too deep");
  if (c == '{' || c == '[') {
    const char close = c == '{' ? '}' : ']';
    out->type = c == '{' ? FST_OBJECT : FST_ARRAY;
    ++ps->p;
    fst__ws(ps);
    if (ps->p < ps->end && *ps->p == close) { ++ps->p; return 0; }
    for (;;) {
      fst_json* kid = NULL;
      char* key = NULL;
      fst__ws(ps);
      if (out->type == FST_OBJECT) {
        if (ps->p >= ps->end || *ps->p != '"') return fst__perr(ps, "expected a member name");
        if (!(key = fst__string(ps))) return -1;
        fst__ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') { free(key); return fst__perr(ps, "expected ':'"); }
        ++ps->p;
      }
      if (fst__push(ps, out, &kid)) { free(key); return -1; }
      if (fst__value(ps, kid, depth + 1)) { free(key); return -1; }
      kid->key = key;
      fst__ws(ps);
      if (ps->p < ps->end && *ps->p == ',') { ++ps->p; continue; }
      if (ps->p < ps->end && *ps->p == close) { ++ps->p; return 0; }
      return fst__perr(ps, "expected ',' or a closing bracket");
    }
  }
  if (c == '"') {
    out->type = FST_STRING;
    return (out->str = fst__string(ps)) ? 0 : -1;
  }
  if (ps->end - ps->p >= 4 && !strncmp(ps->p, "null", 4)) { out->type = FST_NULL; ps->p += 4; return 0; }
  if (ps->end - ps->p >= 4 && !strncmp(ps->p, "true", 4)) { out->type = FST_BOOL; out->num = 1; ps->p += 4; return 0; }
  if (ps->end - ps->p >= 5 && !strncmp(ps->p, "false", 5)) { out->type = FST_BOOL; ps->p += 5; return 0; }
  if (c == '-' || (c >= '0' && c <= '9')) { /* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char* q = ps->p;
    const int negative = c == '-';
    int integral = 1, overflow = 0;
    uint64_t mag = 0;
    char buf[64], *stop;
#define FST__DIGIT(at) ((at) < ps->end && *(at) >= '0' && *(at) <= '9')
    q += negative;
    if (!FST__DIGIT(q)) return fst__perr(ps, "bad number");
    if (*q == '0') ++q;
    else
      for (; FST__DIGIT(q); ++q) {
        const unsigned d = (unsigned)(*q - '0');
        if (mag > (UINT64_MAX - d) / 10) overflow = 1;
        else mag = mag * 10 + d;
      }
    if (q < ps->end && *q == '.') {
      integral = 0;
      ++q;
      if (!FST__DIGIT(q)) return fst__perr(ps, "bad number");
      while (FST__DIGIT(q)) ++q;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
      integral = 0;
      if (++q < ps->end && (*q == '+' || *q == '-')) ++q;
      if (!FST__DIGIT(q)) return fst__perr(ps, "bad number");
      while (FST__DIGIT(q)) ++q;
    }
#undef FST__DIGIT
    if ((size_t)(q - ps->p) >= sizeof buf) return fst__perr(ps, "a number longer than 63 characters");
    memcpy(buf, ps->p, (size_t)(q - ps->p));
    buf[q - ps->p] = '\0';
    out->type = FST_NUMBER;
    out->num = strtod(buf, &stop);
    if (out->num > DBL_MAX || out->num < -DBL_MAX) return fst__perr(ps, "number out of range");
    /* is_int: an integer that fits int64_t ("-0" is left a float, as nlohmann's unsigned check has it) */
    if (integral && !overflow && (negative ? mag != 0 && mag - 1 <= (uint64_t)INT64_MAX : mag <= (uint64_t)INT64_MAX)) {
      out->is_int = 1;
      out->i = negative ? -(int64_t)(mag - 1) - 1 : (int64_t)mag;
    }
    ps->p = q;
    return 0;
  }
  return fst__perr(ps, "unexpected character");
}

/* Parses `len` bytes of JSON with containers at most `max_depth` deep (the outermost is 0); `kind`
 * names the text in messages. */
FST_API int fst__json_parse_depth(const char* text, size_t len, const char* what, const char* kind, int max_depth, fst_json* out, char* err,
                                  size_t errn) {
  fst__parser ps;
  ps.p = text;
  ps.end = text + len;
  ps.what = what;
  ps.kind = kind;
  ps.err = err;
  ps.errn = errn;
  ps.failed = 0;
  ps.max_depth = max_depth;
  if (fst__value(&ps, out, 0)) { fst_json_free(out); return -1; }
  fst__ws(&ps);
  if (ps.p != ps.end) { fst_json_free(out); return fst__perr(&ps, "text after the value"); }
  return 0;
}

/* Parses `len` bytes of JSON (strict RFC 8259, UTF-8, containers at most 32 deep, no \u0000);
 * `what` names the file in messages. */
FST_API int fst_json_parse(const char* text, size_t len, const char* what, fst_json* out, char* err, size_t errn) {
  return fst__json_parse_depth(text, len, what, "JSON", 32, out, err, errn);
}

/* The member `key` of an object, or NULL. */
FST_API const fst_json* fst_json_get(const fst_json* obj, const char* key) {
  size_t k;
  if (!obj || obj->type != FST_OBJECT) return NULL;
  for (k = 0; k < obj->n; ++k)
    if (!strcmp(obj->kids[k].key, key)) return &obj->kids[k];
  return NULL;
}

/* ---- reading a .safetensors file ---------------------------------------------------------------- */
typedef enum { FST_BF16, FST_F16, FST_F32, FST_I32, FST_I64, FST_OTHER } fst_dtype;

typedef struct {
  const char* name;
  fst_dtype dtype;
  const char* dtype_name;
  int rank;
  int64_t shape[FST_MAX_RANK];
  uint64_t begin, end; /* bytes, relative to the data section */
} fst_tensor;

typedef struct {
  FILE* f;
  char path[512];
  fst_json header;
  fst_tensor* tensors;
  size_t count;
  uint64_t data_start, data_bytes;
  const char* fingerprint; /* __metadata__.fused_weights_fingerprint, or NULL */
} fst_file;

FST_API void fst_close(fst_file* f) {
  if (f->f) fclose(f->f);
  f->f = NULL;
  fst_json_free(&f->header);
  free(f->tensors);
  f->tensors = NULL;
  f->count = 0;
}

FST_API int fst__dtype(const char* s, fst_dtype* d, uint64_t* size) {
  static const struct { const char* name; fst_dtype d; unsigned size; } known[] = {
      {"BF16", FST_BF16, 2}, {"F16", FST_F16, 2},   {"F32", FST_F32, 4},     {"I32", FST_I32, 4},         {"I64", FST_I64, 8},
      {"F64", FST_OTHER, 8}, {"U64", FST_OTHER, 8}, {"U32", FST_OTHER, 4},   {"I16", FST_OTHER, 2},       {"U16", FST_OTHER, 2},
      {"I8", FST_OTHER, 1},  {"U8", FST_OTHER, 1},  {"BOOL", FST_OTHER, 1},  {"F8_E5M2", FST_OTHER, 1},   {"F8_E4M3", FST_OTHER, 1},
      {"F8_E8M0", FST_OTHER, 1}};
  size_t k;
  for (k = 0; k < sizeof known / sizeof known[0]; ++k)
    if (!strcmp(s, known[k].name)) { *d = known[k].d; *size = known[k].size; return 0; }
  return -1;
}

FST_API int fst__by_name(const void* a, const void* b) {
  return strcmp((*(const fst_tensor* const*)a)->name, (*(const fst_tensor* const*)b)->name);
}
FST_API int fst__by_offsets(const void* a, const void* b) {
  const fst_tensor *x = *(const fst_tensor* const*)a, *y = *(const fst_tensor* const*)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* The member `key` of a tensor entry, which must appear at most once (a JSON reader would keep either). */
FST_API int fst__member(const fst_json* entry, const char* key, const fst_json** out) {
  size_t k;
  *out = NULL;
  for (k = 0; k < entry->n; ++k)
    if (!strcmp(entry->kids[k].key, key)) {
      if (*out) return -1;
      *out = &entry->kids[k];
    }
  return 0;
}

/* Checks f->header as a safetensors header (see fst_open) and fills f->tensors. */
FST_API int fst__tensors(fst_file* f, char* err, size_t errn) {
  const char* path = f->path;
  const fst_tensor** order = NULL;
  size_t k, d, n_metadata = 0;
  if (f->header.type != FST_OBJECT) { fst__fail(err, errn, "%s: the header is not a JSON object", path); return -1; }
  if (!(f->tensors = (fst_tensor*)calloc(f->header.n + 1, sizeof(fst_tensor))) ||
      !(order = (const fst_tensor**)malloc((f->header.n + 1) * sizeof *order))) {
    fst__fail(err, errn, "%s: out of memory", path);
    return -1;
  }
  for (k = 0; k < f->header.n; ++k) {
    const fst_json* e = &f->header.kids[k];
    const fst_json *dt, *shp, *off;
    fst_tensor* t = &f->tensors[f->count];
    uint64_t elem, bytes;
    int zero = 0;
    if (!strcmp(e->key, "__metadata__")) {
      if (++n_metadata > 1) { fst__fail(err, errn, "%s: the header lists \"__metadata__\" twice", path); goto fail; }
      if (e->type != FST_OBJECT) { fst__fail(err, errn, "%s: \"__metadata__\" is not a JSON object", path); goto fail; }
      for (d = 0; d < e->n; ++d)
        if (e->kids[d].type != FST_STRING) {
          fst__fail(err, errn, "%s: \"__metadata__\" entry \"%s\" is not a string", path, e->kids[d].key);
          goto fail;
        }
      {
        const fst_json* fp = fst_json_get(e, "fused_weights_fingerprint");
        if (fp) f->fingerprint = fp->str;
      }
      continue;
    }
    if (e->type != FST_OBJECT) { fst__fail(err, errn, "%s: tensor \"%s\": entry is not a JSON object", path, e->key); goto fail; }
    if (fst__member(e, "dtype", &dt) || fst__member(e, "shape", &shp) || fst__member(e, "data_offsets", &off)) {
      fst__fail(err, errn, "%s: tensor \"%s\": \"dtype\", \"shape\" or \"data_offsets\" appears twice", path, e->key);
      goto fail;
    }
    if (!dt || dt->type != FST_STRING) { fst__fail(err, errn, "%s: tensor \"%s\": \"dtype\" is missing or not a string", path, e->key); goto fail; }
    if (!shp || shp->type != FST_ARRAY) { fst__fail(err, errn, "%s: tensor \"%s\": \"shape\" is missing or not a list", path, e->key); goto fail; }
    if (!off || off->type != FST_ARRAY || off->n != 2) {
      fst__fail(err, errn, "%s: tensor \"%s\": \"data_offsets\" is missing or not a list [begin, end]", path, e->key);
      goto fail;
    }
    t->name = e->key;
    t->dtype_name = dt->str;
    if (fst__dtype(dt->str, &t->dtype, &elem)) { fst__fail(err, errn, "%s: tensor \"%s\": unknown dtype \"%s\"", path, e->key, dt->str); goto fail; }
    if (shp->n > FST_MAX_RANK) {
      fst__fail(err, errn, "%s: tensor \"%s\": shape has %zu dimensions, more than the %d this reader takes", path, e->key, shp->n, FST_MAX_RANK);
      goto fail;
    }
    t->rank = (int)shp->n;
    for (d = 0; d < shp->n; ++d) {
      const fst_json* x = &shp->kids[d];
      if (x->type != FST_NUMBER || !x->is_int || x->i < 0) {
        fst__fail(err, errn, "%s: tensor \"%s\": shape dimension %zu is not a non-negative 64-bit integer", path, e->key, d);
        goto fail;
      }
      t->shape[d] = x->i;
      zero |= x->i == 0;
    }
    /* bytes = elem * the dimensions; a zero dimension makes the tensor empty whatever the others are */
    bytes = zero ? 0 : elem;
    for (d = 0; d < shp->n && bytes; ++d) {
      if ((uint64_t)t->shape[d] > UINT64_MAX / bytes) {
        fst__fail(err, errn, "%s: tensor \"%s\": shape of %s holds more bytes than 2^64", path, e->key, dt->str);
        goto fail;
      }
      bytes *= (uint64_t)t->shape[d];
    }
    for (d = 0; d < 2; ++d)
      if (off->kids[d].type != FST_NUMBER || !off->kids[d].is_int || off->kids[d].i < 0) {
        fst__fail(err, errn, "%s: tensor \"%s\": data_offsets are not non-negative 64-bit integers", path, e->key);
        goto fail;
      }
    t->begin = (uint64_t)off->kids[0].i;
    t->end = (uint64_t)off->kids[1].i;
    if (t->end < t->begin) {
      fst__fail(err, errn, "%s: tensor \"%s\": data_offsets [%llu, %llu] end before they begin", path, e->key, (unsigned long long)t->begin,
                (unsigned long long)t->end);
      goto fail;
    }
    if (t->end - t->begin != bytes) {
      fst__fail(err, errn, "%s: tensor \"%s\": data_offsets [%llu, %llu] span %llu bytes, but its shape of %s needs %llu", path, e->key,
                (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)(t->end - t->begin), dt->str,
                (unsigned long long)bytes);
      goto fail;
    }
    if (t->end > f->data_bytes) {
      fst__fail(err, errn, "%s: tensor \"%s\": data_offsets [%llu, %llu] reach past the data area of %llu bytes", path, e->key,
                (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)f->data_bytes);
      goto fail;
    }
    order[f->count++] = t;
  }
  /* Sorted, each name must differ from the next; sorted by begin, each non-empty span must start where
   * the one before it ended (the first at 0), and the last end where the data area does (empty spans
   * hold no bytes). O(n log n) for hostile headers. */
  {
    const fst_tensor* previous = NULL;
    uint64_t filled = 0;
    if (f->count > 1) {
      qsort((void*)order, f->count, sizeof *order, fst__by_name);
      for (k = 1; k < f->count; ++k)
        if (!strcmp(order[k - 1]->name, order[k]->name)) {
          fst__fail(err, errn, "%s: the header lists tensor \"%s\" twice", path, order[k]->name);
          goto fail;
        }
      qsort((void*)order, f->count, sizeof *order, fst__by_offsets);
    }
    for (k = 0; k < f->count; ++k) {
      const fst_tensor* t = order[k];
      if (t->begin == t->end) continue;
      if (t->begin < filled) {
        fst__fail(err, errn, "%s: tensor \"%s\": data_offsets [%llu, %llu] overlap those of tensor \"%s\" [%llu, %llu]", path, t->name,
                  (unsigned long long)t->begin, (unsigned long long)t->end, previous->name, (unsigned long long)previous->begin,
                  (unsigned long long)previous->end);
        goto fail;
      }
      if (t->begin > filled) {
        if (previous)
          fst__fail(err, errn,
                    "%s: tensor \"%s\": data_offsets [%llu, %llu] leave %llu bytes unused before it (after tensor \"%s\" [%llu, %llu]); the "
                    "tensors must fill the data area in order (the reference loader refuses this file too)",
                    path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)(t->begin - filled),
                    previous->name, (unsigned long long)previous->begin, (unsigned long long)previous->end);
        else
          fst__fail(err, errn,
                    "%s: tensor \"%s\": data_offsets [%llu, %llu] leave %llu bytes unused before it (at the data area's start); the "
                    "tensors must fill the data area in order (the reference loader refuses this file too)",
                    path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)(t->begin - filled));
        goto fail;
      }
      previous = t;
      filled = t->end;
    }
    if (filled != f->data_bytes) {
      fst__fail(err, errn,
                "%s: the data area holds %llu bytes, but the tensors end at byte %llu: %llu bytes past the last tensor (a header "
                "length that is off, or bytes appended; the reference loader refuses this file too)",
                path, (unsigned long long)f->data_bytes, (unsigned long long)filled, (unsigned long long)(f->data_bytes - filled));
      goto fail;
    }
  }
  free((void*)order);
  return 0;
fail:
  free((void*)order);
  return -1;
}

/* Reads and checks the header of the safetensors file `stream` (taken over: fst_close closes it).
 * `name` starts every message. */
FST_API int fst_open_stream(fst_file* f, FILE* stream, const char* name, char* err, size_t errn) {
  unsigned char len8[8];
  uint64_t hlen = 0, file_bytes;
  long end;
  size_t k;
  char* text;
  const char* nul;
  memset(f, 0, sizeof *f);
  snprintf(f->path, sizeof f->path, "%s", name);
  f->f = stream;
  if (fseek(f->f, 0, SEEK_END) || (end = ftell(f->f)) < 0 || fseek(f->f, 0, SEEK_SET)) {
    fst__fail(err, errn, "%s: cannot seek (not a regular file?)", name);
    goto fail;
  }
  file_bytes = (uint64_t)end;
  if (file_bytes < 8) {
    fst__fail(err, errn, "%s: file is %llu bytes, shorter than the 8-byte header length of a safetensors file", name, (unsigned long long)file_bytes);
    goto fail;
  }
  if (fread(len8, 1, 8, f->f) != 8) { fst__fail(err, errn, "%s: cannot read (not a regular file?)", name); goto fail; }
  for (k = 0; k < 8; ++k) hlen |= (uint64_t)len8[k] << (8 * k);
  if (hlen > FST_MAX_HEADER) {
    fst__fail(err, errn, "%s: header length %llu exceeds the %llu-byte limit (not a safetensors file, or corrupt)", name, (unsigned long long)hlen,
              (unsigned long long)FST_MAX_HEADER);
    goto fail;
  }
  if (hlen > file_bytes - 8) {
    fst__fail(err, errn, "%s: header length %llu exceeds the %llu bytes that follow it (truncated file?)", name, (unsigned long long)hlen,
              (unsigned long long)(file_bytes - 8));
    goto fail;
  }
  f->data_start = 8 + hlen;
  f->data_bytes = file_bytes - f->data_start;
  if (!(text = (char*)malloc((size_t)hlen + 1)) || fread(text, 1, (size_t)hlen, f->f) != (size_t)hlen) {
    free(text);
    fst__fail(err, errn, "%s: cannot read the header", name);
    goto fail;
  }
  if ((nul = (const char*)memchr(text, 0, (size_t)hlen))) {
    fst__fail(err, errn, "%s: the header holds a NUL byte at file offset %llu; a header is JSON, padded with spaces (the reference loader refuses this file too)",
              name, (unsigned long long)(8 + (uint64_t)(nul - text)));
    free(text);
    goto fail;
  }
  /* {name: {"shape": [...]}}: containers nest 2 deep at most, which bounds the parser's work */
  if (fst__json_parse_depth(text, (size_t)hlen, name, "JSON header", 2, &f->header, err, errn)) { free(text); goto fail; }
  free(text);
  if (fst__tensors(f, err, errn)) goto fail;
  return 0;
fail:
  fst_close(f);
  return -1;
}

/* Opens the safetensors file at `path` and checks its header: the length is inside the file and at
 * most 100 MB, the header is strict JSON (UTF-8) with one entry per tensor name, each dtype is known,
 * each shape has at most FST_MAX_RANK non-negative dimensions whose byte count (overflow-checked)
 * equals the tensor's data_offsets span, every span lies inside the data area, and the non-empty spans
 * in order fill the data area exactly (no overlap, no gap, no byte past the last tensor: as the
 * reference loader); "__metadata__" maps strings to strings. No tensor byte is read. */
FST_API int fst_open(fst_file* f, const char* path, char* err, size_t errn) {
  FILE* stream = fopen(path, "rb");
  if (!stream) {
    memset(f, 0, sizeof *f);
    fst__fail(err, errn, "%s: cannot open", path);
    return -1;
  }
  return fst_open_stream(f, stream, path, err, errn);
}

FST_API int fst_read(fst_file* f, const fst_tensor* t, void* dst, char* err, size_t errn) {
  const size_t n = (size_t)(t->end - t->begin);
  if (n == 0) return 0;
  if (f->data_start + t->begin > (uint64_t)LONG_MAX || fseek(f->f, (long)(f->data_start + t->begin), SEEK_SET) || fread(dst, 1, n, f->f) != n) {
    fst__fail(err, errn, "%s: cannot read tensor \"%s\"", f->path, t->name);
    return -1;
  }
  return 0;
}

/* ---- binding a weights region ------------------------------------------------------------------- */
/* One weight of a generated model's table: where it lives in the weights region (bf16). */
typedef struct {
  const char* name;
  uint64_t offset;
  int rank;
  int64_t shape[2];
  int tensor; /* the plan's tensor id */
} fst_weight;

/* The first weight of `table` whose values in `region` (bf16, or with `as_f32` f32) hold a NaN or an
 * infinity, in the sentence of fused's C++ runtime (include/fused/core/non_finite.hpp: `tensor
 * "model.norm.weight" holds NaN at element 7 (3 of 896 values are not finite)`), into out[0..n); 0 and
 * out empty when every one is finite. It reads every weight: for a diagnosis, or once before training. */
FST_API int fst__first_non_finite(const fst_weight* table, size_t count, const unsigned char* region, int as_f32, char* out, size_t n) {
  size_t w, i;
  if (n) out[0] = '\0';
  for (w = 0; w < count; ++w) {
    size_t numel = 1, bad = 0, first = 0;
    int first_is_nan = 0, d;
    for (d = 0; d < table[w].rank; ++d) numel *= (size_t)table[w].shape[d];
    for (i = 0; i < numel; ++i) {
      uint32_t bits;
      uint16_t h;
      if (as_f32) memcpy(&bits, region + table[w].offset + 4 * i, 4);
      else {
        memcpy(&h, region + table[w].offset + 2 * i, 2);
        bits = (uint32_t)h << 16;
      }
      if ((bits & 0x7F800000u) == 0x7F800000u && bad++ == 0) first = i, first_is_nan = (bits & 0x7FFFFFu) != 0;
    }
    if (bad) {
      fst__fail(out, n, "tensor \"%s\" holds %s at element %zu (%zu of %zu values are not finite)", table[w].name,
                first_is_nan ? "NaN" : "an infinity", first, bad, numel);
      return 1;
    }
  }
  return 0;
}
FST_API int fst_first_non_finite(const fst_weight* table, size_t count, const unsigned char* region, char* out, size_t n) {
  return fst__first_non_finite(table, count, region, 0, out, n);
}
FST_API int fst_first_non_finite_f32(const fst_weight* table, size_t count, const unsigned char* region, char* out, size_t n) {
  return fst__first_non_finite(table, count, region, 1, out, n);
}

FST_API uint16_t fst__f32_to_bf16(float x) { /* round to nearest even; NaN stays NaN (fk_f32_to_bf16_1) */
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

FST_API float fst__f16_to_f32(uint16_t h) { /* exact */
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu, bits;
  float f;
  if (exponent == 0x1F) bits = sign | 0x7F800000u | (mantissa << 13);
  else if (exponent != 0) bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  else if (mantissa == 0) bits = sign;
  else {
    uint32_t e = 113;
    while ((mantissa & 0x400u) == 0) mantissa <<= 1, --e;
    bits = sign | (e << 23) | ((mantissa & 0x3FFu) << 13);
  }
  memcpy(&f, &bits, sizeof f);
  return f;
}

FST_API void fst__shape_text(char* out, size_t n, int rank, const int64_t* shape) {
  size_t at = 0;
  int d;
  at += (size_t)snprintf(out, n, "[");
  for (d = 0; d < rank && at < n; ++d) at += (size_t)snprintf(out + at, n - at, d ? ", %lld" : "%lld", (long long)shape[d]);
  if (at < n) snprintf(out + at, n - at, "]");
}

/* 1, with the error, when tensor t of `file` is not of the shape `want` (a table entry's). */
FST_API int fst__shape_differs(const char* file, const fst_tensor* t, const fst_weight* want, char* err, size_t errn) {
  char have[128], need[128];
  if (t->rank == want->rank && !memcmp(t->shape, want->shape, (size_t)t->rank * sizeof(int64_t))) return 0;
  fst__shape_text(have, sizeof have, t->rank, t->shape);
  fst__shape_text(need, sizeof need, want->rank, want->shape);
  fst__fail(err, errn, "%s: tensor \"%s\" has shape %s, the model needs %s", file, t->name, have, need);
  return 1;
}

/* Fills `region` from `files`, each tensor at its table offset: as BF16 (F32 and F16 rounded to
 * nearest even), or with `as_f32` as F32 (BF16 and F16 widened exactly, F32 copied). */
FST_API int fst__bind(const fst_weight* table, size_t count, int tied, const char* const* files, int n_files, const char* fingerprint,
                      unsigned char* region, int as_f32, char* err, size_t errn) {
  unsigned char* bound = (unsigned char*)calloc(count + 1, 1);
  int fi, rc = -1;
  size_t k, w;
  if (!bound) { fst__fail(err, errn, "out of memory"); return -1; }
  for (fi = 0; fi < n_files; ++fi) {
    fst_file f;
    const fst_tensor* tied_head;
    char unused[512];
    size_t n_unused = 0, at = 0;
    if (fst_open(&f, files[fi], err, errn)) goto out;
    if (fingerprint && f.fingerprint && strcmp(fingerprint, f.fingerprint)) {
      fst__fail(err, errn, "%s: made for the weights layout %s, this model's is %s", files[fi], f.fingerprint, fingerprint);
      fst_close(&f);
      goto out;
    }
    unused[0] = '\0';
    tied_head = NULL;
    for (k = 0; k < f.count; ++k) {
      const fst_tensor* t = &f.tensors[k];
      for (w = 0; w < count && strcmp(table[w].name, t->name); ++w) {}
      if (w == count) {
        if (tied && !strcmp(t->name, "lm_head.weight")) {
          tied_head = t; /* checked once the weights are (as fused's C++ loader orders its errors) */
          continue;
        }
        /* RoPE's inverse frequencies, which older conversions stored: transformers ignores them */
        if (strlen(t->name) >= 19 && !strcmp(t->name + strlen(t->name) - 19, "rotary_emb.inv_freq")) continue;
        if (n_unused < 10 && at < sizeof unused) at += (size_t)snprintf(unused + at, sizeof unused - at, n_unused ? ", \"%s\"" : "\"%s\"", t->name);
        ++n_unused;
        continue;
      }
      if (bound[w]) { fst__fail(err, errn, "%s: tensor \"%s\" is in more than one file", files[fi], t->name); fst_close(&f); goto out; }
      if (fst__shape_differs(files[fi], t, &table[w], err, errn)) { fst_close(&f); goto out; }
      if (t->dtype == FST_BF16 && !as_f32) {
        if (fst_read(&f, t, region + table[w].offset, err, errn)) { fst_close(&f); goto out; }
      } else if (t->dtype == FST_F32 || t->dtype == FST_F16 || t->dtype == FST_BF16) {
        const size_t bytes = (size_t)(t->end - t->begin), elem = t->dtype == FST_F32 ? 4 : 2, n = bytes / elem;
        unsigned char* tmp = (unsigned char*)malloc(bytes ? bytes : 1);
        unsigned char* dst = region + table[w].offset;
        size_t e;
        if (!tmp || fst_read(&f, t, tmp, err, errn)) { free(tmp); fst_close(&f); goto out; }
        for (e = 0; e < n; ++e) {
          float x;
          uint16_t h;
          if (t->dtype == FST_F32) memcpy(&x, tmp + 4 * e, 4);
          else {
            uint32_t bits;
            memcpy(&h, tmp + 2 * e, 2);
            bits = (uint32_t)h << 16;
            if (t->dtype == FST_BF16) memcpy(&x, &bits, 4);
            else x = fst__f16_to_f32(h);
          }
          if (as_f32) memcpy(dst + 4 * e, &x, 4);
          else {
            h = fst__f32_to_bf16(x);
            memcpy(dst + 2 * e, &h, 2);
          }
        }
        free(tmp);
      } else {
        fst__fail(err, errn, "%s: tensor \"%s\" has dtype %s; only BF16, F16 and F32 are read", files[fi], t->name, t->dtype_name);
        fst_close(&f);
        goto out;
      }
      bound[w] = 1;
    }
    if (tied_head) {
      /* ignored, as transformers does, if it has the shape of the embedding it would be tied to */
      for (w = 0; w < count && strcmp(table[w].name, "model.embed_tokens.weight"); ++w) {}
      if (w < count && fst__shape_differs(files[fi], tied_head, &table[w], err, errn)) { fst_close(&f); goto out; }
    }
    fst_close(&f);
    if (n_unused) {
      fst__fail(err, errn, "%s: %zu tensor%s the model does not use (another architecture or config?): %s%s", files[fi], n_unused,
                n_unused == 1 ? "" : "s", unused, n_unused > 10 ? " and more" : "");
      goto out;
    }
  }
  for (w = 0; w < count; ++w)
    if (!bound[w]) {
      char want[128];
      fst__shape_text(want, sizeof want, table[w].rank, table[w].shape);
      fst__fail(err, errn, "%s: tensor \"%s\" is missing; the model needs it with shape %s", n_files ? files[0] : "(no file)", table[w].name, want);
      goto out;
    }
  rc = 0;
out:
  free(bound);
  return rc;
}

/* Fills `region` (the weights region, laid out as `table` says) with BF16 from `files`. `fingerprint`, when
 * not NULL, is the layout's weights fingerprint as "0x%016llx": a file whose metadata names another is refused. */
FST_API int fst_bind_weights(const fst_weight* table, size_t count, int tied, const char* const* files, int n_files, const char* fingerprint,
                             unsigned char* region, char* err, size_t errn) {
  return fst__bind(table, count, tied, files, n_files, fingerprint, region, 0, err, errn);
}

/* The same as F32, exactly as the files store them (a trainer's master weights). */
FST_API int fst_bind_weights_f32(const fst_weight* table, size_t count, int tied, const char* const* files, int n_files, unsigned char* region,
                                 char* err, size_t errn) {
  return fst__bind(table, count, tied, files, n_files, NULL, region, 1, err, errn);
}

/* ---- a Hugging Face model directory --------------------------------------------------------------- */
typedef struct {
  char** files;
  int count;
} fst_file_list;

FST_API void fst_file_list_free(fst_file_list* l) {
  int k;
  for (k = 0; k < l->count; ++k) free(l->files[k]);
  free(l->files);
  l->files = NULL;
  l->count = 0;
}

FST_API int fst__file_list_add(fst_file_list* l, const char* dir, const char* name) {
  int k;
  const size_t n = strlen(dir) + strlen(name) + 2;
  char** bigger;
  for (k = 0; k < l->count; ++k)
    if (!strcmp(l->files[k] + strlen(dir) + 1, name)) return 0;
  if (!(bigger = (char**)realloc(l->files, (size_t)(l->count + 1) * sizeof(char*)))) return -1;
  l->files = bigger;
  if (!(l->files[l->count] = (char*)malloc(n))) return -1;
  snprintf(l->files[l->count++], n, "%s/%s", dir, name);
  return 0;
}

/* Reads a whole small file (a config.json, an index) into a malloc'd buffer. */
FST_API char* fst_read_text(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  char* text = NULL;
  long n;
  if (!f) return NULL;
  if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && n <= (16L << 20) && !fseek(f, 0, SEEK_SET) && (text = (char*)malloc((size_t)n + 1))) {
    if (fread(text, 1, (size_t)n, f) != (size_t)n) {
      free(text);
      text = NULL;
    } else {
      text[n] = '\0';
      *len = (size_t)n;
    }
  }
  fclose(f);
  return text;
}

FST_API int fst__has_control(const char* s) {
  for (; *s; ++s)
    if ((unsigned char)*s < 0x20) return 1;
  return 0;
}

/* Every tensor `map` names is in the shard it names (files[k] is dir/<shard>), as fused's C++ loader
 * checks: a map that lies would otherwise load the tensor from wherever it is, or not notice one gone. */
FST_API int fst__check_weight_map(const char* index, const fst_json* map, const fst_file_list* files, size_t dir_len, char* err, size_t errn) {
  fst_file* shards = (fst_file*)calloc((size_t)files->count + 1, sizeof(fst_file));
  int opened = 0, rc = -1, s;
  size_t k, t;
  if (!shards) { fst__fail(err, errn, "%s: out of memory", index); return -1; }
  for (; opened < files->count; ++opened)
    if (fst_open(&shards[opened], files->files[opened], err, errn)) goto out;
  for (k = 0; k < map->n; ++k) {
    const fst_json* file = &map->kids[k];
    for (s = 0; s < files->count && strcmp(files->files[s] + dir_len + 1, file->str); ++s) {}
    for (t = 0; s < files->count && t < shards[s].count && strcmp(shards[s].tensors[t].name, file->key); ++t) {}
    if (s == files->count || t == shards[s].count) {
      fst__fail(err, errn, "%s: weight_map puts tensor \"%s\" in \"%s\", which does not contain it", index, file->key, file->str);
      goto out;
    }
  }
  rc = 0;
out:
  for (s = 0; s < opened; ++s) fst_close(&shards[s]);
  free(shards);
  return rc;
}

/* `path`: a .safetensors file, or a directory with model.safetensors or model.safetensors.index.json
 * (whose "weight_map" must be a non-empty object of file names in that directory, each tensor in the
 * shard it names). */
FST_API int fst_model_files(const char* path, fst_file_list* out, char* err, size_t errn) {
  char buf[1024];
  FILE* f;
  size_t len, k;
  char* text;
  fst_json index;
  const fst_json* map;
  const size_t n = strlen(path);
  memset(out, 0, sizeof *out);
  if (n > 12 && !strcmp(path + n - 12, ".safetensors")) {
    if (!(out->files = (char**)malloc(sizeof(char*))) || !(out->files[0] = (char*)malloc(n + 1))) return -1;
    memcpy(out->files[0], path, n + 1);
    out->count = 1;
    return 0;
  }
  snprintf(buf, sizeof buf, "%s/model.safetensors", path);
  if ((f = fopen(buf, "rb"))) {
    fclose(f);
    return fst__file_list_add(out, path, "model.safetensors");
  }
  snprintf(buf, sizeof buf, "%s/model.safetensors.index.json", path);
  if (!(f = fopen(buf, "rb"))) {
    fst__fail(err, errn, "%s: neither model.safetensors nor model.safetensors.index.json is there", path);
    return -1;
  }
  fclose(f);
  if (!(text = fst_read_text(buf, &len))) { /* there, but a directory, unreadable or over 16 MiB */
    fst__fail(err, errn, "%s: cannot be read as a JSON index of at most 16 MiB", buf);
    return -1;
  }
  if (fst_json_parse(text, len, buf, &index, err, errn)) { free(text); return -1; }
  free(text);
  map = fst_json_get(&index, "weight_map");
  if (!map || map->type != FST_OBJECT) {
    fst__fail(err, errn, "%s: not a JSON object with a \"weight_map\" object", buf);
    fst_json_free(&index);
    return -1;
  }
  if (map->n == 0) {
    fst__fail(err, errn, "%s: \"weight_map\" is empty; it must name the shard of every tensor", buf);
    fst_json_free(&index);
    return -1;
  }
  for (k = 0; k < map->n; ++k) {
    const fst_json* file = &map->kids[k];
    /* a file in the directory itself, as fused's C++ loader has it: no path, not "", "." or ".." */
    if (file->type != FST_STRING || !file->str[0] || !strcmp(file->str, ".") || !strcmp(file->str, "..") || strpbrk(file->str, "/\\") ||
        fst__has_control(file->str)) {
      fst__fail(err, errn, "%s: weight_map[\"%s\"] is not a plain file name (a shard is read from the model directory itself)", buf, file->key);
      fst_json_free(&index);
      fst_file_list_free(out);
      return -1;
    }
    if (fst__file_list_add(out, path, file->str)) { fst_json_free(&index); fst_file_list_free(out); return -1; }
  }
  if (fst__check_weight_map(buf, map, out, n, err, errn)) { fst_json_free(&index); fst_file_list_free(out); return -1; }
  fst_json_free(&index);
  return 0;
}

/* ---- writing ------------------------------------------------------------------------------------ */
typedef struct {
  const char* name;
  const char* dtype; /* "F32", "I32", ... */
  int rank;
  int64_t shape[FST_MAX_RANK];
  const void* data;
  uint64_t bytes;
} fst_out;

/* The JSON header of `t` into out[0..n) (out may be NULL): its length, as snprintf counts. */
FST_API size_t fst__write_header(char* out, size_t n, const fst_out* t, int count) {
  size_t at = 0;
  uint64_t offset = 0;
  int k, d;
#define FST__PUT(...) at += (size_t)snprintf(out ? out + (at < n ? at : n) : NULL, out && at < n ? n - at : 0, __VA_ARGS__)
  FST__PUT("{");
  for (k = 0; k < count; ++k) {
    const unsigned char* c;
    FST__PUT("%s\"", k ? "," : "");
    for (c = (const unsigned char*)t[k].name; *c; ++c) { /* a JSON string: '"', '\\' and control bytes escaped */
      if (*c == '"' || *c == '\\') FST__PUT("\\%c", *c);
      else if (*c < 0x20) FST__PUT("\\u%04x", *c);
      else FST__PUT("%c", *c);
    }
    FST__PUT("\":{\"dtype\":\"%s\",\"shape\":[", t[k].dtype);
    for (d = 0; d < t[k].rank; ++d) FST__PUT(d ? ",%lld" : "%lld", (long long)t[k].shape[d]);
    FST__PUT("],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset, (unsigned long long)(offset + t[k].bytes));
    offset += t[k].bytes;
  }
  FST__PUT("}");
#undef FST__PUT
  return at;
}

/* Writes `n` tensors as a safetensors file (the header as long as the tensors need). The bytes go to
 * PATH.fused-tmp, renamed over PATH once all are written: a failed write (a full disk, a file size
 * limit) leaves PATH as it was, as fused's C++ writer does. A device (/dev/...) is written in place. */
FST_API int fst_write(const char* path, const fst_out* t, int n, char* err, size_t errn) {
  const size_t json = fst__write_header(NULL, 0, t, n);
  const int device = strncmp(path, "/dev/", 5) == 0;
  size_t at = json;
  char* header = (char*)malloc(json + 8);
  char* staged = (char*)malloc(strlen(path) + sizeof ".fused-tmp");
  unsigned char len8[8];
  int k, d, ok, saved;
  FILE* f;
  if (!header || !staged) { free(header); free(staged); fst__fail(err, errn, "%s: out of memory for the header", path); return -1; }
  strcpy(staged, path);
  if (!device) strcat(staged, ".fused-tmp");
  fst__write_header(header, json + 1, t, n);
  while (at % 8) header[at++] = ' ';
  for (d = 0; d < 8; ++d) len8[d] = (unsigned char)((uint64_t)at >> (8 * d));
  if (!(f = fopen(staged, "wb"))) {
    fst__fail(err, errn, "%s: cannot write: %s", path, strerror(errno));
    free(header);
    free(staged);
    return -1;
  }
  ok = fwrite(len8, 1, 8, f) == 8 && fwrite(header, 1, at, f) == at;
  for (k = 0; k < n && ok; ++k) ok = !t[k].bytes || fwrite(t[k].data, 1, (size_t)t[k].bytes, f) == (size_t)t[k].bytes;
  free(header);
  saved = errno;
  if (fclose(f) || !ok) {
    fst__fail(err, errn, "%s: cannot write: %s", path, strerror(ok ? errno : saved));
    if (!device) remove(staged);
    free(staged);
    return -1;
  }
  if (!device && rename(staged, path) != 0) {
    fst__fail(err, errn, "%s: cannot replace it: %s", path, strerror(errno));
    remove(staged);
    free(staged);
    return -1;
  }
  free(staged);
  return 0;
}

#endif /* FUSED_SAFETENSORS_H */
