/*
 * resources/pool/pool_block.h (internal): the host-side header of one block of a
 * pool_resource chunk, shared by the pool, its free indexes and its live map.
 *
 * Device memory cannot hold allocator headers (the host cannot touch it
 * cheaply, and a kernel may overwrite it), so every block, free or allocated,
 * has a header in host memory: its address range, its neighbours in address
 * order inside its chunk (boundary tags), and, while free, its links in a
 * free index.
 *
 * Thread-safe: no; the owning arena's lock guards every header.
 */
#ifndef GMR_RESOURCES_POOL_POOL_BLOCK_H_
#define GMR_RESOURCES_POOL_POOL_BLOCK_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stream_ordered/free_index.h"

struct gmr__pool_chunk;
struct gmr__stream_uses;

typedef struct gmr__pool_block gmr__pool_block;
struct gmr__pool_block {
  /* First: the device address (256-byte aligned) and size (a multiple of
   * 256) and, while free, the links of its slot's free index
   * (stream_ordered/free_index.h), of the deferred list, or of the spare headers. */
  gmr__free_node node;
  gmr__pool_block *phys_prev; /* address-ordered neighbours in the chunk; NULL at its ends */
  gmr__pool_block *phys_next;
  struct gmr__pool_chunk *chunk;
  size_t request_bytes;            /* allocated: the bytes asked for; 0 while free */
  uint32_t request_alignment_log2; /* allocated: log2 of the alignment asked for */
  uint32_t slot;                   /* free: index of the stream slot that holds it */
  bool is_free;
  bool cached;   /* free, in its slot's cache of recent frees, not in an index */
  bool deferred; /* free, waiting for the events of the streams recorded on it
                    (record_stream), in its arena's deferred list, not in an index */
  /* Allocated: the other streams it is used on (record_stream), or NULL.
   * Deferred: those streams with the events recorded at the free
   * (stream_ordered/stream_uses.h). */
  struct gmr__stream_uses *uses;
};

/* The block whose node `n` is (NULL for NULL), and back. */
static inline gmr__pool_block *gmr__pool_block_of(gmr__free_node *n) {
  return (gmr__pool_block *)(void *)n;
}
static inline gmr__free_node *gmr__pool_block_node(gmr__pool_block *b) {
  return b != NULL ? &b->node : NULL;
}

#endif /* GMR_RESOURCES_POOL_POOL_BLOCK_H_ */
