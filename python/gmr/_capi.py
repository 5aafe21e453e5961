"""The C API as ctypes sees it: the struct mirrors and one prototype table.

Every ctypes.Structure that mirrors a C struct of gmr's headers is defined in
gmr._structs and re-exported here (MIRRORS maps each to its C name;
python/tests/layout_test.py checks every one against the compiler's layout),
beside every ctypes prototype gmr's Python modules call (PROTOTYPES; declare()
applies them when _lib loads a library). A module that needs a struct or a
function takes it from here, so a C change is mirrored in one place.
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Tuple

from gmr._structs import *  # noqa: F401,F403 (the mirrors and their constants, re-exported)

__all__ = [
    "FailureStruct", "SpecErrorStruct", "FootprintStruct", "PoolBlockInfo", "VmmPoolRegion",
    "TorchCounters", "TorchDeviceStats", "TorchGraphPoolInfo", "TorchHistoryEntry",
    "TORCH_CONTEXT_FN", "ScopeRegistryConfig", "ScopeStruct", "ScopedPoolStats",
    "ScopeRegistryStats", "MemorySpaceId", "LimitPolicy", "OomPolicy", "MemorySpaceConfig",
    "ReservationStrategy", "TierManagerStats", "MemorySpaceStats", "ReservationInfo",
    "VmmSleepOptions", "VmmWakeOptions", "VmmTagStats", "VmmPoolStats", "VmmRangeInfo", "MIRRORS",
    "PROTOTYPES", "LIBRARIES",
    "declare",
]


# The libraries the table names: libgmr.so, the torch shim and the optional ones.
GMR = "gmr"
TORCH = "torch"
TIERS = "tiers"    # libgmr_tiers.so (optional library)
SCOPED = "scoped"  # libgmr_scoped.so (optional library)
NCCL = "nccl"      # libgmr_nccl.so (optional library: NCCL's stack spec components)
LIBRARIES = (GMR, TORCH, TIERS, SCOPED, NCCL)

_c = ctypes
_vp, _sz, _i, _u64, _b = _c.c_void_p, _c.c_size_t, _c.c_int, _c.c_uint64, _c.c_bool
_str = _c.c_char_p
_P = _c.POINTER
_fp = _P(FailureStruct)
_ep = _P(SpecErrorStruct)

Prototype = Tuple[str, Any, List[Any]]

# Every C function the package calls: name -> (library, restype, argtypes).
PROTOTYPES: Dict[str, Prototype] = {
    # gmr/version.h, gmr/status.h, gmr/device.h
    "gmr_version": (GMR, _i, []),
    "gmr_status_name": (GMR, _str, [_i]),
    "gmr_status_string": (GMR, _str, [_i]),
    "gmr_cuda_is_simulated": (GMR, _b, []),
    "gmr_device_get_count": (GMR, _i, [_P(_i)]),
    "gmr_device_get_memory_info": (GMR, _i, [_P(_sz), _P(_sz)]),
    # gmr/stack.h, gmr/device_resource.h
    "gmr_stack_check": (GMR, _i, [_str, _ep]),
    "gmr_device_resource_set_spec": (GMR, _i, [_str, _ep]),
    "gmr_device_resource_get": (GMR, _i, [_i, _P(_vp), _ep]),
    "gmr_device_resource_get_spec": (GMR, _str, [_i]),
    "gmr_device_resource_release_all": (GMR, _i, []),
    # gmr/resource.h
    "gmr_resource_allocate_ex": (GMR, _i, [_vp, _sz, _sz, _vp, _P(_vp), _fp]),
    "gmr_resource_deallocate": (GMR, _i, [_vp, _vp, _sz, _sz, _vp]),
    "gmr_resource_record_stream": (GMR, _i, [_vp, _vp, _vp]),
    "gmr_resource_trim": (GMR, _i, [_vp, _P(_sz)]),
    "gmr_resource_get_type_name": (GMR, _str, [_vp]),
    "gmr_resource_write_stats_json": (GMR, _i, [_vp, _str, _sz, _P(_sz)]),
    "gmr_resource_get_footprint": (GMR, _i, [_vp, _P(FootprintStruct)]),
    "gmr_stream_wait_stream": (GMR, _i, [_vp, _vp]),
    "gmr_resource_get_upstream": (GMR, _vp, [_vp]),
    "gmr_resource_downcast": (GMR, _vp, [_vp, _str]),
    "gmr_resource_find": (GMR, _vp, [_vp, _str]),
    # gmr/pool_resource.h, gmr/vmm_pool_resource.h
    "gmr_pool_resource_get_blocks": (GMR, _i, [_vp, _P(PoolBlockInfo), _sz, _P(_sz)]),
    "gmr_vmm_pool_resource_get_regions": (GMR, _i, [_vp, _P(VmmPoolRegion), _sz, _P(_sz)]),


    # gmr/vmm_pool_sleep.h
    "gmr_vmm_pool_resource_set_default_tag": (GMR, _i, [_vp, _c.c_uint32]),
    "gmr_vmm_pool_resource_set_tag": (GMR, _i, [_vp, _vp, _c.c_uint32]),
    "gmr_vmm_pool_resource_sleep": (GMR, _i, [_vp, _P(VmmSleepOptions), _fp]),
    "gmr_vmm_pool_resource_wake": (GMR, _i, [_vp, _P(VmmWakeOptions), _fp]),
    "gmr_vmm_pool_resource_is_asleep": (GMR, _b, [_vp]),
    "gmr_vmm_pool_resource_get_tag_stats": (GMR, _i, [_vp, _u64, _P(VmmTagStats)]),
    "gmr_vmm_pool_resource_get_stats": (GMR, _i, [_vp, _P(VmmPoolStats)]),
    # gmr/nccl/nccl.h (libgmr_nccl)
    "gmr_nccl_register_components": (NCCL, _i, [_vp]),
    # gmr/vmm_pool_range.h
    "gmr_vmm_pool_resource_reserve_range": (GMR, _i, [_vp, _sz, _sz, _P(_vp), _fp]),
    "gmr_vmm_pool_resource_commit": (GMR, _i, [_vp, _vp, _sz, _fp]),
    "gmr_vmm_pool_resource_decommit": (GMR, _i, [_vp, _vp, _sz, _fp]),
    "gmr_vmm_pool_resource_get_range_info": (GMR, _i, [_vp, _vp, _sz, _P(VmmRangeInfo)]),
    "gmr_vmm_pool_resource_free_range": (GMR, _i, [_vp, _vp, _fp]),
    # gmr/scoped/scoped_pool.h (libgmr_scoped)
    "gmr_scope_registry_create": (SCOPED, _i, [_P(_vp), _sz, _P(ScopeRegistryConfig), _P(_vp)]),
    "gmr_scope_registry_create_from_spec": (SCOPED, _i, [_str, _P(ScopeRegistryConfig), _P(_vp),
                                                      _ep]),
    "gmr_scope_registry_destroy": (SCOPED, _i, [_vp]),
    "gmr_scope_registry_get_pool": (SCOPED, _i, [_vp, _P(_vp)]),
    "gmr_scope_registry_get_pool_for_device": (SCOPED, _i, [_vp, _i, _P(_vp)]),
    "gmr_scope_registry_get_stats": (SCOPED, _i, [_vp, _P(ScopeRegistryStats)]),
    "gmr_scope_enter": (SCOPED, _i, [_vp, _P(ScopeStruct)]),
    "gmr_scope_exit": (SCOPED, _i, [_vp, ScopeStruct, _P(_sz)]),
    "gmr_scope_get_depth": (SCOPED, _c.c_uint32, [_vp]),
    "gmr_scoped_pool_get_device": (SCOPED, _i, [_vp]),
    "gmr_scoped_pool_reset": (SCOPED, _i, [_vp, _P(_sz)]),
    "gmr_scoped_pool_empty": (SCOPED, _i, [_vp, _P(_sz)]),
    "gmr_scoped_pool_get_stats": (SCOPED, _i, [_vp, _P(ScopedPoolStats)]),
    # gmr/policy.h
    "gmr_limit_policy_from_name": (GMR, _i, [_str, _P(LimitPolicy)]),
    "gmr_oom_policy_from_name": (GMR, _i, [_str, _P(OomPolicy)]),
    # gmr/tiers/: memory_space.h, tier_manager.h, reservation.h, stream_pool.h (libgmr_tiers)
    "gmr_memory_space_config_default": (TIERS, MemorySpaceConfig, [_i, _i]),
    "gmr_memory_space_get_id": (TIERS, MemorySpaceId, [_vp]),
    "gmr_memory_space_get_capacity_bytes": (TIERS, _sz, [_vp]),
    "gmr_memory_space_get_available_bytes": (TIERS, _sz, [_vp]),
    "gmr_memory_space_get_stream_pool": (TIERS, _vp, [_vp]),
    "gmr_memory_space_poll_downgrade": (TIERS, _i, [_vp, _P(_b), _P(_sz)]),
    "gmr_memory_space_get_stats": (TIERS, _i, [_vp, _P(MemorySpaceStats)]),
    "gmr_tier_manager_create": (TIERS, _i, [_P(MemorySpaceConfig), _sz, _P(_vp), _fp]),
    "gmr_tier_manager_destroy": (TIERS, _i, [_vp]),
    "gmr_tier_manager_shutdown": (TIERS, _i, [_vp]),
    "gmr_tier_manager_get_space_count": (TIERS, _sz, [_vp]),
    "gmr_tier_manager_get_space_at": (TIERS, _vp, [_vp, _sz]),
    "gmr_tier_manager_reserve": (TIERS, _i, [_vp, _P(ReservationStrategy), _sz, _u64, _P(_u64),
                                           _fp]),
    "gmr_tier_manager_try_reserve": (TIERS, _i, [_vp, _P(ReservationStrategy), _sz, _P(_u64),
                                               _fp]),
    "gmr_tier_manager_reserve_up_to": (TIERS, _i, [_vp, _P(ReservationStrategy), _sz, _P(_u64),
                                                 _P(_sz), _fp]),
    "gmr_tier_manager_get_stats": (TIERS, _i, [_vp, _P(TierManagerStats)]),
    "gmr_reservation_release": (TIERS, _i, [_vp, _u64, _fp]),
    "gmr_reservation_grow": (TIERS, _i, [_vp, _u64, _sz, _fp]),
    "gmr_reservation_shrink": (TIERS, _i, [_vp, _u64, _sz, _fp]),
    "gmr_reservation_bind_stream": (TIERS, _i, [_vp, _u64, _vp, _P(LimitPolicy), _fp]),
    "gmr_reservation_unbind_stream": (TIERS, _i, [_vp, _u64]),
    "gmr_reservation_get_info": (TIERS, _i, [_vp, _u64, _P(ReservationInfo)]),
    "gmr_stream_pool_acquire": (TIERS, _i, [_vp, _i, _u64, _P(_vp)]),
    "gmr_stream_pool_release": (TIERS, _i, [_vp, _vp]),
    # integrations/torch/gmr_torch.h (the torch shim)
    "gmr_torch_alloc": (TORCH, _vp, [_sz, _i, _vp]),
    "gmr_torch_free": (TORCH, None, [_vp, _sz, _i, _vp]),
    "gmr_torch_mempool_alloc": (TORCH, _vp, [_sz, _i, _vp]),
    "gmr_torch_mempool_free": (TORCH, None, [_vp, _sz, _i, _vp]),
    "gmr_torch_init": (TORCH, None, [_i]),
    "gmr_torch_reset": (TORCH, None, []),
    "gmr_torch_set_memory_fraction": (TORCH, None, [_c.c_double, _i]),
    "gmr_torch_record_stream": (TORCH, None, [_vp, _vp]),
    "gmr_torch_get_counters": (TORCH, _i, [_P(TorchCounters)]),
    "gmr_torch_get_last_error": (TORCH, _sz, [_str, _sz]),
    "gmr_torch_raises_torch_errors": (TORCH, _b, []),
    "gmr_torch_get_device_stats": (TORCH, _i, [_i, _P(TorchDeviceStats)]),
    "gmr_torch_reset_peak_stats": (TORCH, _i, [_i]),
    "gmr_torch_reset_accumulated_stats": (TORCH, _i, [_i]),
    "gmr_torch_get_graph_pool_info": (TORCH, _i, [_i, _P(TorchGraphPoolInfo)]),
    "gmr_torch_get_pool_blocks": (TORCH, _i, [_i, _u64, _u64, _P(_sz), _P(_sz), _P(_sz), _sz,
                                              _P(_sz)]),
    "gmr_torch_get_pool_ids": (TORCH, _i, [_i, _P(_u64), _P(_u64), _sz, _P(_sz)]),
    "gmr_torch_expect_address": (TORCH, _i, [_i, _u64, _u64, _vp]),
    "gmr_torch_get_pool_segments": (TORCH, _i, [_i, _u64, _u64, _P(_sz), _P(_sz), _sz,
                                                _P(_sz)]),
    "gmr_torch_storage_adopt": (TORCH, _i, [_c.c_int64]),
    "gmr_torch_storage_disown": (TORCH, _i, [_c.c_int64]),
    # The context function goes as its address (ctypes.cast(f, c_void_p)), so None is NULL.
    "gmr_torch_record_history": (TORCH, _i, [_i, _sz, _vp]),
    "gmr_torch_get_history": (TORCH, _i, [_P(TorchHistoryEntry), _sz, _P(_sz), _P(_u64)]),
    "gmr_torch_clear_history": (TORCH, _i, []),
    "gmr_torch_get_live_allocations": (TORCH, _i, [_i, _P(_sz), _P(_sz), _P(_sz), _P(_u64), _sz,
                                                   _P(_sz)]),
}


def declare(lib: ctypes.CDLL, library: str) -> List[str]:
    """Set restype and argtypes on `lib`'s functions from PROTOTYPES.

    A function the library does not export is skipped (calling it later
    raises AttributeError naming it), so one missing symbol does not stop
    the rest of the package from loading.

    Args:
        lib: the loaded library.
        library: which one it is: GMR ("gmr", libgmr.so), TORCH ("torch",
            the torch shim), or an optional library (TIERS, SCOPED, NCCL).

    Returns:
        The names of the table's functions for `library` that `lib` lacks
        (empty when it has them all).

    Raises:
        ValueError: `library` is not one of LIBRARIES.
    """
    if library not in LIBRARIES:
        raise ValueError("gmr: no prototypes for library %r (one of %s)"
                         % (library, ", ".join(LIBRARIES)))
    missing = []
    for name, (owner, restype, argtypes) in PROTOTYPES.items():
        if owner != library:
            continue
        try:
            f = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        f.restype = restype
        f.argtypes = argtypes
    return missing

