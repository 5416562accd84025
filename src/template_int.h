/*
 * template_int.h - internals shared by template_parse.c (lexer, parser),
 * template_run.c (evaluator) and template_lib.c (filters, tests, methods).
 * Not part of the public interface; see template.h for the design.
 *
 * Memory: every node, string and value lives in an arena (struct tarena).
 * The compile arena belongs to struct tmpl; the render arena to one call of
 * tmpl_render.  An error anywhere formats its message and longjmps to the
 * entry point (tmpl_compile / tmpl_render), which frees the arena.
 *
 * Names: every symbol the template module exports starts with tmpl_, so
 * it cannot collide with the libraries parley links (SQLite, libedit,
 * ncurses, PCRE2, utf8proc).  template.h holds the public API
 * (tmpl_compile, tmpl_render, tmpl_free).  Internals shared between the
 * template_*.c files say where they live in their second word:
 *   tmpl_arena_*, tmpl_fail   arena and error unwinding (template_parse.c)
 *   tmpl_run_*                the evaluator (template_run.c)
 *   tmpl_lib_*                filters, tests, methods, globals
 *                             (template_lib.c)
 * Everything else is static and may keep a short name.
 */
#ifndef PARLEY_TEMPLATE_INT_H
#define PARLEY_TEMPLATE_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "template.h"

/* Where an error goes: the entry point's jump buffer and message. */
struct tfail {
	jmp_buf jb;    /* target of longjmp */
	int code;      /* TMPL_E* */
	char *err;     /* caller's buffer */
	size_t errlen; /* its size */
};

struct tchunk;

/* A bump allocator with a byte budget. */
struct tarena {
	struct tchunk *head; /* newest chunk first */
	size_t total;        /* bytes allocated in chunks */
	size_t max;          /* budget; passing it fails with TMPL_ELIMIT */
	struct tfail *fail;  /* where allocation failures go */
	const int *line;     /* position for messages, or NULL */
	const int *col;
};

void *tmpl_arena_alloc(struct tarena *a, size_t n);
void tmpl_arena_free(struct tarena *a);

/* Fail with CODE; the message is "line L, column C: ..." when LINE > 0. */
_Noreturn void tmpl_fail(struct tfail *f, int code, int line, int col,
                         const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ------------------------------------------------------------- values */

enum vkind {
	V_UNDEF,
	V_NONE,
	V_BOOL,
	V_INT,
	V_FLOAT,
	V_STR,
	V_LIST,
	V_DICT,
	V_NS,
	V_FUNC,
	V_MACRO,
	V_LOOP
};

/* A byte range of a string that came from untrusted input. */
struct tcspan {
	size_t off; /* first byte */
	size_t len; /* bytes */
};

struct tstr {
	const char *p;     /* bytes (arena or borrowed), never NULL; not
	                      terminated */
	size_t n;          /* length in bytes */
	size_t nsp;        /* content spans, sorted, disjoint, non-adjacent */
	struct tcspan *sp; /* nsp spans */
};

struct tval;
struct tlist {
	size_t n;       /* items */
	struct tval *v; /* n items */
};

struct tdict {
	size_t n, cap;     /* members used / allocated */
	struct tval *keys; /* n keys (usually strings) */
	struct tval *vals; /* n values */
};

/* Why a value is undefined, for jinja2's error message. */
struct tundef {
	const char *hint; /* complete message, or NULL */
	const char *obj;  /* "dict object", "None", ...; NULL: a name */
	const char *name; /* the missing name or key */
	size_t nlen;      /* its length */
	bool is_index;    /* NAME was an integer index (IDX) */
	int64_t idx;      /* the index */
};

struct node;
struct tscope;
struct tloop;

/* A builtin function, possibly bound to a receiver (a method). */
struct tfunc {
	int id;            /* TF_* in template_lib.c */
	const char *name;  /* for messages */
	struct tval *self; /* receiver or NULL */
};

struct tmacro {
	const struct node *def; /* N_MACRO node (or call-block for caller) */
	struct tscope *scope;   /* defining scope */
};

struct tval {
	enum vkind k; /* kind */
	bool tuple;   /* V_LIST made as a tuple (repr "(...)") */
	union {
		bool b;           /* V_BOOL */
		int64_t i;        /* V_INT */
		double f;         /* V_FLOAT */
		struct tstr *s;   /* V_STR */
		struct tlist *l;  /* V_LIST */
		struct tdict *d;  /* V_DICT, V_NS */
		struct tfunc *fn; /* V_FUNC */
		struct tmacro *m; /* V_MACRO */
		struct tloop *lp; /* V_LOOP */
		struct tundef *u; /* V_UNDEF (NULL: plain) */
	} u;
};

struct tloop {
	struct tlist *items; /* what is iterated */
	size_t i;            /* current index0 */
};

/* ---------------------------------------------------------------- AST */

enum nkind {
	N_LIT,
	N_NAME,
	N_ATTR,   /* a.s */
	N_ITEM,   /* a[b] */
	N_SLICE,  /* a[b:c:d] (NULL parts absent) */
	N_CALL,   /* a(v..., kw...) */
	N_FILTER, /* a | s(v..., kw...) */
	N_TEST,   /* a is [not] s(v...) */
	N_NEG,
	N_POS,
	N_NOT,
	N_BIN, /* a op b; op one of + - * / % ~ F(//) P(**) */
	N_AND,
	N_OR,
	N_CMP,  /* v[0] ops[0] v[1] ... chained */
	N_COND, /* b if a else c */
	N_LIST,
	N_TUPLE,
	N_DICT,        /* keys v, values kv */
	N_TEXT,        /* template text s */
	N_OUT,         /* {{ a }} */
	N_IF,          /* if a: b else c */
	N_FOR,         /* for a in b if c: d else e */
	N_SET,         /* a = b */
	N_SETBLOCK,    /* a = body b | filters v */
	N_MACRO,       /* s(v params with defaults in ->a) body b */
	N_CALLBLOCK,   /* call(v params) a: body b */
	N_FILTERBLOCK, /* body b | filters v */
	N_BREAK,
	N_CONTINUE,
	N_BODY /* statements v */
};

struct node {
	enum nkind k;                   /* kind */
	int op;                         /* operator of N_BIN */
	int line, col;                  /* source position (1-based) */
	struct node *a, *b, *c, *d, *e; /* children, see enum nkind */
	struct node **v; /* n items / args / params / statements */
	size_t n;
	struct node **kv; /* nk keyword-argument values (or dict values) */
	const char **kn;  /* nk keyword names (NUL-terminated) */
	size_t nk;
	int *ops;        /* N_CMP operators, n - 1 of them */
	const char *s;   /* name or text */
	size_t sn;       /* its length */
	struct tval lit; /* N_LIT value */
	bool neg;        /* N_TEST: "is not" */
	bool unknown;    /* N_FILTER, N_TEST: the name is in no table; fails
	                    when run (jinja2 defers it in if branches) */
};

struct tmpl {
	struct tarena arena; /* owns everything below */
	struct tfail fail;   /* compile-time error target */
	struct node *root;   /* N_BODY */
};

/* ------------------------------------------------------- render state */

struct tscope {
	struct tscope *parent; /* enclosing scope or NULL */
	size_t n, cap;         /* variables used / allocated */
	const char **names;    /* n names (NUL-terminated) */
	struct tval *vals;     /* n values */
};

/* An output buffer with provenance, also used to capture blocks. */
struct tout {
	char *p;           /* bytes (arena) */
	size_t n, cap;     /* used / allocated */
	struct tcspan *sp; /* content spans */
	size_t nsp, spcap; /* used / allocated */
};

struct trender {
	struct tarena arena;        /* all values of this render */
	struct tfail fail;          /* error target */
	const struct tmpl_ctx *ctx; /* caller's context */
	struct tmpl_limits lim;     /* effective limits */
	struct tscope *globals;     /* context variables */
	struct tscope *root;        /* template top-level scope */
	struct tscope *scope;       /* innermost scope now */
	struct tout *out;           /* current output (captures nest) */
	uint64_t steps;             /* loop iterations + calls so far */
	unsigned depth;             /* macro call depth */
	int ctl;                    /* 1 break, 2 continue pending */
	int line, col;              /* position of the current node */
};

/* template_run.c */
_Noreturn void tmpl_run_fail(struct trender *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct tstr *tmpl_run_str_new(struct trender *r, const char *p, size_t n,
                              bool content);
struct tstr *tmpl_run_str_cat(struct trender *r, const struct tstr *a,
                              const struct tstr *b);
struct tstr *tmpl_run_str_sub(struct trender *r, const struct tstr *s,
                              size_t off, size_t n);
struct tstr *tmpl_run_str_derived(struct trender *r, const char *p, size_t n,
                                  bool content);
struct tstr *tmpl_run_to_str(struct trender *r, struct tval v);
bool tmpl_run_has_content(struct tval v, int depth);
bool tmpl_run_truthy(struct trender *r, struct tval v);
bool tmpl_run_equal(struct tval a, struct tval b, int depth);
struct tval tmpl_run_getitem(struct trender *r, struct tval obj,
                             struct tval key);
_Noreturn void tmpl_run_undef_fail(struct trender *r, struct tval u);
struct tlist *tmpl_run_iter(struct trender *r, struct tval v);
const char *tmpl_run_type_name(struct tval v);
struct tval tmpl_run_undef_hint(struct trender *r, const char *hint);
struct tval tmpl_run_dict_get(struct tval d, struct tval key, bool *found);
void tmpl_run_dict_set(struct trender *r, struct tdict *d, struct tval key,
                       struct tval val);
struct tlist *tmpl_run_list_new(struct trender *r, size_t n);
void tmpl_run_step(struct trender *r);
size_t tmpl_run_u8len(const struct tstr *s);
int tmpl_run_order(struct trender *r, int op, struct tval a, struct tval b,
                   int depth);
bool tmpl_run_contains(struct trender *r, struct tval a, struct tval b);

static inline struct tval tv_none(void)
{
	struct tval v = {.k = V_NONE};
	return v;
}
static inline struct tval tv_bool(bool b)
{
	struct tval v = {.k = V_BOOL, .u.b = b};
	return v;
}
static inline struct tval tv_int(int64_t i)
{
	struct tval v = {.k = V_INT, .u.i = i};
	return v;
}
static inline struct tval tv_float(double f)
{
	struct tval v = {.k = V_FLOAT, .u.f = f};
	return v;
}
static inline struct tval tv_str(struct tstr *s)
{
	struct tval v = {.k = V_STR, .u.s = s};
	return v;
}
static inline struct tval tv_list(struct tlist *l)
{
	struct tval v = {.k = V_LIST, .u.l = l};
	return v;
}

/* template_lib.c */
/* Apply filter NAME (a name of the filter table; others fail with "No
 * filter named 'NAME'.") to V with the call's arguments. */
struct tval tmpl_lib_filter(struct trender *r, const char *name, struct tval v,
                            struct tval *args, size_t nargs, const char **kn,
                            struct tval *kv, size_t nk);
/* Test V with test NAME (of the test table; others fail likewise). */
bool tmpl_lib_test(struct trender *r, const char *name, struct tval v,
                   struct tval *args, size_t nargs);
/* Is NAME in the filter (test) table?  The parser, the `filter`/`test`
 * tests, map and select ask these; the tables are the only lists. */
bool tmpl_lib_has_filter(const char *name);
bool tmpl_lib_has_test(const char *name);
/* Name I of the filter (test) table, NULL past its end: what exists, for
 * tests and listings. */
const char *tmpl_lib_filter_name(size_t i);
const char *tmpl_lib_test_name(size_t i);
struct tval tmpl_lib_method(struct trender *r, struct tval self,
                            const char *name, size_t nlen, bool *found);
struct tval tmpl_lib_global(struct trender *r, const char *name, bool *found);
struct tval tmpl_lib_call(struct trender *r, const struct tfunc *fn,
                          struct tval *args, size_t nargs, const char **kn,
                          struct tval *kv, size_t nk);
bool tmpl_lib_isspace(uint32_t cp);
bool tmpl_lib_isprint(uint32_t cp);
/* Decode one code point at P (N > 0 bytes left); *LEN gets its length
 * (1 for an invalid byte, which decodes as UINT32_MAX). */
uint32_t tmpl_lib_u8dec(const char *p, size_t n, size_t *len);

#endif /* PARLEY_TEMPLATE_INT_H */
