/*
 * adaptors/nvtx_logging_adaptor.c: NVTX ranges, marks and a counter around
 * every call of the stack below. See gmr/nvtx_logging_adaptor.h.
 */
/* pthread_rwlock_* are POSIX, not C11. */
#define _POSIX_C_SOURCE 200809L

#include "gmr/nvtx_logging_adaptor.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/adaptor.h"
#include "core/forward.h"
#include "core/nvtx_headers.h"
#include "core/nvtx_mem.h"
#include "core/resource_type.h"
#ifndef GMR_DISABLE_NVTX
#include "core/events.h"
#endif

#ifndef GMR_DISABLE_NVTX
/* Streams whose range names are registered strings; later streams get their
 * name formatted per call (still correct, only slower). */
#define STREAM_NAME_SLOTS 32
#define STREAM_TEXT_BYTES 64

typedef struct stream_name {
  gmr_stream stream;
  char allocate_text[STREAM_TEXT_BYTES];
  char deallocate_text[STREAM_TEXT_BYTES];
  nvtxStringHandle_t allocate; /* NULL when the tool registers no strings */
  nvtxStringHandle_t deallocate;
} stream_name;
#endif

struct gmr_nvtx_logging_adaptor {
  gmr__adaptor base; /* first: the adaptor is usable as a gmr_resource */
  atomic_bool enabled;
  char domain_name[GMR_NVTX_DOMAIN_NAME_MAX_BYTES + 1];
#ifndef GMR_DISABLE_NVTX
  nvtxDomainHandle_t domain; /* NULL: no tool attached, emit nothing */
  uint64_t counter_id;       /* 0: the tool has no counters; marks instead */
  nvtxStringHandle_t bytes_in_use_text;
  _Atomic int64_t bytes_in_use;
  /* Entries [0, stream_name_count) are complete and never change; the
   * release store of the count publishes a new one (readers take no lock). */
  stream_name stream_names[STREAM_NAME_SLOTS];
  _Atomic size_t stream_name_count;
  pthread_mutex_t stream_names_mutex; /* serialises writers only */
  bool subscribed; /* its listener is registered on the upstream's layers */
#endif
};

/* ARGB colours, as listed in the header. */
#define COLOR_ALLOCATE 0xFF43A047u
#define COLOR_DEALLOCATE 0xFF1E88E5u
#define COLOR_FAILURE 0xFFE53935u
#define COLOR_LIMIT 0xFFFB8C00u
#define COLOR_OOM_POLICY 0xFF8E24AAu
#define COLOR_BYTES_IN_USE 0xFF757575u

#ifndef GMR_DISABLE_NVTX

static void format_stream(char *buf, size_t size, const char *action, gmr_stream stream) {
  if (stream == NULL) {
    snprintf(buf, size, "%s (default stream)", action);
  } else {
    snprintf(buf, size, "%s (stream 0x%" PRIxPTR ")", action, (uintptr_t)stream);
  }
}

static void format_stream_only(char *buf, size_t size, gmr_stream stream) {
  if (stream == NULL) {
    snprintf(buf, size, "default stream");
  } else {
    snprintf(buf, size, "stream 0x%" PRIxPTR, (uintptr_t)stream);
  }
}

static void init_attributes(nvtxEventAttributes_t *attr, gmr_nvtx_category category,
                            uint32_t color) {
  /* Zeroed first: every field we do not set must read as "unused". */
  memset(attr, 0, sizeof *attr);
  attr->version = NVTX_VERSION;
  attr->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr->category = (uint32_t)category;
  attr->colorType = NVTX_COLOR_ARGB;
  attr->color = color;
}

static void set_message(nvtxEventAttributes_t *attr, nvtxStringHandle_t registered,
                        const char *text) {
  if (registered != NULL) {
    attr->messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attr->message.registered = registered;
  } else {
    attr->messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr->message.ascii = text;
  }
}

/* The registered names for `stream`, registering them on first sight; NULL
 * when all slots are taken (the caller then formats the name itself). */
static const stream_name *find_stream_name(gmr_nvtx_logging_adaptor *a, gmr_stream stream) {
  size_t count = atomic_load_explicit(&a->stream_name_count, memory_order_acquire);
  for (size_t i = 0; i < count; ++i) {
    if (a->stream_names[i].stream == stream) return &a->stream_names[i];
  }
  const stream_name *found = NULL;
  pthread_mutex_lock(&a->stream_names_mutex);
  count = atomic_load_explicit(&a->stream_name_count, memory_order_relaxed);
  for (size_t i = 0; i < count && found == NULL; ++i) {
    if (a->stream_names[i].stream == stream) found = &a->stream_names[i];
  }
  if (found == NULL && count < STREAM_NAME_SLOTS) {
    stream_name *n = &a->stream_names[count];
    n->stream = stream;
    format_stream(n->allocate_text, sizeof n->allocate_text, "allocate", stream);
    format_stream(n->deallocate_text, sizeof n->deallocate_text, "deallocate", stream);
    n->allocate = nvtxDomainRegisterStringA(a->domain, n->allocate_text);
    n->deallocate = nvtxDomainRegisterStringA(a->domain, n->deallocate_text);
    atomic_store_explicit(&a->stream_name_count, count + 1, memory_order_release);
    found = n;
  }
  pthread_mutex_unlock(&a->stream_names_mutex);
  return found;
}

static void push_range(gmr_nvtx_logging_adaptor *a, bool allocate, size_t bytes,
                       gmr_stream stream) {
  nvtxEventAttributes_t attr;
  init_attributes(&attr, allocate ? GMR_NVTX_CATEGORY_ALLOCATE : GMR_NVTX_CATEGORY_DEALLOCATE,
                  allocate ? COLOR_ALLOCATE : COLOR_DEALLOCATE);
  attr.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  attr.payload.ullValue = (uint64_t)bytes;
  const stream_name *n = find_stream_name(a, stream);
  char text[STREAM_TEXT_BYTES];
  if (n != NULL) {
    set_message(&attr, allocate ? n->allocate : n->deallocate,
                allocate ? n->allocate_text : n->deallocate_text);
  } else {
    format_stream(text, sizeof text, allocate ? "allocate" : "deallocate", stream);
    set_message(&attr, NULL, text);
  }
  nvtxDomainRangePushEx(a->domain, &attr);
}

/* A mark with an ASCII message formatted by the caller (failures and policy
 * actions are rare, so formatting them costs nothing that matters). */
static void mark(gmr_nvtx_logging_adaptor *a, gmr_nvtx_category category, uint32_t color,
                 uint64_t bytes, const char *text) {
  nvtxEventAttributes_t attr;
  init_attributes(&attr, category, color);
  attr.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  attr.payload.ullValue = bytes;
  set_message(&attr, NULL, text);
  nvtxDomainMarkEx(a->domain, &attr);
}

static void sample_bytes_in_use(gmr_nvtx_logging_adaptor *a, int64_t value) {
  if (a->counter_id != NVTX_COUNTER_ID_NONE) {
    nvtxCounterSampleInt64(a->domain, a->counter_id, value);
    return;
  }
  /* Fallback for tools without the counters extension: the value as a mark. */
  nvtxEventAttributes_t attr;
  init_attributes(&attr, GMR_NVTX_CATEGORY_BYTES_IN_USE, COLOR_BYTES_IN_USE);
  attr.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  attr.payload.llValue = value;
  set_message(&attr, a->bytes_in_use_text, "bytes in use");
  nvtxDomainMarkEx(a->domain, &attr);
}

static void mark_allocate_failure(gmr_nvtx_logging_adaptor *a, gmr_status status, size_t bytes,
                                  gmr_stream stream, const gmr_failure *failure) {
  char where[STREAM_TEXT_BYTES];
  format_stream_only(where, sizeof where, stream);
  char text[GMR_FAILURE_MESSAGE_BYTES + 192];
  bool limit = status == GMR_ERR_LIMIT_EXCEEDED;
  int n =
      snprintf(text, sizeof text, "%s: %s (%zu bytes, %s; in %s",
               limit ? "allocate refused by a limit" : "allocate failed", gmr_status_name(status),
               bytes, where, gmr_resource_get_type_name(failure->where));
  if (n > 0 && (size_t)n < sizeof text && failure->cuda_error != 0) {
    n += snprintf(text + n, sizeof text - (size_t)n, "; cuda error %d", failure->cuda_error);
  }
  if (n > 0 && (size_t)n < sizeof text && failure->message[0] != '\0') {
    n += snprintf(text + n, sizeof text - (size_t)n, ": %s", failure->message);
  }
  if (n > 0 && (size_t)n < sizeof text) snprintf(text + n, sizeof text - (size_t)n, ")");
  mark(a, limit ? GMR_NVTX_CATEGORY_LIMIT : GMR_NVTX_CATEGORY_FAILURE,
       limit ? COLOR_LIMIT : COLOR_FAILURE, (uint64_t)bytes, text);
}

/* ---- policy events (gmr/events.h) ---------------------------------------- */

/* The allocations this thread is inside, innermost first: a listener marking
 * a limit refusal tells the adaptor's call, which then does not mark the
 * same refusal again from its status. */
typedef struct call_frame {
  const gmr_nvtx_logging_adaptor *adaptor;
  struct call_frame *outer;
  bool refusal_marked;
} call_frame;

static _Thread_local call_frame *current_call;

static void mark_event(gmr_nvtx_logging_adaptor *a, const gmr_event *e) {
  char where[STREAM_TEXT_BYTES];
  format_stream_only(where, sizeof where, e->stream);
  const char *policy = e->policy_name != NULL ? e->policy_name : "?";
  const char *in = gmr_resource_get_type_name(e->source);
  const char *scope = e->scope_stream ? "stream limit" : "limit";
  char text[320];
  bool limit = true;
  switch (e->kind) {
    case GMR_EVENT_LIMIT_REFUSED:
      snprintf(text, sizeof text,
               "%s refused (policy %s): %zu bytes charged, %zu of %zu bytes used (%s; in %s)",
               scope, policy, e->bytes, e->used_bytes, e->limit_bytes, where, in);
      break;
    case GMR_EVENT_LIMIT_RAISED:
      snprintf(text, sizeof text,
               "%s raised (policy %s): %zu -> %zu bytes for %zu bytes charged (%s; in %s)", scope,
               policy, e->limit_bytes, e->value_bytes, e->bytes, where, in);
      break;
    case GMR_EVENT_LIMIT_OVERAGE:
      snprintf(text, sizeof text,
               "%s passed (policy %s): %zu bytes over %zu after %zu bytes charged (%s; in %s)",
               scope, policy, e->value_bytes, e->limit_bytes, e->bytes, where, in);
      break;
    case GMR_EVENT_OOM_RETRY:
      limit = false;
      snprintf(text, sizeof text, "oom policy %s: retry %u after %s (%zu bytes, %s; in %s)",
               policy, (unsigned)e->attempt, gmr_status_name(e->status), e->bytes, where, in);
      break;
    case GMR_EVENT_OOM_TRIM:
      limit = false;
      snprintf(text, sizeof text, "oom policy %s: trim released %zu bytes, %s (%zu bytes, %s; in %s)",
               policy, e->value_bytes, gmr_status_name(e->status), e->bytes, where, in);
      break;
    case GMR_EVENT_OOM_WAIT:
      limit = false;
      snprintf(text, sizeof text,
               "oom policy %s: waited %" PRIu64 " ns, %s (%zu bytes, %s; in %s)", policy,
               e->duration_ns, e->value_bytes != 0 ? "a free came" : "timed out", e->bytes, where,
               in);
      break;
    case GMR_EVENT_OOM_GAVE_UP:
      limit = false;
      snprintf(text, sizeof text, "oom policy %s: gave up after %u retries: %s (%zu bytes, %s; in %s)",
               policy, (unsigned)e->attempt, gmr_status_name(e->status), e->bytes, where, in);
      break;
    default: /* a kind added later: still shown */
      limit = false;
      snprintf(text, sizeof text, "%s (policy %s; %zu bytes, %s; in %s)",
               gmr_event_kind_name(e->kind), policy, e->bytes, where, in);
      break;
  }
  mark(a, limit ? GMR_NVTX_CATEGORY_LIMIT : GMR_NVTX_CATEGORY_OOM_POLICY,
       limit ? COLOR_LIMIT : COLOR_OOM_POLICY, (uint64_t)e->bytes, text);
  if (e->kind == GMR_EVENT_LIMIT_REFUSED) {
    for (call_frame *f = current_call; f != NULL; f = f->outer) {
      if (f->adaptor == a) {
        f->refusal_marked = true;
        break;
      }
    }
  }
}

/* The listener each adaptor with a tool attached registers on its
 * upstream: only the layers below it report to it. */
static void on_event(void *ctx, const gmr_event *e) {
  gmr_nvtx_logging_adaptor *a = ctx;
  if (atomic_load_explicit(&a->enabled, memory_order_relaxed)) mark_event(a, e);
}

static gmr_status subscribe(gmr_nvtx_logging_adaptor *a) {
  gmr_status st = gmr_resource_add_event_listener(a->base.upstream, on_event, a);
  a->subscribed = st == GMR_OK;
  return st;
}

static void unsubscribe(gmr_nvtx_logging_adaptor *a) {
  if (!a->subscribed) return;
  GMR_IGNORE_STATUS(gmr_resource_remove_event_listener(a->base.upstream, on_event, a));
  a->subscribed = false;
}

#endif /* GMR_DISABLE_NVTX */

/* An allocation through `forward`: the upstream's allocate, or its
 * allocate_capturing for a request made during a capture. */
static gmr_status nvtx_allocate_as(gmr_nvtx_logging_adaptor *a, gmr__forward_allocate_fn *forward,
                                   size_t bytes, size_t alignment, gmr_stream stream,
                                   void **out_ptr, gmr_failure *failure) {
  gmr_resource *up = a->base.upstream;
#ifdef GMR_DISABLE_NVTX
  return forward(up, bytes, alignment, stream, out_ptr, failure);
#else
  /* No tool: NVTX would ignore every call; make none. The dispatch above
   * checked the arguments, so the request goes straight to the upstream's
   * slot (core/forward.h): one load and one branch added. */
  if (a->domain == NULL) return forward(up, bytes, alignment, stream, out_ptr, failure);
  bool on = atomic_load_explicit(&a->enabled, memory_order_relaxed);
  call_frame frame = {a, current_call, false};
  if (on) {
    push_range(a, true, bytes, stream);
    current_call = &frame;
  }
  gmr_status st = forward(up, bytes, alignment, stream, out_ptr, failure);
  if (on) current_call = frame.outer;
  if (st == GMR_OK) {
    int64_t now = atomic_fetch_add_explicit(&a->bytes_in_use, (int64_t)bytes,
                                            memory_order_relaxed) + (int64_t)bytes;
    if (on) sample_bytes_in_use(a, now);
  } else if (on && !(st == GMR_ERR_LIMIT_EXCEEDED && frame.refusal_marked)) {
    /* A refusal already marked from its event is not marked twice. */
    mark_allocate_failure(a, st, bytes, stream, failure);
  }
  if (on) nvtxDomainRangePop(a->domain);
  return st;
#endif
}

static gmr_status nvtx_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return nvtx_allocate_as((gmr_nvtx_logging_adaptor *)self, gmr__forward_allocate, bytes,
                          alignment, stream, out_ptr, failure);
}

/* A request for a capture gets the same range as an allocation. */
static gmr_status nvtx_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                          gmr_stream stream, void **out_ptr,
                                          gmr_failure *failure) {
  return nvtx_allocate_as((gmr_nvtx_logging_adaptor *)self, gmr__forward_allocate_capturing,
                          bytes, alignment, stream, out_ptr, failure);
}

#ifndef GMR_DISABLE_NVTX
/* A range around a growth in place, in the allocate category, with the bytes
 * added as payload. Growth is rare (a pool enlarging a chunk), so its name is
 * formatted per call rather than registered per stream. */
static void push_extend_range(gmr_nvtx_logging_adaptor *a, size_t added_bytes,
                              gmr_stream stream) {
  nvtxEventAttributes_t attr;
  init_attributes(&attr, GMR_NVTX_CATEGORY_ALLOCATE, COLOR_ALLOCATE);
  attr.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  attr.payload.ullValue = (uint64_t)added_bytes;
  char text[STREAM_TEXT_BYTES];
  format_stream(text, sizeof text, "extend", stream);
  set_message(&attr, NULL, text);
  nvtxDomainRangePushEx(a->domain, &attr);
}

static void mark_extend_failure(gmr_nvtx_logging_adaptor *a, gmr_status status, void *ptr,
                                size_t bytes, size_t new_bytes, gmr_stream stream,
                                const gmr_failure *failure) {
  char where[STREAM_TEXT_BYTES];
  format_stream_only(where, sizeof where, stream);
  char text[GMR_FAILURE_MESSAGE_BYTES + 192];
  int n = snprintf(text, sizeof text,
                   "extend failed: %s (0x%" PRIxPTR " from %zu to %zu bytes, %s; in %s",
                   gmr_status_name(status), (uintptr_t)ptr, bytes, new_bytes, where,
                   gmr_resource_get_type_name(failure->where));
  if (n > 0 && (size_t)n < sizeof text && failure->message[0] != '\0') {
    n += snprintf(text + n, sizeof text - (size_t)n, ": %s", failure->message);
  }
  if (n > 0 && (size_t)n < sizeof text) snprintf(text + n, sizeof text - (size_t)n, ")");
  mark(a, GMR_NVTX_CATEGORY_FAILURE, COLOR_FAILURE, (uint64_t)(new_bytes - bytes), text);
}
#endif

/* The bytes added count as handed out, like an allocation's. A failed
 * growth changed nothing: a mark, and the counter stays. */
static gmr_status nvtx_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                              size_t alignment, gmr_stream stream, gmr_failure *failure) {
#ifdef GMR_DISABLE_NVTX
  return gmr__adaptor_extend(self, ptr, bytes, new_bytes, alignment, stream, failure);
#else
  gmr_nvtx_logging_adaptor *a = (gmr_nvtx_logging_adaptor *)self;
  if (a->domain == NULL) {
    return gmr__adaptor_extend(self, ptr, bytes, new_bytes, alignment, stream, failure);
  }
  bool on = atomic_load_explicit(&a->enabled, memory_order_relaxed);
  size_t added = new_bytes - bytes;
  if (on) push_extend_range(a, added, stream);
  gmr_status st =
      gmr__forward_extend(a->base.upstream, ptr, bytes, new_bytes, alignment, stream, failure);
  if (st == GMR_OK) {
    int64_t now = atomic_fetch_add_explicit(&a->bytes_in_use, (int64_t)added,
                                            memory_order_relaxed) + (int64_t)added;
    if (on) sample_bytes_in_use(a, now);
  } else if (on) {
    mark_extend_failure(a, st, ptr, bytes, new_bytes, stream, failure);
  }
  if (on) nvtxDomainRangePop(a->domain);
  return st;
#endif
}

static gmr_status nvtx_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  gmr_nvtx_logging_adaptor *a = (gmr_nvtx_logging_adaptor *)self;
  gmr_resource *up = a->base.upstream;
#ifdef GMR_DISABLE_NVTX
  return gmr__forward_deallocate(up, ptr, bytes, alignment, stream);
#else
  if (a->domain == NULL) return gmr__forward_deallocate(up, ptr, bytes, alignment, stream);
  bool on = atomic_load_explicit(&a->enabled, memory_order_relaxed);
  if (on) push_range(a, false, bytes, stream);
  gmr_status st = gmr__forward_deallocate(up, ptr, bytes, alignment, stream);
  if (st == GMR_OK) {
    /* After the release: a refused free must not move the count. */
    int64_t now = atomic_fetch_sub_explicit(&a->bytes_in_use, (int64_t)bytes,
                                            memory_order_relaxed) - (int64_t)bytes;
    if (on) sample_bytes_in_use(a, now);
  } else if (on) {
    char where[STREAM_TEXT_BYTES];
    format_stream_only(where, sizeof where, stream);
    char text[160];
    snprintf(text, sizeof text, "deallocate refused: %s (%zu bytes at 0x%" PRIxPTR ", %s)",
             gmr_status_name(st), bytes, (uintptr_t)ptr, where);
    mark(a, GMR_NVTX_CATEGORY_FAILURE, COLOR_FAILURE, (uint64_t)bytes, text);
  }
  if (on) nvtxDomainRangePop(a->domain);
  return st;
#endif
}

static gmr_status nvtx_destroy(gmr_resource *self) {
  gmr_nvtx_logging_adaptor *a = (gmr_nvtx_logging_adaptor *)self;
#ifndef GMR_DISABLE_NVTX
  unsubscribe(a); /* when it returns, no listener uses `a` any more */
  pthread_mutex_destroy(&a->stream_names_mutex);
#endif
  free(a);
  return GMR_OK;
}

static const gmr_resource_vtbl nvtx_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "nvtx_logging_adaptor",
    .allocate = nvtx_allocate,
    .deallocate = nvtx_deallocate,
    .destroy = nvtx_destroy,
    .get_upstream = gmr__adaptor_get_upstream,
    .record_stream = gmr__adaptor_record_stream,
    .allocate_capturing = nvtx_allocate_capturing,
    .extend = nvtx_extend,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type nvtx_type = {&nvtx_vtbl, NULL};

#ifndef GMR_DISABLE_NVTX
/* NVTX starts its counters extension lazily at the first counter call, and
 * that start is not safe to race (see core/nvtx_mem.c): adaptors created in
 * several threads at once register one at a time. Create is rare. */
static pthread_mutex_t register_mutex = PTHREAD_MUTEX_INITIALIZER;

/* With a tool attached: names, strings and the counter, once. */
static void register_with_tool(gmr_nvtx_logging_adaptor *a) {
  static const char *const category_names[] = {NULL,    "allocate",   "deallocate",  "failure",
                                               "limit", "oom policy", "bytes in use"};
  for (uint32_t c = GMR_NVTX_CATEGORY_ALLOCATE; c <= GMR_NVTX_CATEGORY_BYTES_IN_USE; ++c) {
    nvtxDomainNameCategoryA(a->domain, c, category_names[c]);
  }
  a->bytes_in_use_text = nvtxDomainRegisterStringA(a->domain, "bytes in use");

  nvtxSemanticsCounter_t semantics;
  memset(&semantics, 0, sizeof semantics);
  semantics.header.structSize = (uint32_t)sizeof semantics;
  semantics.header.semanticId = NVTX_SEMANTIC_ID_COUNTERS_V1;
  semantics.header.version = NVTX_COUNTER_SEMANTIC_VERSION;
  /* An absolute value that holds until the next sample. */
  semantics.flags = NVTX_COUNTER_FLAG_VALUETYPE_ABSOLUTE | NVTX_COUNTER_FLAG_INTERPOLATION_UNTIL_NEXT;
  semantics.unit = "bytes";
  semantics.unitScaleNumerator = 1;
  semantics.unitScaleDenominator = 1;
  semantics.limitType = NVTX_COUNTER_LIMIT_UNDEFINED;

  nvtxCounterAttr_t attr;
  memset(&attr, 0, sizeof attr);
  attr.structSize = sizeof attr;
  attr.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_INT64;
  attr.name = "bytes in use";
  attr.description = "bytes handed out through this gmr nvtx_logging_adaptor and not yet freed";
  attr.scopeId = NVTX_SCOPE_CURRENT_SW_PROCESS;
  attr.semantics = &semantics.header;
  attr.counterId = NVTX_COUNTER_ID_NONE; /* the tool picks the id */
  a->counter_id = nvtxCounterRegister(a->domain, &attr);
}
#endif

gmr_status gmr_nvtx_logging_adaptor_create(gmr_resource *upstream,
                                           const gmr_nvtx_logging_adaptor_config *config,
                                           gmr_nvtx_logging_adaptor **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (gmr__resource_check_vtbl(upstream) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  gmr_nvtx_logging_adaptor_config cfg = GMR_NVTX_LOGGING_ADAPTOR_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  const char *name = cfg.domain_name != NULL ? cfg.domain_name : "gmr";
  size_t name_bytes = strlen(name);
  if (name_bytes == 0 || name_bytes > GMR_NVTX_DOMAIN_NAME_MAX_BYTES) {
    return GMR_ERR_INVALID_ARGUMENT;
  }

  gmr_nvtx_logging_adaptor *a = calloc(1, sizeof *a);
  if (a == NULL) return GMR_ERR_OUT_OF_MEMORY;
  gmr__adaptor_init(&a->base, &nvtx_vtbl, upstream);
  gmr__resource_type_register(&nvtx_type);
  atomic_init(&a->enabled, cfg.enabled);
  memcpy(a->domain_name, name, name_bytes + 1);
#ifndef GMR_DISABLE_NVTX
  if (pthread_mutex_init(&a->stream_names_mutex, NULL) != 0) {
    free(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr__nvtx_start();
  /* NULL with no tool attached: not an error, the adaptor then stays silent. */
  a->domain = nvtxDomainCreateA(a->domain_name);
  if (a->domain != NULL) {
    /* Policy events only matter with a tool: without one the adaptor does
     * not subscribe, so the stack's adaptors build no events for it. */
    gmr_status st = subscribe(a);
    if (st != GMR_OK) {
      pthread_mutex_destroy(&a->stream_names_mutex);
      free(a);
      return st;
    }
    pthread_mutex_lock(&register_mutex);
    register_with_tool(a);
    pthread_mutex_unlock(&register_mutex);
  }
#endif
  *out = a;
  return GMR_OK;
}

void gmr_nvtx_logging_adaptor_set_enabled(gmr_nvtx_logging_adaptor *a, bool enabled) {
  if (a == NULL) return;
  atomic_store_explicit(&a->enabled, enabled, memory_order_relaxed);
}

bool gmr_nvtx_logging_adaptor_is_enabled(const gmr_nvtx_logging_adaptor *a) {
#ifdef GMR_DISABLE_NVTX
  (void)a;
  return false;
#else
  return a != NULL && atomic_load_explicit(&a->enabled, memory_order_relaxed);
#endif
}

bool gmr_nvtx_logging_adaptor_is_tool_attached(const gmr_nvtx_logging_adaptor *a) {
#ifdef GMR_DISABLE_NVTX
  (void)a;
  return false;
#else
  return a != NULL && a->domain != NULL;
#endif
}

const char *gmr_nvtx_logging_adaptor_get_domain_name(const gmr_nvtx_logging_adaptor *a) {
  return a == NULL ? NULL : a->domain_name;
}

bool gmr_nvtx_is_compiled_in(void) {
#ifdef GMR_DISABLE_NVTX
  return false;
#else
  return true;
#endif
}
