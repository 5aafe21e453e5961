/*
 * core/extension.h (internal): libgmr's extension interface, version
 * GMR_EXTENSION_VERSION: what gmr's optional libraries (libgmr_tiers,
 * libgmr_scoped, libgmr_nccl) may call in libgmr beyond its public API.
 *
 * libgmr is compiled with -fvisibility=hidden: libgmr.so exports the public
 * functions (GMR_API, version node GMR_PUBLIC) and the functions declared
 * GMR_EXTENSION_API (version node GMR_EXTENSION_<version>), nothing else.
 * The set, by what it is for (each declaration is in the header named):
 *
 *   failure records      core/failure.h     gmr__failure_set (the rest is inline)
 *   statistics copy-out  core/stats.h       inline only: nothing exported
 *   the CUDA layer       core/cuda_layer.h  gmr__cuda, gmr__cuda_device_enter,
 *                                           gmr__cuda_device_leave,
 *                                           gmr__cuda_device_enter_failed_call,
 *                                           gmr__cuda_stream_is_capturing,
 *                                           gmr__status_from_cuda, gmr__cuda_fail
 *                        core/cuda_vmm.h    gmr__cu_fail, gmr__vmm_prop_for_nccl,
 *                                           gmr__vmm_create_or_drop_fabric
 *   types                core/resource_type.h  gmr__resource_type_register,
 *                                           gmr__resource_check_vtbl
 *   components           stack/registry.h   gmr__extension_register (with the
 *                                           component table types), and the helpers
 *                                           for option values a component needs:
 *                                           gmr__options_apply, gmr__describe_bool,
 *                                           gmr__parse_peer_list
 *                        stack/value.h      gmr__format_size_value
 *   limits               adaptors/oom_internal.h  gmr__limiting_with_oom_create (a
 *                                           memory space's limiting layer with its
 *                                           OOM policy, as the spec's on_oom builds)
 *
 * The headers also declare functions libgmr keeps to itself (not marked).
 * The optional libraries link their own copy of util/ (hash maps, books,
 * key slots, the clock): it holds no state that must be shared, so it is
 * not part of the interface.
 *
 * Versioning: GMR_EXTENSION_VERSION goes up whenever something in the set
 * changes in a way a library built against the previous version would
 * notice (a struct's layout, a signature, a meaning); additions bump it too.
 * The version node follows it, so a libgmr_nccl.so built for another version
 * does not load at all (the loader names the missing node), and
 * gmr__extension_register() refuses a registration that states another
 * version (statically linked archives of two builds), with a message that
 * names both. These headers are not installed: the optional libraries are
 * built from the tree libgmr is built from, and nothing outside gmr builds
 * against them, so the version protects gmr's own libraries from being
 * mixed across releases rather than promising an interface to others.
 *
 * Thread-safe: not applicable (macros only).
 */
#ifndef GMR_CORE_EXTENSION_H_
#define GMR_CORE_EXTENSION_H_

/* Changes with every change of the set above (and names its version node). */
#define GMR_EXTENSION_VERSION 2u

/* Marks a function of the extension interface: exported from libgmr.so
 * under the version node GMR_EXTENSION_<GMR_EXTENSION_VERSION>. */
#if defined(__GNUC__)
#define GMR_EXTENSION_API __attribute__((visibility("default")))
#else
#define GMR_EXTENSION_API
#endif

#endif /* GMR_CORE_EXTENSION_H_ */
