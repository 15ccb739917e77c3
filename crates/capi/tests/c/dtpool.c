/* A pool of random derived datatypes, built and used the way datatype-pool conformance
 * suites use them: nested (up to 3 levels) contiguous, dup, resized (lower bound moved
 * down or up, extent packed or stretched), vector and hvector (positive and negative
 * strides), indexed, hindexed, indexed_block and hindexed_block (sorted, reversed,
 * uneven and negative displacements, zero-length blocks), struct; base types of several
 * sizes and alignments (plus a struct base type); type counts > 1.
 *
 * Every type has an independent model here (the byte offsets of its base elements in
 * type-map order, its bounds and alignment), checked against MPI_Type_get_extent,
 * MPI_Type_get_true_extent and MPI_Type_size. Buffers are allocated exactly as tight as
 * those suites allocate them (extent × count + true extent − extent, shifted by the true
 * lower bound), so any access outside the type map past the buffer is a heap overflow
 * for valgrind / AddressSanitizer, and every byte of the buffer that is not in the type
 * map is checked to be untouched after each operation.
 *
 * Operations: Send/Recv, Isend/Irecv, Sendrecv (ring), Bcast, Ibcast, Gather, Igather,
 * Scatter, Allgather, Alltoall, Ialltoall (each rank with its own types of the same
 * signature), Pack/Unpack, Get_count, and Reduce_local, Reduce, Allreduce (also in place),
 * Iallreduce and Scan with a user operation that walks the type map; plus C struct
 * extents of the predefined composite types, and the stubbed datatype constructors (an
 * error, and MPI_DATATYPE_NULL in the output handle). */
#include "check.h"
#include <complex.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SENTINEL 0xA5
#define MAX_BUF (1 << 20) /* bytes per buffer of one type count */
#define MAX_DEPTH 3

/* ---- random numbers (xorshift64*) ---- */
typedef struct {
    uint64_t s;
} rng_t;

static rng_t rng_new(uint64_t seed) {
    rng_t r = {seed * 0x9E3779B97F4A7C15ull + 0x1234567ull};
    if (r.s == 0) r.s = 1;
    return r;
}

static unsigned rnd(rng_t *r, unsigned n) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (unsigned)((r->s * 0x2545F4914F6CDD1Dull) >> 33) % n;
}

/* ---- base types ---- */
typedef struct {
    MPI_Aint off, len;
} sub_t;

typedef struct {
    const char *name;
    MPI_Datatype type;
    int nsub;
    sub_t sub[2]; /* data bytes of one element */
    MPI_Aint extent;
    int align;
} base_t;

struct two_ints {
    int a, b;
};

#define NBASES 9
static base_t bases[NBASES];
static MPI_Datatype struct_base;

static void init_bases(void) {
    base_t b[NBASES] = {
        {"MPI_CHAR", MPI_CHAR, 1, {{0, 1}}, 1, 1},
        {"MPI_SHORT", MPI_SHORT, 1, {{0, sizeof(short)}}, sizeof(short), alignof(short)},
        {"MPI_INT", MPI_INT, 1, {{0, sizeof(int)}}, sizeof(int), alignof(int)},
        {"MPI_DOUBLE", MPI_DOUBLE, 1, {{0, sizeof(double)}}, sizeof(double), alignof(double)},
        {"MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, 1, {{0, sizeof(long double)}},
         sizeof(long double), alignof(long double)},
        {"MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, 1, {{0, sizeof(float _Complex)}},
         sizeof(float _Complex), alignof(float _Complex)},
        {"MPI_2INT", MPI_2INT, 1, {{0, sizeof(struct two_ints)}}, sizeof(struct two_ints),
         alignof(struct two_ints)},
        {"MPI_BYTE", MPI_BYTE, 1, {{0, 1}}, 1, 1},
        /* 3 ints then 2 doubles, packed (as dtpools lays out a struct base type); the
         * extent is padded to the doubles' alignment. */
        {"struct(MPI_INT:3+MPI_DOUBLE:2)", MPI_DATATYPE_NULL, 2,
         {{0, 3 * sizeof(int)}, {3 * sizeof(int), 2 * sizeof(double)}}, 0, alignof(double)},
    };
    int bl[2] = {3, 2};
    MPI_Aint ds[2] = {0, 3 * sizeof(int)};
    MPI_Datatype ts[2] = {MPI_INT, MPI_DOUBLE};
    OK(MPI_Type_create_struct(2, bl, ds, ts, &struct_base));
    OK(MPI_Type_commit(&struct_base));
    MPI_Aint ub = 3 * sizeof(int) + 2 * sizeof(double), a = alignof(double);
    b[8].type = struct_base;
    b[8].extent = (ub + a - 1) / a * a;
    memcpy(bases, b, sizeof b);
}

static MPI_Aint base_size(const base_t *b) {
    MPI_Aint s = 0;
    for (int i = 0; i < b->nsub; i++) s += b->sub[i].len;
    return s;
}

/* ---- the model of a datatype ---- */
typedef struct {
    MPI_Aint *off; /* offset of every base element, in type-map order */
    size_t n, cap;
    MPI_Aint lb, ub;
    int any; /* bounds set */
    int align;
} model_t;

static void m_push(model_t *m, MPI_Aint off) {
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 16;
        m->off = realloc(m->off, m->cap * sizeof *m->off);
        CHECK(m->off);
    }
    m->off[m->n++] = off;
}

static void m_free(model_t *m) {
    free(m->off);
    memset(m, 0, sizeof *m);
}

/* Appends nrep consecutive copies of child c at byte displacement disp. */
static void m_append(model_t *m, const model_t *c, MPI_Aint disp, MPI_Aint nrep) {
    MPI_Aint ce = c->ub - c->lb;
    if (c->align > m->align) m->align = c->align;
    for (MPI_Aint r = 0; r < nrep; r++) {
        MPI_Aint at = disp + r * ce;
        for (size_t e = 0; e < c->n; e++) m_push(m, at + c->off[e]);
        if (!m->any || at + c->lb < m->lb) m->lb = at + c->lb;
        if (!m->any || at + c->ub > m->ub) m->ub = at + c->ub;
        m->any = 1;
    }
}

static void m_true(const model_t *m, const base_t *b, MPI_Aint *tlb, MPI_Aint *text) {
    MPI_Aint lo = 0, hi = 0;
    for (size_t e = 0; e < m->n; e++)
        for (int s = 0; s < b->nsub; s++) {
            MPI_Aint x = m->off[e] + b->sub[s].off, y = x + b->sub[s].len;
            if (e == 0 && s == 0) lo = x, hi = y;
            if (x < lo) lo = x;
            if (y > hi) hi = y;
        }
    *tlb = lo;
    *text = hi - lo;
}

/* ---- building random types ---- */
static unsigned low_count(unsigned c) {
    for (unsigned f = 2; f < c; f++)
        if (c % f == 0) return f;
    return 1;
}

/* 1, the smallest factor of c, or c over it: always divides c. */
static unsigned pick(rng_t *r, unsigned c) {
    switch (rnd(r, 3)) {
    case 0: return 1;
    case 1: return low_count(c);
    default: return c / low_count(c);
    }
}

/* Block lengths of nb blocks averaging bl (total nb × bl): equal, or uneven (bl+1,
 * bl−1, …, zero-length blocks when bl is 1). */
static void blocklens(rng_t *r, int nb, int bl, int *out) {
    int uneven = rnd(r, 2);
    for (int i = 0; i < nb; i++) out[i] = uneven ? (i % 2 ? bl - 1 : bl + 1) : bl;
    if (uneven && nb % 2) out[nb - 1] = bl;
}

/* Displacements (units) of nb blocks with lengths bl[]: sorted with gaps, sorted with
 * large gaps, reversed, uneven gaps, or reversed and shifted negative. */
static void displs(rng_t *r, int nb, const int *bl, MPI_Aint unit, MPI_Aint start,
                   MPI_Aint *out) {
    int kind = rnd(r, 5);
    MPI_Aint at = start;
    for (int k = 0; k < nb; k++) {
        int i = (kind == 2 || kind == 4) ? nb - 1 - k : k;
        out[i] = at;
        switch (kind) {
        case 1: at += (MPI_Aint)bl[i] * 4 * unit + unit; break;
        case 3: at += (MPI_Aint)(bl[i] + k) * unit + unit; break;
        default: at += (MPI_Aint)(bl[i] + 1) * unit; break;
        }
    }
    if (kind == 4)
        for (int i = 0; i < nb; i++) out[i] -= at / 2 / unit * unit + 2 * unit;
}

typedef struct {
    MPI_Datatype type;
    model_t m;
    const base_t *base;
    MPI_Aint count; /* type count covering the pool's base elements */
    MPI_Aint lb, extent, tlb, text;
    char desc[1024];
} obj_t;

/* Appends to a type's description (numbers through fmt, or a string). */
static void d_add(char *desc, const char *fmt, long a, long b, long c) {
    size_t n = strlen(desc);
    if (n < 900) snprintf(desc + n, 1024 - n, fmt, a, b, c);
}

static void d_str(char *desc, const char *s) {
    size_t n = strlen(desc);
    if (n < 900) snprintf(desc + n, 1024 - n, "%s", s);
}

static MPI_Datatype build(rng_t *r, const base_t *base, int depth, MPI_Aint *count,
                          model_t *m, char *desc) {
    memset(m, 0, sizeof *m);
    if (depth == 0) {
        m_push(m, 0);
        m->lb = 0;
        m->ub = base->extent;
        m->any = 1;
        m->align = base->align;
        d_str(desc, base->name);
        return base->type;
    }
    model_t c;
    char sub[1024] = "";
    MPI_Aint cnt = *count;
    MPI_Datatype child = build(r, base, depth - 1, &cnt, &c, sub);
    MPI_Aint ce = c.ub - c.lb, clb, cext, ctlb, ctext;
    OK(MPI_Type_get_extent(child, &clb, &cext));
    OK(MPI_Type_get_true_extent(child, &ctlb, &ctext));
    MPI_Datatype t;
    int nb, bl, *bls;
    MPI_Aint *ds;
    switch (rnd(r, 10)) {
    case 0: /* contiguous */
        bl = pick(r, cnt);
        cnt /= bl;
        OK(MPI_Type_contiguous(bl, child, &t));
        m_append(m, &c, 0, bl);
        d_add(desc, "contig(%ld", bl, 0, 0);
        break;
    case 1: /* dup */
        OK(MPI_Type_dup(child, &t));
        m_append(m, &c, 0, 1);
        d_str(desc, "dup(");
        break;
    case 2: { /* resized */
        MPI_Aint lbs[5] = {ctlb, clb - 2 * cext, clb - 10 * cext, clb + 2 * cext,
                           clb + 10 * cext};
        MPI_Aint exts[3] = {ctext, 2 * cext, 10 * cext};
        MPI_Aint nlb = lbs[rnd(r, 5)], next = exts[rnd(r, 3)];
        OK(MPI_Type_create_resized(child, nlb, next, &t));
        m_append(m, &c, 0, 1);
        m->lb = nlb;
        m->ub = nlb + next;
        d_add(desc, "resized(lb %ld, extent %ld", nlb, next, 0);
        break;
    }
    case 3: { /* vector */
        nb = pick(r, cnt);
        cnt /= nb;
        bl = pick(r, cnt);
        cnt /= bl;
        int strides[3] = {bl + 1, 4 * bl, -2 * bl};
        int st = strides[rnd(r, 3)];
        OK(MPI_Type_vector(nb, bl, st, child, &t));
        for (int i = 0; i < nb; i++) m_append(m, &c, (MPI_Aint)i * st * ce, bl);
        d_add(desc, "vector(%ld x %ld, stride %ld", nb, bl, st);
        break;
    }
    case 4: { /* hvector */
        nb = pick(r, cnt);
        cnt /= nb;
        bl = pick(r, cnt);
        cnt /= bl;
        MPI_Aint strides[3] = {bl * ce + 8, 4 * bl * ce + 8, -8 * bl * ce - 8};
        MPI_Aint st = strides[rnd(r, 3)];
        OK(MPI_Type_create_hvector(nb, bl, st, child, &t));
        for (int i = 0; i < nb; i++) m_append(m, &c, i * st, bl);
        d_add(desc, "hvector(%ld x %ld, stride %ld B", nb, bl, st);
        break;
    }
    case 5:   /* indexed_block */
    case 6: { /* hindexed_block */
        int h = rnd(r, 2);
        nb = pick(r, cnt);
        cnt /= nb;
        bl = pick(r, cnt);
        cnt /= bl;
        bls = malloc(nb * sizeof *bls);
        ds = malloc(nb * sizeof *ds);
        for (int i = 0; i < nb; i++) bls[i] = bl;
        displs(r, nb, bls, h ? ce : 1, h ? 8 : 0, ds);
        if (h) {
            OK(MPI_Type_create_hindexed_block(nb, bl, ds, child, &t));
            for (int i = 0; i < nb; i++) m_append(m, &c, ds[i], bl);
        } else {
            int *is = malloc(nb * sizeof *is);
            for (int i = 0; i < nb; i++) is[i] = (int)ds[i];
            OK(MPI_Type_create_indexed_block(nb, bl, is, child, &t));
            for (int i = 0; i < nb; i++) m_append(m, &c, ds[i] * ce, bl);
            free(is);
        }
        d_add(desc, h ? "hindexed_block(%ld x %ld, first displ %ld B"
                      : "indexed_block(%ld x %ld, first displ %ld",
              nb, bl, ds[0]);
        free(bls);
        free(ds);
        break;
    }
    case 7:   /* indexed */
    case 8:   /* hindexed */
    case 9: { /* struct */
        int kind = rnd(r, 3);
        nb = pick(r, cnt);
        cnt /= nb;
        bl = pick(r, cnt);
        cnt /= bl;
        bls = malloc(nb * sizeof *bls);
        ds = malloc(nb * sizeof *ds);
        blocklens(r, nb, bl, bls);
        displs(r, nb, bls, kind ? ce : 1, kind ? 8 : 0, ds);
        if (kind == 0) {
            int *is = malloc(nb * sizeof *is);
            for (int i = 0; i < nb; i++) is[i] = (int)ds[i];
            OK(MPI_Type_indexed(nb, bls, is, child, &t));
            for (int i = 0; i < nb; i++) m_append(m, &c, ds[i] * ce, bls[i]);
            free(is);
        } else if (kind == 1) {
            OK(MPI_Type_create_hindexed(nb, bls, ds, child, &t));
            for (int i = 0; i < nb; i++) m_append(m, &c, ds[i], bls[i]);
        } else {
            MPI_Datatype *ts = malloc(nb * sizeof *ts);
            for (int i = 0; i < nb; i++) ts[i] = child;
            OK(MPI_Type_create_struct(nb, bls, ds, ts, &t));
            for (int i = 0; i < nb; i++) m_append(m, &c, ds[i], bls[i]);
            /* A struct's extent is padded to its members' largest alignment. */
            MPI_Aint a = m->align, e = m->ub - m->lb;
            m->ub = m->lb + (e + a - 1) / a * a;
            free(ts);
        }
        static const char *names[3] = {"indexed", "hindexed", "struct"};
        d_str(desc, names[kind]);
        d_add(desc, "(%ld blocks ~%ld, first displ %ld", nb, bl, ds[0]);
        free(bls);
        free(ds);
        break;
    }
    }
    if (!m->any) { /* every block empty: MPI's bounds are 0 */
        m->lb = m->ub = 0;
    }
    m->align = m->align > c.align ? m->align : c.align;
    d_str(desc, ") of ");
    d_str(desc, sub);
    if (depth > 1) OK(MPI_Type_free(&child));
    m_free(&c);
    *count = cnt;
    return t;
}

/* The extent checks: phalanx's bounds, true bounds and size against the model. */
static void check_model(obj_t *o) {
    MPI_Aint lb, ext, tlb, text;
    int size;
    OK(MPI_Type_get_extent(o->type, &lb, &ext));
    OK(MPI_Type_get_true_extent(o->type, &tlb, &text));
    OK(MPI_Type_size(o->type, &size));
    m_true(&o->m, o->base, &o->tlb, &o->text);
    o->lb = o->m.lb;
    o->extent = o->m.ub - o->m.lb;
    if (lb != o->lb || ext != o->extent || tlb != o->tlb || text != o->text ||
        size != (MPI_Aint)o->m.n * base_size(o->base)) {
        fprintf(stderr,
                "type %s:\n  MPI lb %ld extent %ld true lb %ld true extent %ld size %d\n"
                "  model lb %ld extent %ld true lb %ld true extent %ld size %ld\n",
                o->desc, (long)lb, (long)ext, (long)tlb, (long)text, size, (long)o->lb,
                (long)o->extent, (long)o->tlb, (long)o->text,
                (long)(o->m.n * base_size(o->base)));
        CHECK(0);
    }
}

/* Buffer of n elements, as tight as the suites allocate it; *off is where the data
 * pointer goes (the true lower bound lands on the buffer's first byte). */
static MPI_Aint bufsize(const obj_t *o, MPI_Aint n, MPI_Aint *off) {
    MPI_Aint s = o->extent * n + (o->text - o->extent);
    if (o->tlb > 0) {
        s += o->tlb;
        *off = 0;
    } else {
        *off = -o->tlb;
    }
    return s;
}

static void free_obj(obj_t *o) {
    if (o->type != o->base->type) OK(MPI_Type_free(&o->type));
    m_free(&o->m);
}

/* A type covering `total` base elements (type count × elements per type = total) whose
 * buffer for its type count stays under MAX_BUF bytes (else another random type). */
static void make_obj(uint64_t seed, const base_t *base, MPI_Aint total, int depth,
                     obj_t *o) {
    rng_t r = rng_new(seed);
    for (int attempt = 0;; attempt++) {
        memset(o, 0, sizeof *o);
        o->base = base;
        o->count = total;
        int d = depth >= 0 ? depth : (int)rnd(&r, MAX_DEPTH + 1);
        if (attempt > 50) d = 0;
        o->type = build(&r, base, d, &o->count, &o->m, o->desc);
        if (d > 0) OK(MPI_Type_commit(&o->type));
        check_model(o);
        CHECK((MPI_Aint)o->m.n * o->count == total);
        MPI_Aint off;
        if (bufsize(o, o->count, &off) <= MAX_BUF) return;
        free_obj(o);
    }
}

/* ---- data ---- */
static unsigned char pat(int tag, MPI_Aint k, MPI_Aint j) {
    return (unsigned char)(tag * 53 + k * 7 + j * 3 + 11);
}

/* The expected byte: tag's pattern, or (xor_n > 0) the XOR of the patterns of tags
 * tag .. tag + xor_n − 1 (what the reductions with the XOR operation below give). */
static unsigned char want(int tag, int xor_n, MPI_Aint k, MPI_Aint j) {
    if (xor_n == 0) return pat(tag, k, j);
    unsigned char x = 0;
    for (int q = 0; q < xor_n; q++) x ^= pat(tag + q, k, j);
    return x;
}

/* Address of base element e of element i in a buffer of o (data pointer p). */
static unsigned char *elem(const obj_t *o, void *p, MPI_Aint i, size_t e) {
    return (unsigned char *)p + i * o->extent + o->m.off[e];
}

/* Writes (or checks) elements [first, first + n) of o with want(tag, xor_n). */
static int put_or_check(const obj_t *o, void *p, MPI_Aint first, MPI_Aint n, int tag,
                        int xor_n, int check) {
    for (MPI_Aint i = 0; i < n; i++)
        for (size_t e = 0; e < o->m.n; e++) {
            MPI_Aint k = i * (MPI_Aint)o->m.n + (MPI_Aint)e, j = 0;
            unsigned char *x = elem(o, p, first + i, e);
            for (int s = 0; s < o->base->nsub; s++)
                for (MPI_Aint b = 0; b < o->base->sub[s].len; b++, j++) {
                    unsigned char *y = x + o->base->sub[s].off + b;
                    unsigned char w = want(tag, xor_n, k, j);
                    if (!check) {
                        *y = w;
                    } else if (*y != w) {
                        fprintf(stderr, "element %ld base %zu byte %ld: %d, expected %d\n",
                                (long)(first + i), e, (long)j, *y, w);
                        return 0;
                    }
                }
        }
    return 1;
}

/* A buffer of n elements of o: its allocation, data pointer and type-map mask. */
typedef struct {
    unsigned char *mem, *mask;
    void *p;
    MPI_Aint size, n;
    const obj_t *o;
} buf_t;

static buf_t buf_new(const obj_t *o, MPI_Aint n) {
    buf_t b;
    MPI_Aint off;
    b.o = o;
    b.n = n;
    b.size = bufsize(o, n, &off);
    CHECK(b.size > 0);
    b.mem = malloc(b.size);
    b.mask = calloc(b.size, 1);
    CHECK(b.mem && b.mask);
    b.p = b.mem + off;
    memset(b.mem, SENTINEL, b.size);
    for (MPI_Aint i = 0; i < n; i++)
        for (size_t e = 0; e < o->m.n; e++)
            for (int s = 0; s < o->base->nsub; s++) {
                MPI_Aint at = elem(o, b.p, i, e) + o->base->sub[s].off - b.mem;
                /* The type map must fit the buffer sized from MPI's extents. */
                CHECK(at >= 0 && at + o->base->sub[s].len <= b.size);
                memset(b.mask + at, 1, o->base->sub[s].len);
            }
    return b;
}

static void buf_free(buf_t *b) {
    free(b->mem);
    free(b->mask);
}

/* Fills n elements from `first` with tag's pattern. */
static void buf_put(buf_t *b, MPI_Aint first, MPI_Aint n, int tag) {
    put_or_check(b->o, b->p, first, n, tag, 0, 0);
}

/* Checks elements [first, first + n) hold want(tag, xor_n), `what` naming the call. */
static void buf_check_x(buf_t *b, MPI_Aint first, MPI_Aint n, int tag, int xor_n,
                        const char *what) {
    if (!put_or_check(b->o, b->p, first, n, tag, xor_n, 1)) {
        fprintf(stderr, "%s: wrong data in %s\n", what, b->o->desc);
        CHECK(0);
    }
}

static void buf_check(buf_t *b, MPI_Aint first, MPI_Aint n, int tag, const char *what) {
    buf_check_x(b, first, n, tag, 0, what);
}

/* Every byte outside the type map still holds the sentinel. */
static void buf_untouched(buf_t *b, const char *what) {
    for (MPI_Aint i = 0; i < b->size; i++)
        if (!b->mask[i] && b->mem[i] != SENTINEL) {
            fprintf(stderr, "%s: byte %ld of %ld outside the type map written (%s)\n", what,
                    (long)i, (long)b->size, b->o->desc);
            CHECK(0);
        }
}

static void buf_reset(buf_t *b) {
    memset(b->mem, SENTINEL, b->size);
}

/* ---- operations ---- */
static int rank, nprocs;

static void p2p(const obj_t *s, const obj_t *r, int iter) {
    int dst = nprocs - 1;
    buf_t sb = buf_new(s, s->count), rb = buf_new(r, r->count);
    buf_put(&sb, 0, s->count, 1);
    unsigned char *copy = malloc(sb.size);
    memcpy(copy, sb.mem, sb.size);
    MPI_Status st;
    if (iter % 2 == 0) {
        MPI_Request q = MPI_REQUEST_NULL;
        if (rank == 0) OK(MPI_Isend(sb.p, (int)s->count, s->type, dst, 5, MPI_COMM_WORLD, &q));
        if (rank == dst) OK(MPI_Recv(rb.p, (int)r->count, r->type, 0, 5, MPI_COMM_WORLD, &st));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    } else {
        MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        MPI_Status sts[2];
        if (rank == dst)
            OK(MPI_Irecv(rb.p, (int)r->count, r->type, 0, 6, MPI_COMM_WORLD, &q[0]));
        if (rank == 0) {
            if (dst == 0)
                OK(MPI_Isend(sb.p, (int)s->count, s->type, dst, 6, MPI_COMM_WORLD, &q[1]));
            else
                OK(MPI_Send(sb.p, (int)s->count, s->type, dst, 6, MPI_COMM_WORLD));
        }
        OK(MPI_Waitall(2, q, sts));
        st = sts[0];
    }
    if (rank == dst) {
        int n;
        OK(MPI_Get_count(&st, r->type, &n));
        CHECK(n == r->count);
        buf_check(&rb, 0, r->count, 1, "Send/Recv");
        buf_untouched(&rb, "Send/Recv");
    }
    CHECK(memcmp(copy, sb.mem, sb.size) == 0); /* the send buffer is read only */

    /* Sendrecv around the ring. */
    buf_reset(&rb);
    buf_put(&sb, 0, s->count, 10 + rank);
    OK(MPI_Sendrecv(sb.p, (int)s->count, s->type, (rank + 1) % nprocs, 7, rb.p,
                    (int)r->count, r->type, (rank + nprocs - 1) % nprocs, 7, MPI_COMM_WORLD,
                    &st));
    buf_check(&rb, 0, r->count, 10 + (rank + nprocs - 1) % nprocs, "Sendrecv");
    buf_untouched(&rb, "Sendrecv");
    free(copy);
    buf_free(&sb);
    buf_free(&rb);
}

/* Pack s, unpack as r (locally). */
static void pack_unpack(const obj_t *s, const obj_t *r) {
    buf_t sb = buf_new(s, s->count), rb = buf_new(r, r->count);
    buf_put(&sb, 0, s->count, 3);
    int psize, size;
    OK(MPI_Pack_size((int)s->count, s->type, MPI_COMM_WORLD, &psize));
    OK(MPI_Type_size(s->type, &size));
    CHECK(psize == size * s->count);
    char *packed = malloc(psize + 1);
    int pos = 0, half = (int)s->count / 2;
    OK(MPI_Pack(sb.p, half, s->type, packed, psize, &pos, MPI_COMM_WORLD));
    OK(MPI_Pack((char *)sb.p + half * s->extent, (int)s->count - half, s->type, packed, psize,
                &pos, MPI_COMM_WORLD));
    CHECK(pos == psize);
    pos = 0;
    OK(MPI_Unpack(packed, psize, &pos, rb.p, (int)r->count, r->type, MPI_COMM_WORLD));
    CHECK(pos == psize);
    buf_check(&rb, 0, r->count, 3, "Pack/Unpack");
    buf_untouched(&rb, "Pack/Unpack");
    free(packed);
    buf_free(&sb);
    buf_free(&rb);
}

/* Collectives: `mine` is this rank's send type, `recv` its receive type (each rank's
 * own types, one signature). */
static void collectives(const obj_t *mine, const obj_t *recv, int iter) {
    int root = iter % nprocs, p = nprocs;
    MPI_Aint sc = mine->count, rc = recv->count;

    /* Bcast with the receive type on every rank. */
    buf_t b = buf_new(recv, rc);
    if (rank == root) buf_put(&b, 0, rc, 20 + root);
    OK(MPI_Bcast(b.p, (int)rc, recv->type, root, MPI_COMM_WORLD));
    buf_check(&b, 0, rc, 20 + root, "Bcast");
    buf_untouched(&b, "Bcast");
    buf_reset(&b);
    MPI_Request req;
    if (rank == root) buf_put(&b, 0, rc, 25 + root);
    OK(MPI_Ibcast(b.p, (int)rc, recv->type, root, MPI_COMM_WORLD, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    buf_check(&b, 0, rc, 25 + root, "Ibcast");
    buf_untouched(&b, "Ibcast");
    buf_free(&b);

    /* Gather. */
    buf_t sb = buf_new(mine, sc), rb = buf_new(recv, rc * p);
    buf_put(&sb, 0, sc, 30 + rank);
    OK(MPI_Gather(sb.p, (int)sc, mine->type, rank == root ? rb.p : NULL, (int)rc, recv->type,
                  root, MPI_COMM_WORLD));
    if (rank == root) {
        for (int q = 0; q < p; q++) buf_check(&rb, q * rc, rc, 30 + q, "Gather");
        buf_untouched(&rb, "Gather");
    }
    buf_free(&sb);
    buf_free(&rb);

    /* Scatter. */
    sb = buf_new(mine, sc * p);
    rb = buf_new(recv, rc);
    if (rank == root)
        for (int q = 0; q < p; q++) buf_put(&sb, q * sc, sc, 40 + q);
    OK(MPI_Scatter(rank == root ? sb.p : NULL, (int)sc, mine->type, rb.p, (int)rc, recv->type,
                   root, MPI_COMM_WORLD));
    buf_check(&rb, 0, rc, 40 + rank, "Scatter");
    buf_untouched(&rb, "Scatter");
    buf_free(&sb);
    buf_free(&rb);

    /* Allgather. */
    sb = buf_new(mine, sc);
    rb = buf_new(recv, rc * p);
    buf_put(&sb, 0, sc, 50 + rank);
    OK(MPI_Allgather(sb.p, (int)sc, mine->type, rb.p, (int)rc, recv->type, MPI_COMM_WORLD));
    for (int q = 0; q < p; q++) buf_check(&rb, q * rc, rc, 50 + q, "Allgather");
    buf_untouched(&rb, "Allgather");
    buf_free(&sb);
    buf_free(&rb);

    /* Alltoall. */
    sb = buf_new(mine, sc * p);
    rb = buf_new(recv, rc * p);
    for (int q = 0; q < p; q++) buf_put(&sb, q * sc, sc, 60 + 8 * rank + q);
    OK(MPI_Alltoall(sb.p, (int)sc, mine->type, rb.p, (int)rc, recv->type, MPI_COMM_WORLD));
    for (int q = 0; q < p; q++) buf_check(&rb, q * rc, rc, 60 + 8 * q + rank, "Alltoall");
    buf_untouched(&rb, "Alltoall");
    buf_reset(&rb);
    OK(MPI_Ialltoall(sb.p, (int)sc, mine->type, rb.p, (int)rc, recv->type, MPI_COMM_WORLD,
                    &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    for (int q = 0; q < p; q++) buf_check(&rb, q * rc, rc, 60 + 8 * q + rank, "Ialltoall");
    buf_untouched(&rb, "Ialltoall");
    buf_free(&sb);
    buf_free(&rb);

    /* Igather. */
    sb = buf_new(mine, sc);
    rb = buf_new(recv, rc * p);
    buf_put(&sb, 0, sc, 35 + rank);
    OK(MPI_Igather(sb.p, (int)sc, mine->type, rank == root ? rb.p : NULL, (int)rc, recv->type,
                   root, MPI_COMM_WORLD, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    if (rank == root) {
        for (int q = 0; q < p; q++) buf_check(&rb, q * rc, rc, 35 + q, "Igather");
        buf_untouched(&rb, "Igather");
    }
    buf_free(&sb);
    buf_free(&rb);
}

/* Reductions with a user operation (bytewise XOR of the data, walking the datatype's
 * type map as a user function does) on a derived type the same on every rank. */
static const obj_t *op_obj;

static void xor_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    const obj_t *o = op_obj;
    CHECK(*dt == o->type);
    for (int i = 0; i < *len; i++)
        for (size_t e = 0; e < o->m.n; e++)
            for (int s = 0; s < o->base->nsub; s++) {
                unsigned char *a = elem(o, in, i, e) + o->base->sub[s].off;
                unsigned char *b = elem(o, inout, i, e) + o->base->sub[s].off;
                for (MPI_Aint k = 0; k < o->base->sub[s].len; k++) b[k] ^= a[k];
            }
}

static void reductions(const obj_t *s, int iter) {
    MPI_Op op;
    int root = iter % nprocs;
    MPI_Aint n = s->count;
    op_obj = s;
    OK(MPI_Op_create(xor_op, 1, &op));
    buf_t sb = buf_new(s, n), rb = buf_new(s, n);

    buf_put(&sb, 0, n, 70);
    buf_put(&rb, 0, n, 71);
    OK(MPI_Reduce_local(sb.p, rb.p, (int)n, s->type, op));
    buf_check_x(&rb, 0, n, 70, 2, "Reduce_local");
    buf_untouched(&rb, "Reduce_local");

    buf_reset(&rb);
    buf_put(&sb, 0, n, 80 + rank);
    OK(MPI_Allreduce(sb.p, rb.p, (int)n, s->type, op, MPI_COMM_WORLD));
    buf_check_x(&rb, 0, n, 80, nprocs, "Allreduce");
    buf_untouched(&rb, "Allreduce");

    buf_reset(&rb);
    OK(MPI_Reduce(sb.p, rb.p, (int)n, s->type, op, root, MPI_COMM_WORLD));
    if (rank == root) {
        buf_check_x(&rb, 0, n, 80, nprocs, "Reduce");
        buf_untouched(&rb, "Reduce");
    }

    buf_reset(&rb);
    OK(MPI_Scan(sb.p, rb.p, (int)n, s->type, op, MPI_COMM_WORLD));
    buf_check_x(&rb, 0, n, 80, rank + 1, "Scan");
    buf_untouched(&rb, "Scan");

    /* In place: the contribution comes from (and the result goes to) rb. */
    buf_put(&rb, 0, n, 80 + rank);
    OK(MPI_Allreduce(MPI_IN_PLACE, rb.p, (int)n, s->type, op, MPI_COMM_WORLD));
    buf_check_x(&rb, 0, n, 80, nprocs, "Allreduce in place");
    buf_untouched(&rb, "Allreduce in place");

    MPI_Request req;
    buf_reset(&rb);
    OK(MPI_Iallreduce(sb.p, rb.p, (int)n, s->type, op, MPI_COMM_WORLD, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    buf_check_x(&rb, 0, n, 80, nprocs, "Iallreduce");
    buf_untouched(&rb, "Iallreduce");

    OK(MPI_Op_free(&op));
    buf_free(&sb);
    buf_free(&rb);
}

/* ---- C struct extents of the predefined composite types ---- */
struct fc_int {
    float _Complex c;
    int i;
};
struct twoint_char {
    struct two_ints p;
    char c;
};
struct ld_int {
    long double x;
    int i;
};
struct char_ld {
    char c;
    long double x;
};

static void struct_extent(MPI_Datatype t0, MPI_Aint d0, MPI_Datatype t1, MPI_Aint d1,
                          MPI_Aint csize, const char *what) {
    int bl[2] = {1, 1};
    MPI_Aint ds[2] = {d0, d1}, lb, ext;
    MPI_Datatype ts[2] = {t0, t1}, t;
    OK(MPI_Type_create_struct(2, bl, ds, ts, &t));
    OK(MPI_Type_commit(&t));
    OK(MPI_Type_get_extent(t, &lb, &ext));
    if (lb != 0 || ext != csize) {
        fprintf(stderr, "%s: MPI extent %ld, C sizeof %ld\n", what, (long)ext, (long)csize);
        CHECK(0);
    }
    /* An array of exactly 3 C structs, sent as 3 elements: a wrong (larger) extent
     * reads and writes past the array. */
    unsigned char *a = malloc(3 * csize), *b = malloc(3 * csize);
    for (MPI_Aint i = 0; i < 3 * csize; i++) a[i] = (unsigned char)i;
    memset(b, 0, 3 * csize);
    OK(MPI_Sendrecv(a, 3, t, rank, 9, b, 3, t, rank, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    int sz0, sz1;
    OK(MPI_Type_size(t0, &sz0));
    OK(MPI_Type_size(t1, &sz1));
    for (int i = 0; i < 3; i++) {
        CHECK(memcmp(a + i * csize + d0, b + i * csize + d0, sz0) == 0);
        CHECK(memcmp(a + i * csize + d1, b + i * csize + d1, sz1) == 0);
    }
    free(a);
    free(b);
    OK(MPI_Type_free(&t));
}

static void struct_extents(void) {
    struct_extent(MPI_C_FLOAT_COMPLEX, offsetof(struct fc_int, c), MPI_INT,
                  offsetof(struct fc_int, i), sizeof(struct fc_int), "{float complex, int}");
    struct_extent(MPI_2INT, offsetof(struct twoint_char, p), MPI_CHAR,
                  offsetof(struct twoint_char, c), sizeof(struct twoint_char),
                  "{2int, char}");
    struct_extent(MPI_LONG_DOUBLE, offsetof(struct ld_int, x), MPI_INT,
                  offsetof(struct ld_int, i), sizeof(struct ld_int), "{long double, int}");
    struct_extent(MPI_CHAR, offsetof(struct char_ld, c), MPI_LONG_DOUBLE,
                  offsetof(struct char_ld, x), sizeof(struct char_ld), "{char, long double}");
}

/* ---- stubbed constructors: an error, and a null output handle ---- */
static void stubs(void) {
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int sizes[2] = {4, 5}, subs[2] = {2, 3}, starts[2] = {1, 1};
    MPI_Datatype t = (MPI_Datatype)(intptr_t)0x5eed; /* garbage in the output */
    if (MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t) ==
        MPI_SUCCESS)
        OK(MPI_Type_free(&t));
    else
        CHECK(t == MPI_DATATYPE_NULL);
    int gs[1] = {8}, distr[1] = {MPI_DISTRIBUTE_BLOCK}, dargs[1] = {MPI_DISTRIBUTE_DFLT_DARG},
        ps[1] = {1};
    t = (MPI_Datatype)(intptr_t)0x5eed;
    if (MPI_Type_create_darray(1, 0, 1, gs, distr, dargs, ps, MPI_ORDER_C, MPI_INT, &t) ==
        MPI_SUCCESS)
        OK(MPI_Type_free(&t));
    else
        CHECK(t == MPI_DATATYPE_NULL);
    t = (MPI_Datatype)(intptr_t)0x5eed;
    if (MPI_Type_contiguous_c(3, MPI_INT, &t) == MPI_SUCCESS)
        OK(MPI_Type_free(&t));
    else
        CHECK(t == MPI_DATATYPE_NULL);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &nprocs));
    init_bases();
    struct_extents();
    stubs();

    static const MPI_Aint counts[] = {1, 17, 60, 512};
    int iter = 0;
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
        for (int bi = 0; bi < NBASES; bi++) {
            const base_t *base = &bases[bi];
            MPI_Aint total = counts[ci];
            int reps = total >= 512 ? 2 : 4;
            for (int k = 0; k < reps; k++, iter++) {
                uint64_t seed = 1000 * (uint64_t)iter + 17;
                obj_t s, r, mine, recv;
                /* Shared types (same on every rank), and each rank's own. */
                make_obj(seed + 1, base, total, -1, &s);
                make_obj(seed + 2, base, total, -1, &r);
                make_obj(seed + 100 + rank, base, total, -1, &mine);
                make_obj(seed + 200 + rank, base, total, -1, &recv);
                p2p(&s, &r, iter);
                pack_unpack(&s, &r);
                reductions(&s, iter);
                collectives(&mine, &recv, iter);
                free_obj(&s);
                free_obj(&r);
                free_obj(&mine);
                free_obj(&recv);
            }
        }
    }
    /* Every constructor at every depth with a fixed count. */
    for (int d = 1; d <= MAX_DEPTH; d++)
        for (int k = 0; k < 30; k++, iter++) {
            obj_t s, r;
            make_obj(777 + 31 * iter, &bases[2 + k % 3], 24, d, &s);
            make_obj(778 + 31 * iter, &bases[2 + k % 3], 24, d, &r);
            p2p(&s, &r, iter);
            pack_unpack(&s, &r);
            reductions(&s, iter);
            free_obj(&s);
            free_obj(&r);
        }

    OK(MPI_Type_free(&struct_base));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("dtpool ok (%d type pairs)\n", iter);
    OK(MPI_Finalize());
    return 0;
}
