/*
 * tools/replay/pickle.c: see pickle.h.
 *
 * A pickle is a program for a stack machine. Values live in one array and are
 * named by index; containers grow by linked slots while the program runs
 * (a container may be appended to after the memo shared it), and are laid
 * out flat once STOP is reached, so reading an item is O(1).
 */
#include "tools/replay/pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_SLOT UINT32_MAX
/* Value and slot indices are uint32_t and each needs an input byte. */
#define MAX_INPUT_BYTES ((size_t)UINT32_MAX - 2)

typedef struct pvalue {
  uint64_t bits;   /* INT: value (two's complement unless is_u64); FLOAT: IEEE bits; STR/BYTES:
                      offset into the data; containers: first slot (parsing) or first item */
  uint32_t length; /* STR/BYTES: bytes; containers: slots (a dict uses two per pair) */
  uint32_t tail;   /* containers while parsing: the last slot */
  uint8_t type;    /* replay_pickle_type */
  bool is_u64;     /* INT in [2^63, 2^64) */
} pvalue;

typedef struct slot {
  uint32_t value;
  uint32_t next;
} slot;

struct replay_pickle {
  const unsigned char *data;
  pvalue *values;
  size_t value_count, value_capacity;
  uint32_t *items; /* every container's items, laid out after STOP */
  replay_pickle_value root;
};

/* The machine while it runs. */
typedef struct machine {
  replay_pickle *doc;
  const unsigned char *data;
  size_t size;
  size_t pos;    /* next byte to read */
  size_t op_pos; /* where the current opcode started */
  uint8_t op;
  slot *slots;
  size_t slot_count, slot_capacity;
  uint32_t *stack;
  size_t stack_count, stack_capacity;
  size_t *marks;
  size_t mark_count, mark_capacity;
  uint32_t *memo; /* NO_SLOT where unset */
  size_t memo_capacity;
  size_t memo_count; /* entries set: what MEMOIZE uses as its index */
  char *err;
  size_t err_bytes;
  bool out_of_memory;
} machine;

/* ---- opcode names, for messages ----------------------------------------- */

static const char *opcode_name(uint8_t op) {
  static const struct {
    uint8_t op;
    const char *name;
  } names[] = {
      {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'F', "FLOAT"},
      {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"}, {'M', "BININT2"},
      {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"}, {'S', "STRING"},
      {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"}, {'X', "BINUNICODE"},
      {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"}, {'}', "EMPTY_DICT"},
      {'e', "APPENDS"},
      {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"}, {'j', "LONG_BINGET"}, {'l', "LIST"},
      {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"}, {'q', "BINPUT"}, {'r', "LONG_BINPUT"},
      {'s', "SETITEM"}, {'t', "TUPLE"}, {')', "EMPTY_TUPLE"}, {'u', "SETITEMS"},
      {'G', "BINFLOAT"}, {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"}, {0x80, "PROTO"},
      {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"},
      {0x86, "TUPLE2"}, {0x87, "TUPLE3"}, {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"},
      {0x8b, "LONG4"}, {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
      {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
      {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"},
      {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    if (names[i].op == op) return names[i].name;
  }
  return NULL;
}

/* Record the first failure (with the opcode's offset) and return false. */
static bool fail(machine *m, const char *fmt, ...) {
  if (m->err == NULL || m->err_bytes == 0 || m->err[0] != '\0') return false;
  const char *name = opcode_name(m->op);
  int n = snprintf(m->err, m->err_bytes, "byte %zu: %s: ", m->op_pos, name != NULL ? name : "?");
  if (n < 0 || (size_t)n >= m->err_bytes) return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->err + n, m->err_bytes - (size_t)n, fmt, ap);
  va_end(ap);
  return false;
}

static bool no_memory(machine *m) {
  m->out_of_memory = true;
  return fail(m, "out of host memory");
}

/* ---- growable arrays ------------------------------------------------------ */

static bool reserve(void **array, size_t *capacity, size_t wanted, size_t element_bytes) {
  if (wanted <= *capacity) return true;
  size_t grown = *capacity == 0 ? 64 : *capacity;
  while (grown < wanted) {
    if (grown > SIZE_MAX / 2) return false;
    grown *= 2;
  }
  if (grown > SIZE_MAX / element_bytes) return false;
  void *bigger = realloc(*array, grown * element_bytes);
  if (bigger == NULL) return false;
  *array = bigger;
  *capacity = grown;
  return true;
}

/* ---- reading arguments ---------------------------------------------------- */

static bool take(machine *m, size_t bytes, const unsigned char **out) {
  if (bytes > m->size - m->pos) {
    return fail(m, "truncated: needs %zu more bytes, %zu left", bytes, m->size - m->pos);
  }
  *out = m->data + m->pos;
  m->pos += bytes;
  return true;
}

static bool take_le(machine *m, size_t bytes, uint64_t *out) {
  const unsigned char *p = NULL;
  if (!take(m, bytes, &p)) return false;
  uint64_t v = 0;
  for (size_t i = bytes; i > 0; --i) v = (v << 8) | p[i - 1];
  *out = v;
  return true;
}

/* ---- values and the stack ------------------------------------------------- */

static bool new_value(machine *m, replay_pickle_type type, uint32_t *out) {
  replay_pickle *d = m->doc;
  if (d->value_count >= MAX_INPUT_BYTES) return fail(m, "too many values");
  if (!reserve((void **)&d->values, &d->value_capacity, d->value_count + 1, sizeof(pvalue))) {
    return no_memory(m);
  }
  pvalue *v = &d->values[d->value_count];
  memset(v, 0, sizeof *v);
  v->type = (uint8_t)type;
  if (type >= REPLAY_PICKLE_LIST) {
    v->bits = NO_SLOT;
    v->tail = NO_SLOT;
  }
  *out = (uint32_t)d->value_count++;
  return true;
}

static bool push(machine *m, uint32_t value) {
  if (!reserve((void **)&m->stack, &m->stack_capacity, m->stack_count + 1, sizeof(uint32_t))) {
    return no_memory(m);
  }
  m->stack[m->stack_count++] = value;
  return true;
}

static bool push_new(machine *m, replay_pickle_type type, uint64_t bits, uint32_t length) {
  uint32_t v = 0;
  if (!new_value(m, type, &v)) return false;
  m->doc->values[v].bits = bits;
  m->doc->values[v].length = length;
  return push(m, v);
}

/* The stack floor the current opcode may pop down to: the last mark. */
static size_t floor_of(const machine *m) {
  return m->mark_count > 0 ? m->marks[m->mark_count - 1] : 0;
}

static bool top(machine *m, uint32_t *out) {
  if (m->stack_count <= floor_of(m)) return fail(m, "the stack is empty (above the last MARK)");
  *out = m->stack[m->stack_count - 1];
  return true;
}

/* Pop back to the last mark: the items are stack[*first .. stack_count). */
static bool pop_mark(machine *m, size_t *first) {
  if (m->mark_count == 0) return fail(m, "no MARK to pop to");
  *first = m->marks[--m->mark_count];
  return true;
}

static bool append_slot(machine *m, uint32_t container, uint32_t value) {
  if (m->slot_count >= MAX_INPUT_BYTES) return fail(m, "too many container items");
  if (!reserve((void **)&m->slots, &m->slot_capacity, m->slot_count + 1, sizeof(slot))) {
    return no_memory(m);
  }
  pvalue *c = &m->doc->values[container];
  if (c->length == UINT32_MAX) return fail(m, "a container with too many items");
  uint32_t s = (uint32_t)m->slot_count++;
  m->slots[s].value = value;
  m->slots[s].next = NO_SLOT;
  if (c->tail == NO_SLOT) {
    c->bits = s;
  } else {
    m->slots[c->tail].next = s;
  }
  c->tail = s;
  c->length++;
  return true;
}

/* The container under the items an opcode adds, of type `type`. */
static bool target(machine *m, size_t below, replay_pickle_type type, uint32_t *out) {
  if (below <= floor_of(m) || below == 0)
    return fail(m, "no %s below the items", replay_pickle_type_name(type));
  uint32_t c = m->stack[below - 1];
  replay_pickle_type actual = (replay_pickle_type)m->doc->values[c].type;
  if (actual != type) {
    return fail(m, "adds items to a value of type %s, not to a %s",
                replay_pickle_type_name(actual), replay_pickle_type_name(type));
  }
  *out = c;
  return true;
}

/* APPEND / APPENDS / SETITEM / SETITEMS: stack[first..) go into the container
 * just below them. */
static bool add_items(machine *m, size_t first, replay_pickle_type type) {
  size_t count = m->stack_count - first;
  if (type == REPLAY_PICKLE_DICT && count % 2 != 0) {
    return fail(m, "an odd number of items (%zu) for key/value pairs", count);
  }
  uint32_t c = 0;
  if (!target(m, first, type, &c)) return false;
  for (size_t i = first; i < m->stack_count; ++i) {
    if (!append_slot(m, c, m->stack[i])) return false;
  }
  m->stack_count = first;
  return true;
}

static bool make_tuple(machine *m, size_t first) {
  uint32_t t = 0;
  if (!new_value(m, REPLAY_PICKLE_TUPLE, &t)) return false;
  for (size_t i = first; i < m->stack_count; ++i) {
    if (!append_slot(m, t, m->stack[i])) return false;
  }
  m->stack_count = first;
  return push(m, t);
}

/* ---- the memo -------------------------------------------------------------- */

static bool memo_put(machine *m, uint64_t index) {
  uint32_t v = 0;
  if (!top(m, &v)) return false;
  /* pickle.dump numbers memo entries 0, 1, 2... as it writes values, so an
   * index past the values made so far cannot come from it, and would only
   * make this reader allocate for nothing. */
  if (index >= m->doc->value_count) {
    return fail(m, "memo index %llu is past the %zu values made so far", (unsigned long long)index,
                m->doc->value_count);
  }
  size_t old = m->memo_capacity;
  if (!reserve((void **)&m->memo, &m->memo_capacity, (size_t)index + 1, sizeof(uint32_t))) {
    return no_memory(m);
  }
  for (size_t i = old; i < m->memo_capacity; ++i) m->memo[i] = NO_SLOT;
  if (m->memo[index] == NO_SLOT) m->memo_count++;
  m->memo[index] = v;
  return true;
}

static bool memo_get(machine *m, uint64_t index) {
  if (index >= m->memo_capacity || m->memo[index] == NO_SLOT) {
    return fail(m, "memo index %llu was never stored", (unsigned long long)index);
  }
  return push(m, m->memo[index]);
}

/* ---- scalars ---------------------------------------------------------------- */

/* LONG1 / LONG4: `n` bytes of two's complement, little-endian. */
static bool push_long(machine *m, uint64_t n) {
  const unsigned char *p = NULL;
  if (n > m->size - m->pos) {
    return fail(m, "truncated: an integer of %llu bytes, %zu left", (unsigned long long)n,
                m->size - m->pos);
  }
  if (!take(m, (size_t)n, &p)) return false;
  if (n == 0) return push_new(m, REPLAY_PICKLE_INT, 0, 0);
  bool negative = (p[n - 1] & 0x80) != 0;
  size_t used = (size_t)n;
  /* 9 bytes with a zero top byte: a value in [2^63, 2^64). */
  bool big = false;
  if (used == 9 && p[8] == 0 && (p[7] & 0x80) != 0) {
    used = 8;
    big = true;
  }
  if (used > 8) {
    return fail(m, "an integer of %llu bytes does not fit in 64 bits", (unsigned long long)n);
  }
  uint64_t v = 0;
  for (size_t i = used; i > 0; --i) v = (v << 8) | p[i - 1];
  if (negative && used < 8) v |= ~UINT64_C(0) << (8 * used); /* sign-extend */
  uint32_t id = 0;
  if (!new_value(m, REPLAY_PICKLE_INT, &id)) return false;
  m->doc->values[id].bits = v;
  m->doc->values[id].is_u64 = big;
  return push(m, id);
}

static bool push_text(machine *m, replay_pickle_type type, size_t length_bytes) {
  uint64_t length = 0;
  const unsigned char *p = NULL;
  if (!take_le(m, length_bytes, &length)) return false;
  if (length > m->size - m->pos) {
    return fail(m, "truncated: a string of %llu bytes, %zu left", (unsigned long long)length,
                m->size - m->pos);
  }
  if (!take(m, (size_t)length, &p)) return false;
  return push_new(m, type, (uint64_t)(p - m->data), (uint32_t)length);
}

/* ---- one opcode ------------------------------------------------------------- */

static bool step(machine *m, bool *stop) {
  uint64_t arg = 0;
  uint32_t v = 0;
  size_t first = 0;
  switch (m->op) {
    case 0x80: /* PROTO */
      if (!take_le(m, 1, &arg)) return false;
      if (arg < 2 || arg > 5)
        return fail(m, "protocol %llu; this reader takes 2 to 5", (unsigned long long)arg);
      return true;
    case 0x95: /* FRAME: only a hint for buffering, but it must fit */
      if (!take_le(m, 8, &arg)) return false;
      if (arg > m->size - m->pos) {
        return fail(m, "truncated: a frame of %llu bytes, %zu left", (unsigned long long)arg,
                    m->size - m->pos);
      }
      return true;
    case '.': /* STOP */
      *stop = true;
      return true;
    case '(': /* MARK */
      if (m->mark_count >= REPLAY_PICKLE_MAX_MARK_DEPTH) {
        return fail(m, "more than %d nested MARKs", REPLAY_PICKLE_MAX_MARK_DEPTH);
      }
      if (!reserve((void **)&m->marks, &m->mark_capacity, m->mark_count + 1, sizeof(size_t))) {
        return no_memory(m);
      }
      m->marks[m->mark_count++] = m->stack_count;
      return true;
    case '0': /* POP: the top item, or the mark when nothing is above it */
      if (m->stack_count > floor_of(m)) {
        m->stack_count--;
        return true;
      }
      return pop_mark(m, &first);
    case '1': /* POP_MARK */
      if (!pop_mark(m, &first)) return false;
      m->stack_count = first;
      return true;
    case '2': /* DUP */
      return top(m, &v) && push(m, v);
    case 0x94: /* MEMOIZE */
      return memo_put(m, m->memo_count);
    case 'q': /* BINPUT */
      return take_le(m, 1, &arg) && memo_put(m, arg);
    case 'r': /* LONG_BINPUT */
      return take_le(m, 4, &arg) && memo_put(m, arg);
    case 'h': /* BINGET */
      return take_le(m, 1, &arg) && memo_get(m, arg);
    case 'j': /* LONG_BINGET */
      return take_le(m, 4, &arg) && memo_get(m, arg);
    case 'N':
      return push_new(m, REPLAY_PICKLE_NONE, 0, 0);
    case 0x88: /* NEWTRUE */
      return push_new(m, REPLAY_PICKLE_BOOL, 1, 0);
    case 0x89: /* NEWFALSE */
      return push_new(m, REPLAY_PICKLE_BOOL, 0, 0);
    case 'K': /* BININT1 */
      return take_le(m, 1, &arg) && push_new(m, REPLAY_PICKLE_INT, arg, 0);
    case 'M': /* BININT2 */
      return take_le(m, 2, &arg) && push_new(m, REPLAY_PICKLE_INT, arg, 0);
    case 'J': /* BININT: signed 32 bits */
      if (!take_le(m, 4, &arg)) return false;
      if (arg & 0x80000000u) arg |= ~UINT64_C(0xFFFFFFFF);
      return push_new(m, REPLAY_PICKLE_INT, arg, 0);
    case 0x8a: /* LONG1 */
      return take_le(m, 1, &arg) && push_long(m, arg);
    case 0x8b: /* LONG4: the length is a signed 32-bit number */
      if (!take_le(m, 4, &arg)) return false;
      if (arg & 0x80000000u) return fail(m, "a negative length");
      return push_long(m, arg);
    case 'G': { /* BINFLOAT: big-endian */
      const unsigned char *p = NULL;
      if (!take(m, 8, &p)) return false;
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];
      return push_new(m, REPLAY_PICKLE_FLOAT, bits, 0);
    }
    case 0x8c: /* SHORT_BINUNICODE */
      return push_text(m, REPLAY_PICKLE_STR, 1);
    case 'X': /* BINUNICODE */
      return push_text(m, REPLAY_PICKLE_STR, 4);
    case 0x8d: /* BINUNICODE8 */
      return push_text(m, REPLAY_PICKLE_STR, 8);
    case 'C': /* SHORT_BINBYTES */
      return push_text(m, REPLAY_PICKLE_BYTES, 1);
    case 'B': /* BINBYTES */
      return push_text(m, REPLAY_PICKLE_BYTES, 4);
    case 0x8e: /* BINBYTES8 */
      return push_text(m, REPLAY_PICKLE_BYTES, 8);
    case '}': /* EMPTY_DICT */
      return push_new(m, REPLAY_PICKLE_DICT, NO_SLOT, 0);
    case ']': /* EMPTY_LIST */
      return push_new(m, REPLAY_PICKLE_LIST, NO_SLOT, 0);
    case ')': /* EMPTY_TUPLE */
      return make_tuple(m, m->stack_count);
    case 'a': /* APPEND */
      if (m->stack_count <= floor_of(m)) return fail(m, "the stack is empty (above the last MARK)");
      return add_items(m, m->stack_count - 1, REPLAY_PICKLE_LIST);
    case 's': /* SETITEM */
      if (m->stack_count < floor_of(m) + 2) return fail(m, "needs a key and a value on the stack");
      return add_items(m, m->stack_count - 2, REPLAY_PICKLE_DICT);
    case 'e': /* APPENDS */
      return pop_mark(m, &first) && add_items(m, first, REPLAY_PICKLE_LIST);
    case 'u': /* SETITEMS */
      return pop_mark(m, &first) && add_items(m, first, REPLAY_PICKLE_DICT);
    case 't': /* TUPLE */
      return pop_mark(m, &first) && make_tuple(m, first);
    case 0x85: /* TUPLE1 */
    case 0x86: /* TUPLE2 */
    case 0x87: /* TUPLE3 */
      first = (size_t)(m->op - 0x84);
      if (m->stack_count < floor_of(m) + first) {
        return fail(m, "needs %zu items on the stack", first);
      }
      return make_tuple(m, m->stack_count - first);
    default:
      break;
  }
  const char *name = opcode_name(m->op);
  if (name == NULL) return fail(m, "opcode 0x%02x is not a pickle opcode", m->op);
  return fail(m,
              "opcode 0x%02x %s is outside the subset this reader accepts (dicts, lists, tuples, "
              "strings, bytes, numbers, booleans and None; nothing that needs Python classes)",
              m->op, name);
}

/* ---- after STOP: lay the containers out flat -------------------------------- */

static bool flatten(machine *m) {
  replay_pickle *d = m->doc;
  d->items = malloc((m->slot_count > 0 ? m->slot_count : 1) * sizeof *d->items);
  if (d->items == NULL) return no_memory(m);
  size_t cursor = 0;
  for (size_t i = 0; i < d->value_count; ++i) {
    pvalue *v = &d->values[i];
    if (v->type < REPLAY_PICKLE_LIST) continue;
    uint64_t first = cursor;
    for (uint32_t s = (uint32_t)v->bits; s != NO_SLOT; s = m->slots[s].next) {
      d->items[cursor++] = m->slots[s].value;
    }
    v->bits = first;
  }
  return true;
}

static void machine_free(machine *m) {
  free(m->slots);
  free(m->stack);
  free(m->marks);
  free(m->memo);
}

gmr_status replay_pickle_parse(const unsigned char *data, size_t size, replay_pickle **out,
                               char *err, size_t err_bytes) {
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  if (out != NULL) *out = NULL;
  if (data == NULL || out == NULL) {
    if (err != NULL && err_bytes > 0) snprintf(err, err_bytes, "invalid argument (NULL)");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (size == 0 || data[0] != 0x80) {
    if (err != NULL && err_bytes > 0) {
      snprintf(err, err_bytes,
               "not a pickle of protocol 2 or later (it must start with PROTO, byte 0x80)");
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (size > MAX_INPUT_BYTES) {
    if (err != NULL && err_bytes > 0) {
      snprintf(err, err_bytes, "a pickle of %zu bytes; this reader takes at most %zu", size,
               MAX_INPUT_BYTES);
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  replay_pickle *doc = calloc(1, sizeof *doc);
  if (doc == NULL) return GMR_ERR_OUT_OF_MEMORY;
  doc->data = data;
  machine m;
  memset(&m, 0, sizeof m);
  m.doc = doc;
  m.data = data;
  m.size = size;
  m.err = err;
  m.err_bytes = err_bytes;
  bool ok = true;
  bool stop = false;
  while (ok && !stop) {
    if (m.pos == m.size) {
      m.op_pos = m.pos;
      m.op = '.';
      ok = fail(&m, "truncated: the pickle ends without STOP");
      break;
    }
    m.op_pos = m.pos;
    m.op = data[m.pos++];
    ok = step(&m, &stop);
  }
  if (ok && m.pos != m.size) ok = fail(&m, "%zu bytes after STOP", m.size - m.pos);
  if (ok && (m.mark_count != 0 || m.stack_count != 1)) {
    ok = fail(&m,
              "the pickle ends with %zu values and %zu open MARKs on the stack (expected one "
              "value)",
              m.stack_count, m.mark_count);
  }
  if (ok) {
    doc->root = m.stack[0];
    ok = flatten(&m);
  }
  bool no_mem = m.out_of_memory;
  machine_free(&m);
  if (!ok) {
    replay_pickle_destroy(doc);
    return no_mem ? GMR_ERR_OUT_OF_MEMORY : GMR_ERR_INVALID_ARGUMENT;
  }
  *out = doc;
  return GMR_OK;
}

void replay_pickle_destroy(replay_pickle *doc) {
  if (doc == NULL) return;
  free(doc->values);
  free(doc->items);
  free(doc);
}

/* ---- reading a document ------------------------------------------------------ */

replay_pickle_value replay_pickle_root(const replay_pickle *doc) { return doc->root; }

replay_pickle_type replay_pickle_type_of(const replay_pickle *doc, replay_pickle_value v) {
  return (replay_pickle_type)doc->values[v].type;
}

const char *replay_pickle_type_name(replay_pickle_type type) {
  static const char *const names[] = {"None",  "bool", "int",   "float", "str",
                                      "bytes", "list", "tuple", "dict"};
  return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "?";
}

bool replay_pickle_get_u64(const replay_pickle *doc, replay_pickle_value v, uint64_t *out) {
  const pvalue *p = &doc->values[v];
  if (p->type != REPLAY_PICKLE_INT && p->type != REPLAY_PICKLE_BOOL) return false;
  if (p->type == REPLAY_PICKLE_INT && !p->is_u64 && (p->bits >> 63) != 0) return false;
  *out = p->bits;
  return true;
}

bool replay_pickle_get_str(const replay_pickle *doc, replay_pickle_value v, const char **text,
                           size_t *length) {
  const pvalue *p = &doc->values[v];
  if (p->type != REPLAY_PICKLE_STR && p->type != REPLAY_PICKLE_BYTES) return false;
  *text = (const char *)doc->data + p->bits;
  *length = p->length;
  return true;
}

size_t replay_pickle_length(const replay_pickle *doc, replay_pickle_value v) {
  const pvalue *p = &doc->values[v];
  if (p->type == REPLAY_PICKLE_DICT) return p->length / 2;
  return p->type >= REPLAY_PICKLE_LIST ? p->length : 0;
}

replay_pickle_value replay_pickle_item(const replay_pickle *doc, replay_pickle_value v,
                                       size_t index) {
  return doc->items[doc->values[v].bits + index];
}

replay_pickle_value replay_pickle_dict_key(const replay_pickle *doc, replay_pickle_value dict,
                                           size_t index) {
  return doc->items[doc->values[dict].bits + 2 * index];
}

bool replay_pickle_dict_get(const replay_pickle *doc, replay_pickle_value dict, const char *key,
                            replay_pickle_value *out) {
  const pvalue *d = &doc->values[dict];
  if (d->type != REPLAY_PICKLE_DICT) return false;
  size_t key_length = strlen(key);
  bool found = false;
  for (size_t i = 0; i + 1 < d->length; i += 2) {
    const char *text = NULL;
    size_t length = 0;
    if (!replay_pickle_get_str(doc, doc->items[d->bits + i], &text, &length)) continue;
    if (doc->values[doc->items[d->bits + i]].type != REPLAY_PICKLE_STR) continue;
    if (length == key_length && memcmp(text, key, length) == 0) {
      *out = doc->items[d->bits + i + 1];
      found = true; /* keep looking: the last one wins */
    }
  }
  return found;
}
