/*
 * tools/replay/pickle.h: a small, bounded reader of the part of Python's
 * pickle format that plain data uses: what `pickle.dump` writes for dicts,
 * lists and tuples of strings, bytes, integers, floats, booleans and None, in
 * protocols 2 to 5. PyTorch's memory snapshot (`torch.cuda.memory._snapshot()`,
 * saved by `torch.cuda.memory._dump_snapshot` with `pickle.dump`) is such data,
 * so a snapshot is read without Python.
 *
 * Written from the protocol (CPython's Lib/pickle.py and Lib/pickletools.py
 * document every opcode and its arguments), no code taken. The opcodes
 * accepted:
 *   framing   PROTO (2..5), FRAME, STOP
 *   stack     MARK, POP, POP_MARK, DUP
 *   memo      MEMOIZE, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET
 *   scalars   NONE, NEWTRUE, NEWFALSE, BININT, BININT1, BININT2, LONG1, LONG4
 *             (integers of at most 8 bytes, or 9 with a zero sign byte: up to
 *             2^64 - 1), BINFLOAT, SHORT_BINUNICODE, BINUNICODE, BINUNICODE8,
 *             SHORT_BINBYTES, BINBYTES, BINBYTES8
 *   containers EMPTY_DICT, SETITEM, SETITEMS, EMPTY_LIST, APPEND, APPENDS,
 *             EMPTY_TUPLE, TUPLE, TUPLE1, TUPLE2, TUPLE3
 * Anything else (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, NEWOBJ, the text
 * opcodes of protocol 0, out-of-band buffers, sets, ...) is refused with its
 * name and byte offset: such a pickle would need Python classes to load,
 * and executing them is exactly what an untrusted pickle must not get.
 *
 * Bounds: every length is checked against the bytes left; integers beyond
 * 64 bits, memo indices past the values made so far, MARK nesting deeper than
 * REPLAY_PICKLE_MAX_MARK_DEPTH, and more values than input bytes are refused.
 * Nothing recurses, so a deep or cyclic structure (a list appended to itself
 * through the memo) cannot exhaust the C stack. Host memory is about 24 bytes
 * per value plus 4 per container item.
 *
 * Thread-safe: yes for distinct documents; a parsed document is read-only and
 * may be read from several threads at once.
 */
#ifndef GMR_TOOLS_REPLAY_PICKLE_H_
#define GMR_TOOLS_REPLAY_PICKLE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REPLAY_PICKLE_MAX_MARK_DEPTH 4096

typedef enum replay_pickle_type {
  REPLAY_PICKLE_NONE = 0,
  REPLAY_PICKLE_BOOL = 1,
  REPLAY_PICKLE_INT = 2,
  REPLAY_PICKLE_FLOAT = 3,
  REPLAY_PICKLE_STR = 4,   /* UTF-8 bytes as written; not validated */
  REPLAY_PICKLE_BYTES = 5,
  REPLAY_PICKLE_LIST = 6,
  REPLAY_PICKLE_TUPLE = 7,
  REPLAY_PICKLE_DICT = 8
} replay_pickle_type;

/* A value of a document: an index, valid while the document lives. */
typedef uint32_t replay_pickle_value;

typedef struct replay_pickle replay_pickle;

/**
 * Parse the pickle in `data` (`size` bytes).
 *
 * Ownership: `data` is borrowed and must outlive the document (strings point
 *   into it); the caller frees *out with replay_pickle_destroy().
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  NULL data/out; an empty, truncated or malformed
 *                             pickle; an opcode outside the subset; a bound
 *                             exceeded. `err` (err_bytes, may be NULL/0) says
 *                             what and at which byte, e.g. "byte 17: opcode
 *                             0x93 STACK_GLOBAL is outside the subset ...".
 *   GMR_ERR_OUT_OF_MEMORY     a host allocation failed.
 * On failure *out is NULL and nothing needs to be freed.
 */
gmr_status replay_pickle_parse(const unsigned char *data, size_t size, replay_pickle **out,
                               char *err, size_t err_bytes);

/** Free a document. NULL is a no-op. */
void replay_pickle_destroy(replay_pickle *doc);

/** The value the pickle holds (what pickle.load would return). */
replay_pickle_value replay_pickle_root(const replay_pickle *doc);

/** The type of `v`. */
replay_pickle_type replay_pickle_type_of(const replay_pickle *doc, replay_pickle_value v);

/** "dict", "list", "int", ... (static string), for messages. */
const char *replay_pickle_type_name(replay_pickle_type type);

/** An INT (or BOOL) that fits in uint64_t and is >= 0: true and *out set;
 * else false. */
bool replay_pickle_get_u64(const replay_pickle *doc, replay_pickle_value v, uint64_t *out);

/** A STR or BYTES: true with *text (not NUL-terminated) and *length set. */
bool replay_pickle_get_str(const replay_pickle *doc, replay_pickle_value v, const char **text,
                           size_t *length);

/** Items of a LIST or TUPLE, key/value pairs of a DICT; 0 for anything else. */
size_t replay_pickle_length(const replay_pickle *doc, replay_pickle_value v);

/** Item `index` (< length) of a LIST or TUPLE. */
replay_pickle_value replay_pickle_item(const replay_pickle *doc, replay_pickle_value v,
                                       size_t index);

/** The value under the STR key `key` in DICT `dict` (the last one written, as
 * Python keeps it): true and *out set; false when absent or not a dict. */
bool replay_pickle_dict_get(const replay_pickle *doc, replay_pickle_value dict, const char *key,
                            replay_pickle_value *out);

/** Key `index` (< length) of DICT `dict`. */
replay_pickle_value replay_pickle_dict_key(const replay_pickle *doc, replay_pickle_value dict,
                                           size_t index);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_PICKLE_H_ */
