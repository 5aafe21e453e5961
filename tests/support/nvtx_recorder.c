/*
 * tests/support/nvtx_recorder.c: an NVTX injection library that records every
 * NVTX call as one line of text, so tests can check exactly what gmr emits
 * without a profiler.
 *
 * Built as libnvtx_recorder.so. A test sets NVTX_INJECTION64_PATH to its path
 * (Bazel `env`); NVTX loads it at the process's first NVTX call and calls
 * InitializeInjectionNvtx2 (core and domain API), then, at the first call of
 * each extension, InitializeInjectionNvtxExtension (memory: module 1,
 * counters: module 4) (nvtxDetail/nvtxInit.h, nvtxDetail/nvtxExtInit.h).
 * Each entry point fills NVTX's function table with a recording function.
 *
 * The test reads the lines through the exported gmr_nvtx_recorder_* functions
 * (tests/support/nvtx_recorder_client.h finds them with dlsym).
 *
 * Line formats (one per call; `D` is the domain's name):
 *   domain_create D
 *   register_string D "text"
 *   name_category D <id> <name>
 *   push D cat=<c> color=<argb hex|none> [u64=<n>|i64=<n>] msg=@"registered"|"ascii"
 *   pop D
 *   mark D ...as push...
 *   counter_register D "name" schema=<id> scope=<id> unit=<unit>
 *   counter D "name" <int64 value>
 *   heap_register D heap<k> base=0x<hex> size=<n> usage=sub_allocator type=virtual_address name="..."
 *   heap_reset D heap<k>       heap_unregister D heap<k>
 *   region_register D heap<k> 0x<hex> <n>
 *   region_unregister D 0x<hex>
 * A structure without the version/size NVTX requires records a line starting
 * with "BAD". Set GMR_NVTX_RECORDER_NO_COUNTERS=1 to act as a tool without
 * the counters extension (nvtxCounterRegister then returns 0).
 *
 * Thread-safe: yes (one mutex).
 */
#define _DEFAULT_SOURCE
#define NVTX_NO_IMPL /* a tool: declarations and types only */

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtMem.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>

#define RECORDER_API __attribute__((visibility("default")))

#define MAX_NAMED 1024
#define LINE_BYTES 512

typedef struct named {
  char text[LINE_BYTES];
} named;

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static char **lines;
static size_t line_count, line_capacity;

/* Handles given out: pointers into these tables, never freed. */
static named domains[MAX_NAMED];
static size_t domain_count;
static named strings[MAX_NAMED];
static size_t string_count;
static named counters[MAX_NAMED]; /* id = NVTX_COUNTER_ID_DYNAMIC_START + index */
static size_t counter_count;
static int heaps[MAX_NAMED]; /* heap handle = &heaps[k], heaps[k] == k + 1 */
static size_t heap_count;

/* Append one line; called with the mutex held. */
static void record_locked(const char *format, ...) {
  char buf[LINE_BYTES * 4];
  va_list args;
  va_start(args, format);
  vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (line_count == line_capacity) {
    size_t capacity = line_capacity == 0 ? 256 : line_capacity * 2;
    char **grown = realloc(lines, capacity * sizeof *grown);
    if (grown == NULL) abort();
    lines = grown;
    line_capacity = capacity;
  }
  lines[line_count] = strdup(buf);
  if (lines[line_count] == NULL) abort();
  line_count++;
}

static const char *domain_name(nvtxDomainHandle_t d) {
  if (d == NULL) return "(default)";
  for (size_t i = 0; i < domain_count; ++i) {
    if ((const void *)&domains[i] == (const void *)d) return domains[i].text;
  }
  return "(unknown-domain)";
}

static const char *string_text(nvtxStringHandle_t s) {
  for (size_t i = 0; i < string_count; ++i) {
    if ((const void *)&strings[i] == (const void *)s) return strings[i].text;
  }
  return NULL;
}

static int heap_id(nvtxMemHeapHandle_t h) {
  for (size_t i = 0; i < heap_count; ++i) {
    if ((const void *)&heaps[i] == (const void *)h) return heaps[i];
  }
  return 0;
}

/* ---- core and domain API ------------------------------------------------ */

static void describe_attributes(char *out, size_t size, const nvtxEventAttributes_t *a) {
  if (a == NULL) {
    snprintf(out, size, "BAD attributes=NULL");
    return;
  }
  if (a->version != NVTX_VERSION || a->size != NVTX_EVENT_ATTRIB_STRUCT_SIZE) {
    snprintf(out, size, "BAD attributes version=%u size=%u", (unsigned)a->version,
             (unsigned)a->size);
    return;
  }
  char color[16];
  if (a->colorType == NVTX_COLOR_ARGB) {
    snprintf(color, sizeof color, "%08" PRIx32, a->color);
  } else {
    snprintf(color, sizeof color, "none");
  }
  char payload[48] = "";
  if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) {
    snprintf(payload, sizeof payload, " u64=%" PRIu64, a->payload.ullValue);
  } else if (a->payloadType == NVTX_PAYLOAD_TYPE_INT64) {
    snprintf(payload, sizeof payload, " i64=%" PRId64, a->payload.llValue);
  } else if (a->payloadType != NVTX_PAYLOAD_UNKNOWN) {
    snprintf(payload, sizeof payload, " payload_type=%d", (int)a->payloadType);
  }
  char message[LINE_BYTES + 8];
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    const char *text = string_text(a->message.registered);
    if (text != NULL) {
      snprintf(message, sizeof message, "@\"%s\"", text);
    } else {
      snprintf(message, sizeof message, "@(unknown-string)");
    }
  } else if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) {
    snprintf(message, sizeof message, "\"%s\"", a->message.ascii ? a->message.ascii : "(null)");
  } else {
    snprintf(message, sizeof message, "(type %d)", (int)a->messageType);
  }
  snprintf(out, size, "cat=%" PRIu32 " color=%s%s msg=%s", a->category, color, payload, message);
}

static nvtxDomainHandle_t NVTX_API rec_domain_create(const char *name) {
  pthread_mutex_lock(&mutex);
  nvtxDomainHandle_t found = NULL;
  for (size_t i = 0; i < domain_count && found == NULL; ++i) {
    if (strcmp(domains[i].text, name) == 0) found = (nvtxDomainHandle_t)(void *)&domains[i];
  }
  if (found == NULL && domain_count < MAX_NAMED) {
    snprintf(domains[domain_count].text, LINE_BYTES, "%s", name);
    found = (nvtxDomainHandle_t)(void *)&domains[domain_count++];
  }
  record_locked("domain_create %s", name);
  pthread_mutex_unlock(&mutex);
  return found;
}

static void NVTX_API rec_domain_destroy(nvtxDomainHandle_t d) {
  pthread_mutex_lock(&mutex);
  record_locked("domain_destroy %s", domain_name(d));
  pthread_mutex_unlock(&mutex);
}

static nvtxStringHandle_t NVTX_API rec_register_string(nvtxDomainHandle_t d, const char *text) {
  pthread_mutex_lock(&mutex);
  nvtxStringHandle_t h = NULL;
  if (string_count < MAX_NAMED) {
    snprintf(strings[string_count].text, LINE_BYTES, "%s", text);
    h = (nvtxStringHandle_t)(void *)&strings[string_count++];
  }
  record_locked("register_string %s \"%s\"", domain_name(d), text);
  pthread_mutex_unlock(&mutex);
  return h;
}

static void NVTX_API rec_name_category(nvtxDomainHandle_t d, uint32_t category, const char *name) {
  pthread_mutex_lock(&mutex);
  record_locked("name_category %s %" PRIu32 " %s", domain_name(d), category, name);
  pthread_mutex_unlock(&mutex);
}

static void record_event(const char *kind, nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  pthread_mutex_lock(&mutex);
  char text[LINE_BYTES * 2];
  describe_attributes(text, sizeof text, a);
  record_locked("%s %s %s", kind, domain_name(d), text);
  pthread_mutex_unlock(&mutex);
}

static void NVTX_API rec_domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  record_event("mark", d, a);
}

static int NVTX_API rec_domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  record_event("push", d, a);
  return 0;
}

static int NVTX_API rec_domain_pop(nvtxDomainHandle_t d) {
  pthread_mutex_lock(&mutex);
  record_locked("pop %s", domain_name(d));
  pthread_mutex_unlock(&mutex);
  return 0;
}

static nvtxRangeId_t NVTX_API rec_domain_start(nvtxDomainHandle_t d,
                                              const nvtxEventAttributes_t *a) {
  record_event("start", d, a);
  return 1;
}

static void NVTX_API rec_domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  pthread_mutex_lock(&mutex);
  record_locked("end %s %" PRIu64, domain_name(d), (uint64_t)id);
  pthread_mutex_unlock(&mutex);
}

static void NVTX_API rec_mark_ex(const nvtxEventAttributes_t *a) { record_event("mark", NULL, a); }

static int NVTX_API rec_push_ex(const nvtxEventAttributes_t *a) {
  record_event("push", NULL, a);
  return 0;
}

static int NVTX_API rec_pop(void) { return rec_domain_pop(NULL); }

static int set_slot(NvtxGetExportTableFunc_t get_table, NvtxCallbackModule module,
                    unsigned int id, NvtxFunctionPointer fn) {
  const NvtxExportTableCallbacks *callbacks =
      (const NvtxExportTableCallbacks *)get_table(NVTX_ETID_CALLBACKS);
  if (callbacks == NULL || callbacks->struct_size < sizeof *callbacks) return 0;
  NvtxFunctionTable table = NULL;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(module, &table, &size) || table == NULL) return 0;
  if (id >= size || table[id] == NULL) return 0;
  *table[id] = fn;
  return 1;
}

#define FN(f) ((NvtxFunctionPointer)(f))

RECORDER_API int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  int ok = 1;
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA,
                 FN(rec_domain_create));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainDestroy,
                 FN(rec_domain_destroy));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringA,
                 FN(rec_register_string));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainNameCategoryA,
                 FN(rec_name_category));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainMarkEx,
                 FN(rec_domain_mark));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx,
                 FN(rec_domain_push));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop,
                 FN(rec_domain_pop));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeStartEx,
                 FN(rec_domain_start));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeEnd,
                 FN(rec_domain_end));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkEx, FN(rec_mark_ex));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, FN(rec_push_ex));
  ok &= set_slot(get_table, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, FN(rec_pop));
  return ok;
}

/* ---- memory extension (module NVTX_EXT_MODULEID_MEM) --------------------- */

static int bad_mem_header(uint16_t compat, uint16_t size, size_t expected) {
  return compat != NVTX_EXT_COMPATID_MEM || size != expected;
}

static nvtxMemHeapHandle_t NVTX_API rec_heap_register(nvtxDomainHandle_t d,
                                                      const nvtxMemHeapDesc_t *desc) {
  pthread_mutex_lock(&mutex);
  nvtxMemHeapHandle_t h = NULL;
  if (desc == NULL || bad_mem_header(desc->extCompatID, desc->structSize, sizeof *desc) ||
      desc->reserved0 != 0) {
    record_locked("BAD heap_register header");
  } else if (desc->type != NVTX_MEM_TYPE_VIRTUAL_ADDRESS || desc->typeSpecificDesc == NULL ||
             desc->typeSpecificDescSize != sizeof(nvtxMemVirtualRangeDesc_t)) {
    record_locked("BAD heap_register type=%u", (unsigned)desc->type);
  } else if (heap_count < MAX_NAMED) {
    const nvtxMemVirtualRangeDesc_t *range =
        (const nvtxMemVirtualRangeDesc_t *)desc->typeSpecificDesc;
    heaps[heap_count] = (int)heap_count + 1;
    h = (nvtxMemHeapHandle_t)(void *)&heaps[heap_count++];
    const char *name = desc->messageType == NVTX_MESSAGE_TYPE_ASCII ? desc->message.ascii : "";
    record_locked("heap_register %s heap%d base=0x%" PRIxPTR " size=%zu usage=%s "
                  "type=virtual_address name=\"%s\"",
                  domain_name(d), heap_id(h), (uintptr_t)range->ptr, range->size,
                  desc->usage == NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR ? "sub_allocator" : "other",
                  name ? name : "");
  }
  pthread_mutex_unlock(&mutex);
  return h;
}

static void NVTX_API rec_heap_unregister(nvtxDomainHandle_t d, nvtxMemHeapHandle_t h) {
  pthread_mutex_lock(&mutex);
  record_locked("heap_unregister %s heap%d", domain_name(d), heap_id(h));
  pthread_mutex_unlock(&mutex);
}

static void NVTX_API rec_heap_reset(nvtxDomainHandle_t d, nvtxMemHeapHandle_t h) {
  pthread_mutex_lock(&mutex);
  record_locked("heap_reset %s heap%d", domain_name(d), heap_id(h));
  pthread_mutex_unlock(&mutex);
}

static void NVTX_API rec_regions_register(nvtxDomainHandle_t d,
                                          const nvtxMemRegionsRegisterBatch_t *b) {
  pthread_mutex_lock(&mutex);
  if (b == NULL || bad_mem_header(b->extCompatID, b->structSize, sizeof *b) ||
      b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
      b->regionDescElementSize != sizeof(nvtxMemVirtualRangeDesc_t)) {
    record_locked("BAD region_register header");
  } else {
    const nvtxMemVirtualRangeDesc_t *r = (const nvtxMemVirtualRangeDesc_t *)b->regionDescElements;
    for (size_t i = 0; i < b->regionCount; ++i) {
      record_locked("region_register %s heap%d 0x%" PRIxPTR " %zu", domain_name(d),
                    heap_id(b->heap), (uintptr_t)r[i].ptr, r[i].size);
    }
  }
  pthread_mutex_unlock(&mutex);
}

static void NVTX_API rec_regions_unregister(nvtxDomainHandle_t d,
                                            const nvtxMemRegionsUnregisterBatch_t *b) {
  pthread_mutex_lock(&mutex);
  if (b == NULL || bad_mem_header(b->extCompatID, b->structSize, sizeof *b) ||
      b->refType != NVTX_MEM_REGION_REF_TYPE_POINTER ||
      b->refElementSize != sizeof(nvtxMemRegionRef_t)) {
    record_locked("BAD region_unregister header");
  } else {
    for (size_t i = 0; i < b->refCount; ++i) {
      record_locked("region_unregister %s 0x%" PRIxPTR, domain_name(d),
                    (uintptr_t)b->refElements[i].pointer);
    }
  }
  pthread_mutex_unlock(&mutex);
}

static void NVTX_API rec_regions_resize(nvtxDomainHandle_t d,
                                        const nvtxMemRegionsResizeBatch_t *b) {
  pthread_mutex_lock(&mutex);
  record_locked("region_resize %s count=%zu", domain_name(d), b ? b->regionDescCount : 0);
  pthread_mutex_unlock(&mutex);
}

/* ---- counters extension (module NVTX_EXT_COUNTERS_MODULEID) -------------- */

static const char *counter_name(uint64_t id) {
  if (id < NVTX_COUNTER_ID_DYNAMIC_START) return "(unknown-counter)";
  uint64_t index = id - NVTX_COUNTER_ID_DYNAMIC_START;
  return index < counter_count ? counters[index].text : "(unknown-counter)";
}

static uint64_t NVTX_API rec_counter_register(nvtxDomainHandle_t d, const nvtxCounterAttr_t *a) {
  pthread_mutex_lock(&mutex);
  uint64_t id = NVTX_COUNTER_ID_NONE;
  if (a == NULL || a->structSize != sizeof *a) {
    record_locked("BAD counter_register header");
  } else if (counter_count < MAX_NAMED) {
    const char *unit = "";
    const nvtxSemanticsHeader_t *s = a->semantics;
    if (s != NULL && s->semanticId == NVTX_SEMANTIC_ID_COUNTERS_V1 &&
        s->structSize == sizeof(nvtxSemanticsCounter_t)) {
      unit = ((const nvtxSemanticsCounter_t *)(const void *)s)->unit;
    }
    snprintf(counters[counter_count].text, LINE_BYTES, "%s", a->name ? a->name : "");
    id = NVTX_COUNTER_ID_DYNAMIC_START + counter_count++;
    record_locked("counter_register %s \"%s\" schema=%" PRIu64 " scope=%" PRIu64 " unit=%s",
                  domain_name(d), a->name ? a->name : "", a->schemaId, a->scopeId,
                  unit ? unit : "");
  }
  pthread_mutex_unlock(&mutex);
  return id;
}

static void NVTX_API rec_counter_sample_int64(nvtxDomainHandle_t d, uint64_t id, int64_t value) {
  pthread_mutex_lock(&mutex);
  record_locked("counter %s \"%s\" %" PRId64, domain_name(d), counter_name(id), value);
  pthread_mutex_unlock(&mutex);
}

static void NVTX_API rec_counter_sample_float64(nvtxDomainHandle_t d, uint64_t id, double value) {
  pthread_mutex_lock(&mutex);
  record_locked("counter %s \"%s\" %g", domain_name(d), counter_name(id), value);
  pthread_mutex_unlock(&mutex);
}

RECORDER_API int NVTX_API InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info) {
  if (info == NULL || info->segmentsCount < 1 || info->segments == NULL) return 0;
  intptr_t *slots = info->segments[0].functionSlots;
  size_t slot_count = info->segments[0].slotCount;
#define SET(cbid, fn)                                  \
  do {                                                 \
    if ((size_t)(cbid) < slot_count) slots[cbid] = (intptr_t)(fn); \
  } while (0)
  if (info->moduleId == NVTX_EXT_MODULEID_MEM) {
    SET(NVTX3EXT_CBID_nvtxMemHeapRegister, rec_heap_register);
    SET(NVTX3EXT_CBID_nvtxMemHeapUnregister, rec_heap_unregister);
    SET(NVTX3EXT_CBID_nvtxMemHeapReset, rec_heap_reset);
    SET(NVTX3EXT_CBID_nvtxMemRegionsRegister, rec_regions_register);
    SET(NVTX3EXT_CBID_nvtxMemRegionsResize, rec_regions_resize);
    SET(NVTX3EXT_CBID_nvtxMemRegionsUnregister, rec_regions_unregister);
  } else if (info->moduleId == NVTX_EXT_COUNTERS_MODULEID) {
    const char *off = getenv("GMR_NVTX_RECORDER_NO_COUNTERS");
    if (off == NULL || strcmp(off, "1") != 0) {
      SET(NVTX3EXT_CBID_nvtxCounterRegister, rec_counter_register);
      SET(NVTX3EXT_CBID_nvtxCounterSampleInt64, rec_counter_sample_int64);
      SET(NVTX3EXT_CBID_nvtxCounterSampleFloat64, rec_counter_sample_float64);
    }
  }
#undef SET
  /* Slots left untouched become no-ops: the extension counts as absent. */
  return 1;
}

/* ---- what the tests call (through dlsym) ---------------------------------- */

RECORDER_API size_t gmr_nvtx_recorder_count(void) {
  pthread_mutex_lock(&mutex);
  size_t n = line_count;
  pthread_mutex_unlock(&mutex);
  return n;
}

/* Copy line `index` into buf (NUL-terminated, truncated to size). Returns its
 * full length, or (size_t)-1 past the end. */
RECORDER_API size_t gmr_nvtx_recorder_line(size_t index, char *buf, size_t size) {
  pthread_mutex_lock(&mutex);
  size_t n = (size_t)-1;
  if (index < line_count) {
    n = strlen(lines[index]);
    if (size > 0) snprintf(buf, size, "%s", lines[index]);
  }
  pthread_mutex_unlock(&mutex);
  return n;
}

RECORDER_API void gmr_nvtx_recorder_clear(void) {
  pthread_mutex_lock(&mutex);
  for (size_t i = 0; i < line_count; ++i) free(lines[i]);
  line_count = 0;
  pthread_mutex_unlock(&mutex);
}
