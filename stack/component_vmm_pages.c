/*
 * stack/component_vmm_pages.c: `vmm_pages` in specs
 * (gmr/vmm_pages_resource.h): VPMM's page placement, every request whole
 * pages and free pages double-mapped where a request goes instead of
 * holding more. Its common options are component_vmm_common.h's.
 */
#include "gmr/vmm_pages_resource.h"
#include "stack/component_vmm_common.h"
#include "stack/registry.h"

enum { SMALL_POOL = GMR__VMM_COMMON_OPTIONS, OPTION_COUNT };

/* The ranges are gmr_vmm_pages_resource_create's (gmr/vmm_pages_resource.h). */
static const gmr__option_def options[OPTION_COUNT] = {
    GMR__VMM_COMMON_OPTION_DEFS,
    [SMALL_POOL] = {GMR__FIELD(gmr_vmm_pool_resource_config, small_pool),
                    .name = "small_pool",
                    .type = GMR__OPTION_BOOL,
                    .help = "requests below a page from the small path (256-byte rounding) "
                            "instead of a page each"},
};

static gmr_status create(const gmr__option_value *v, gmr_resource *upstream, gmr_resource **out,
                         char *message, size_t message_bytes) {
  (void)upstream;
  *out = NULL;
  gmr_vmm_pool_resource_config config = gmr__vmm_config_default;
  gmr__options_apply(options, OPTION_COUNT, v, &config);
  gmr_status st = gmr__vmm_apply_common(v, &config, message, message_bytes);
  if (st != GMR_OK) return st;
  return gmr__vmm_create_from(gmr_vmm_pages_resource_create, &config, out, message,
                              message_bytes);
}

const gmr__component gmr__component_vmm_pages = {
    .name = "vmm_pages",
    .kind = GMR__COMPONENT_RESOURCE,
    .help = "VPMM's page placement over CUDA virtual memory: every request whole pages (below "
            "one, the small path), free pages double-mapped where a request goes instead of "
            "holding more, in-place growth, sleep/wake (gmr/vmm_pages_resource.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .config_default = &gmr__vmm_config_default,
    .describe_default = gmr__vmm_describe_common,
    .former_names = gmr__vmm_former_names,
};
