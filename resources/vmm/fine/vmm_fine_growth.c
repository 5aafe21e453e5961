/*
 * resources/vmm/fine/vmm_fine_growth.c (internal): the handles a `vmm`
 * growth creates (vmm_fine.h): how many, how large, and which thread makes
 * them; the plan they go into (vmm_fine_native.c maps it).
 *
 * Sizes: what the fills still need, plus the growth tail in the last fill
 * (growth_percent of what is held, never past the remap threshold), cut into
 * handles of at most held / handle_divisor, so that free memory can later
 * move in pieces, and at least handle_floor_bytes and a page (a floor keeps
 * early handles from being a page each while the pool is small).
 *
 * Threads: with creator threads (vmm_fine_creator.h) a growth of several
 * handles queues all but its first, creates its first itself, runs every
 * job no thread has started, and waits for the rest; the books of each
 * handle are then kept here, on the allocating thread, in plan order, so the
 * handles, their places and the bytes held are those of a growth that made
 * them one after another. A job the driver refused is asked again inline
 * (gmr__vmf_create_handle: its usual failure); then the growth fails with
 * that result and what it made is given back by the caller's undo.
 */
#include <stdlib.h>

#include "core/failure.h"
#include "resources/vmm/fine/vmm_fine.h"

/* ---- the plan ---------------------------------------------------------------------- */

bool gmr__vmf_plan_room(vmf_plan *p, size_t more) {
  if (p->moved_count + p->made_count + more <= p->capacity) return true;
  size_t n = (p->capacity + more) * 2;
  vmf_handle **a = realloc(p->moved, n * sizeof *a);
  if (a == NULL) return false;
  p->moved = a;
  vmf_handle **b = realloc(p->made, n * sizeof *b);
  if (b == NULL) return false;
  p->made = b;
  p->capacity = n;
  return true;
}

void gmr__vmf_plan_free(vmf_plan *p) {
  free(p->fills);
  free(p->moved);
  free(p->made);
}

void gmr__vmf_plan_undo(vmf_engine *e, vmf_plan *p) {
  for (size_t i = 0; i < p->moved_count; ++i) (void)gmr__vmf_drop_handle(e, p->moved[i]);
  for (size_t i = 0; i < p->made_count; ++i) (void)gmr__vmf_drop_handle(e, p->made[i]);
  p->moved_count = p->made_count = 0;
}

/* ---- sizes ------------------------------------------------------------------------- */

/* Largest handle the growth makes: held / handle_divisor (no limit for 0),
 * at least the floor and a page. */
static size_t handle_limit(const vmf_engine *e, size_t floor_bytes) {
  size_t h = e->handle_divisor == 0 ? SIZE_MAX
                                    : gmr__align_up(e->held_bytes / e->handle_divisor,
                                                    e->page_bytes);
  if (h < floor_bytes) h = floor_bytes;
  return h < e->page_bytes ? e->page_bytes : h;
}

/* What fill x must still map, plus (for the last fill) the growth tail. */
static size_t fill_want(const vmf_engine *e, const vmf_plan *p, size_t f, size_t cap) {
  const vmf_fill *x = &p->fills[f];
  if (x->mapped_bytes >= x->need_bytes) return 0;
  size_t want = x->need_bytes - x->mapped_bytes;
  if (f + 1 == p->fill_count) {
    size_t grow = (size_t)((double)e->held_bytes * e->growth_percent / 100.0);
    if (grow < e->min_growth_bytes) grow = e->min_growth_bytes;
    if (grow > e->max_growth_bytes) grow = e->max_growth_bytes;
    grow = gmr__align_up(grow, e->page_bytes);
    size_t extra = grow > want ? grow - want : 0;
    size_t room = x->room_bytes - x->mapped_bytes - want;
    if (extra > room) extra = room;
    size_t below = cap > e->held_bytes + want ? cap - e->held_bytes - want : 0;
    if (extra > below) extra = below / e->page_bytes * e->page_bytes;
    want += extra;
  }
  return want;
}

/* One handle to make: its size and the fill it goes into. */
typedef struct piece {
  size_t fill;
  size_t bytes;
  vmf_handle *h; /* made (booked), or NULL */
} piece;

/* The pieces of the plan, in order (*count of them; NULL with *count 0 when
 * nothing is to be made, or when host memory ran out: *oom). */
static piece *plan_pieces(const vmf_engine *e, const vmf_plan *p, size_t cap, size_t floor_bytes,
                          size_t *count, bool *oom) {
  const size_t limit = handle_limit(e, floor_bytes);
  size_t n = 0;
  *count = 0;
  *oom = false;
  for (size_t f = 0; f < p->fill_count; ++f) {
    size_t want = fill_want(e, p, f, cap);
    n += want / limit + (want % limit != 0);
  }
  if (n == 0) return NULL;
  piece *out = calloc(n, sizeof *out);
  if (out == NULL) {
    *oom = true;
    return NULL;
  }
  for (size_t f = 0; f < p->fill_count; ++f) {
    size_t want = fill_want(e, p, f, cap);
    while (want > 0) {
      size_t bytes = want < limit ? want : limit;
      out[*count].fill = f;
      out[*count].bytes = bytes;
      (*count)++;
      want -= bytes;
    }
  }
  return out;
}

/* ---- making them --------------------------------------------------------------------- */

/* Make pieces[1..count) on the creator's threads and the calling thread
 * (pieces[0] inline first). Booked pieces get h; returns the first failure
 * (each refused job was asked again inline). false in *used: no threads, so
 * nothing was done. */
static CUresult make_with_threads(vmf_engine *e, vmm_fine *f, piece *pieces, size_t count,
                                  bool *used) {
  *used = false;
  size_t jobs_count = count - 1;
  gmr__vmf_create_job *jobs = calloc(jobs_count, sizeof *jobs);
  vmf_handle **spare = calloc(jobs_count, sizeof *spare);
  size_t promised = 0;
  bool ready = jobs != NULL && spare != NULL;
  for (size_t i = 0; ready && i < jobs_count; ++i) {
    spare[i] = calloc(1, sizeof *spare[i]);
    ready = spare[i] != NULL && gmr__vmm_kept_promise(&e->unreleased.handles);
    if (ready) promised++;
  }
  for (size_t i = 0; ready && i < jobs_count; ++i) jobs[i].bytes = pieces[i + 1].bytes;
  if (ready && gmr__vmf_creator_submit(&f->creator, jobs, jobs_count)) {
    *used = true;
  }
  CUresult first = CUDA_SUCCESS;
  if (*used) {
    first = gmr__vmf_create_handle(e, pieces[0].bytes, &pieces[0].h);
    gmr__vmf_creator_finish(&f->creator, jobs, jobs_count);
    for (size_t i = 0; i < jobs_count; ++i) {
      piece *x = &pieces[i + 1];
      gmr__vmf_create_job *job = &jobs[i];
      if (job->result == CUDA_SUCCESS) {
        gmr__vmf_adopt_handle(e, spare[i], job->handle, job->bytes);
        x->h = spare[i];
        spare[i] = NULL;
        promised--;
        continue;
      }
      /* Refused on a thread: ask once more here, as a growth without
       * threads would have asked. */
      CUresult again = first == CUDA_SUCCESS ? gmr__vmf_create_handle(e, x->bytes, &x->h)
                                             : job->result;
      if (again != CUDA_SUCCESS && first == CUDA_SUCCESS) first = again;
    }
  }
  for (size_t i = 0; i < promised; ++i) gmr__vmm_kept_unpromise(&e->unreleased.handles);
  for (size_t i = 0; spare != NULL && i < jobs_count; ++i) free(spare[i]);
  free(spare);
  free(jobs);
  return first;
}

CUresult gmr__vmf_create_rest(vmf_engine *e, vmf_plan *p, size_t cap) {
  vmm_fine *f = e->source_ctx; /* the pool: every fine engine has it (vmm_fine_shard.c) */
  size_t count = 0;
  bool oom = false;
  piece *pieces = plan_pieces(e, p, cap, f->handle_floor_bytes, &count, &oom);
  if (oom) return CUDA_ERROR_OUT_OF_MEMORY;
  if (count == 0) return CUDA_SUCCESS;
  if (!gmr__vmf_plan_room(p, count)) {
    free(pieces);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult cu = CUDA_SUCCESS;
  bool threaded = false;
  if (count >= 2 && f->creator_ready) {
    cu = make_with_threads(e, f, pieces, count, &threaded);
  }
  for (size_t i = 0; !threaded && i < count && cu == CUDA_SUCCESS; ++i) {
    cu = gmr__vmf_create_handle(e, pieces[i].bytes, &pieces[i].h);
  }
  /* Book every handle made, in order, at its place (on failure the caller
   * gives them all back). */
  for (size_t i = 0; i < count; ++i) {
    vmf_handle *h = pieces[i].h;
    if (h == NULL) continue;
    vmf_fill *x = &p->fills[pieces[i].fill];
    p->made[p->made_count++] = h;
    h->target = x->addr + x->mapped_bytes;
    x->mapped_bytes += h->bytes;
  }
  free(pieces);
  return cu;
}
