"""The C structs as ctypes sees them: one mirror per C struct of gmr's headers.

MIRRORS maps each mirror to its C name (python/tests/layout_test.py checks
every one against the compiler's layout); the array lengths, struct versions
and enum values the mirrors need sit beside them. gmr._capi re-exports all of
it with the prototype table, so a module takes structs and functions from one
place and a C change is mirrored in one place.
"""

from __future__ import annotations

import ctypes
from typing import Dict

# Array lengths and struct versions of the headers (the C names in comments).
FAILURE_MESSAGE_BYTES = 192        # GMR_FAILURE_MESSAGE_BYTES (gmr/resource.h)
SPEC_ERROR_MESSAGE_BYTES = 512     # GMR_SPEC_ERROR_MESSAGE_BYTES (gmr/stack.h)
TIER_COUNT = 3                     # GMR_TIER_COUNT (gmr/tiers/memory_space.h)
SPACE_TEXT_BYTES = 256             # GMR_MEMORY_SPACE_TEXT_BYTES (gmr/tiers/memory_space.h)
RESERVATION_PATH_BYTES = 320       # GMR_RESERVATION_PATH_BYTES (gmr/tiers/reservation.h)
TORCH_COUNTERS_VERSION = 1
TORCH_DEVICE_STATS_VERSION = 1
TORCH_GRAPH_POOL_INFO_VERSION = 1
SCOPED_POOL_STATS_VERSION = 1
SCOPE_REGISTRY_STATS_VERSION = 1
TIER_MANAGER_STATS_VERSION = 2
MEMORY_SPACE_STATS_VERSION = 1
RESERVATION_INFO_VERSION = 1
VMM_SLEEP_OPTIONS_VERSION = 3      # GMR_VMM_POOL_SLEEP_OPTIONS_VERSION (gmr/vmm_pool_sleep.h)
VMM_WAKE_OPTIONS_VERSION = 1       # GMR_VMM_POOL_WAKE_OPTIONS_VERSION
VMM_TAG_STATS_VERSION = 1          # GMR_VMM_POOL_TAG_STATS_VERSION
VMM_POOL_STATS_VERSION = 3         # GMR_VMM_POOL_RESOURCE_STATS_VERSION (gmr/vmm_pool_resource.h)
VMM_RANGE_INFO_VERSION = 1         # GMR_VMM_POOL_RANGE_INFO_VERSION (gmr/vmm_pool_range.h)
VMM_STAGING_DEFAULT_BYTES = 256 << 20  # GMR_VMM_POOL_STAGING_DEFAULT_BYTES
VMM_MAX_COPY_THREADS = 64          # copy_threads' most (gmr/vmm_pool_sleep.h)
VMM_MAX_TAG = 63                   # GMR_VMM_POOL_MAX_TAG
VMM_HOST_PINNED = 0                # GMR_VMM_POOL_HOST_PINNED
VMM_HOST_PAGEABLE = 1              # GMR_VMM_POOL_HOST_PAGEABLE
TORCH_GRAPH_POOL_TAG = 63          # GMR_TORCH_GRAPH_POOL_TAG (integrations/torch/gmr_torch.h)


# gmr/resource.h, gmr/stack.h


class SpecErrorStruct(ctypes.Structure):
    """gmr_spec_error (gmr/stack.h): where a spec is malformed, and why."""

    _fields_ = [
        ("line", ctypes.c_int),
        ("column", ctypes.c_int),
        ("message", ctypes.c_char * SPEC_ERROR_MESSAGE_BYTES),
    ]


FAILURE_VERSION = 2  # GMR_FAILURE_VERSION


class FailureStruct(ctypes.Structure):
    """gmr_failure (gmr/resource.h): what went wrong in a failed call.

    A new record carries its size and version (as GMR_FAILURE_INIT does in C),
    so the library writes no more than this mirror holds.
    """

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("status", ctypes.c_int),
        ("cuda_error", ctypes.c_int),
        ("bytes", ctypes.c_size_t),
        ("alignment", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
        ("where", ctypes.c_void_p),
        ("attempt", ctypes.c_uint32),
        ("message", ctypes.c_char * FAILURE_MESSAGE_BYTES),
        ("free_info_known", ctypes.c_bool),
        ("free_bytes", ctypes.c_size_t),
        ("largest_free_block_bytes", ctypes.c_size_t),
    ]

    def __init__(self) -> None:
        """An empty record with its size and version set."""
        super().__init__()
        self.size = ctypes.sizeof(self)
        self.version = FAILURE_VERSION


class FootprintStruct(ctypes.Structure):
    """gmr_footprint (gmr/resource.h): bytes a stack holds from CUDA, and their peak."""

    _fields_ = [("held_bytes", ctypes.c_size_t), ("peak_held_bytes", ctypes.c_size_t)]


# gmr/pool_resource.h, gmr/vmm_pool_resource.h: how a pool lays out its memory


class PoolBlockInfo(ctypes.Structure):
    """gmr_pool_block_info (gmr/pool_resource.h): one block of a pool's chunk."""

    _fields_ = [
        ("chunk", ctypes.c_void_p),
        ("chunk_bytes", ctypes.c_size_t),
        ("addr", ctypes.c_void_p),
        ("bytes", ctypes.c_size_t),
        ("requested_bytes", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("arena", ctypes.c_uint32),
    ]


# gmr_pool_block_state
POOL_BLOCK_ALLOCATED, POOL_BLOCK_FREE, POOL_BLOCK_DEFERRED = 0, 1, 2


class VmmPoolRegion(ctypes.Structure):
    """gmr_vmm_pool_region (gmr/vmm_pool_resource.h): one region of a VMM pool's address space."""

    _fields_ = [
        ("addr", ctypes.c_void_p),
        ("bytes", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("stream", ctypes.c_void_p),
        ("pending", ctypes.c_bool),
        ("internal", ctypes.c_bool),
        ("tag", ctypes.c_uint32),
        ("va_chunk_index", ctypes.c_size_t),
    ]


# gmr_vmm_pool_region_kind
VMM_REGION_HOLE, VMM_REGION_FREE, VMM_REGION_LIVE, VMM_REGION_ZOMBIE, VMM_REGION_ASLEEP = range(5)


# gmr/vmm_pool_sleep.h


class VmmSleepOptions(ctypes.Structure):
    """gmr_vmm_pool_sleep_options (gmr/vmm_pool_sleep.h, version 3)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("save_all", ctypes.c_bool),
        ("save_tag_mask", ctypes.c_uint64),
        ("keep_tag_mask", ctypes.c_uint64),
        ("host", ctypes.c_int),
        # Version 3:
        ("staging_bytes", ctypes.c_size_t),
        ("keep_backup", ctypes.c_bool),
        ("copy_threads", ctypes.c_uint32),
    ]

    def __init__(self) -> None:
        """GMR_VMM_POOL_SLEEP_OPTIONS_INIT: save nothing, keep nothing, pageable backups
        through the default staging ring, not kept, the pool's copy threads."""
        super().__init__()
        self.size = ctypes.sizeof(self)
        self.version = VMM_SLEEP_OPTIONS_VERSION
        self.host = VMM_HOST_PAGEABLE


class VmmWakeOptions(ctypes.Structure):
    """gmr_vmm_pool_wake_options (gmr/vmm_pool_sleep.h, version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("wake_all", ctypes.c_bool),
        ("wake_tag_mask", ctypes.c_uint64),
    ]

    def __init__(self) -> None:
        """GMR_VMM_POOL_WAKE_OPTIONS_INIT: wake every asleep allocation."""
        super().__init__()
        self.size = ctypes.sizeof(self)
        self.version = VMM_WAKE_OPTIONS_VERSION
        self.wake_all = True


class VmmPoolStats(ctypes.Structure):
    """gmr_vmm_pool_resource_stats (gmr/vmm_pool_resource.h, version 3)."""

    _fields_ = ([("size", ctypes.c_size_t), ("version", ctypes.c_uint32)] +
                [(name, ctypes.c_size_t) for name in (
                    "page_bytes", "granularity_bytes", "mapped_bytes", "peak_mapped_bytes",
                    "reserved_bytes", "va_chunk_count", "live_bytes", "live_count",
                    "small_live_bytes", "small_live_count", "free_bytes", "free_region_count",
                    "hole_bytes", "hole_count", "zombie_bytes", "zombie_count", "asleep_bytes",
                    "asleep_count", "saved_bytes")] +
                [(name, ctypes.c_uint64) for name in (
                    "page_create_count", "page_release_count", "map_count", "unmap_count",
                    "defrag_count", "remapped_page_count", "extend_count", "event_record_count",
                    "event_query_count", "stream_wait_count", "event_synchronize_count",
                    "sleep_count", "wake_count")] +
                # Version 2: what the driver refused to give back, kept.
                [(name, ctypes.c_size_t) for name in (
                    "unreleased_bytes", "unreleased_handle_count", "unfreed_host_bytes",
                    "unfreed_host_count")] +
                # Version 3: host memory of sleep, reserved ranges.
                [(name, ctypes.c_size_t) for name in (
                    "host_pinned_bytes", "host_pageable_bytes", "staging_bytes",
                    "kept_backup_bytes", "range_count", "range_reserved_bytes",
                    "range_committed_bytes", "range_mapped_bytes", "range_unreleased_bytes")])

    def __init__(self) -> None:
        """GMR_VMM_POOL_RESOURCE_STATS_INIT."""
        super().__init__()
        self.size = ctypes.sizeof(self)
        self.version = VMM_POOL_STATS_VERSION


class VmmTagStats(ctypes.Structure):
    """gmr_vmm_pool_tag_stats (gmr/vmm_pool_sleep.h, version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("live_bytes", ctypes.c_size_t),
        ("live_count", ctypes.c_size_t),
        ("asleep_bytes", ctypes.c_size_t),
        ("asleep_count", ctypes.c_size_t),
        ("saved_bytes", ctypes.c_size_t),
        ("saved_count", ctypes.c_size_t),
        ("saved_pinned", ctypes.c_bool),
    ]

    def __init__(self) -> None:
        """GMR_VMM_POOL_TAG_STATS_INIT."""
        super().__init__()
        self.size = ctypes.sizeof(self)
        self.version = VMM_TAG_STATS_VERSION


# gmr/vmm_pool_range.h


class VmmRangeInfo(ctypes.Structure):
    """gmr_vmm_pool_range_info (gmr/vmm_pool_range.h, version 1)."""

    _fields_ = ([("size", ctypes.c_size_t), ("version", ctypes.c_uint32), ("base", ctypes.c_void_p)] +
                [(name, ctypes.c_size_t) for name in (
                    "reserved_bytes", "page_bytes", "committed_bytes", "span_committed_bytes")] +
                [("tag", ctypes.c_uint32), ("asleep", ctypes.c_bool), ("saved", ctypes.c_bool)])

    def __init__(self) -> None:
        """GMR_VMM_POOL_RANGE_INFO_INIT."""
        super().__init__()
        self.size = ctypes.sizeof(self)
        self.version = VMM_RANGE_INFO_VERSION


# integrations/torch/gmr_torch.h


class TorchCounters(ctypes.Structure):
    """gmr_torch_counters (integrations/torch/gmr_torch.h): the shim's counters."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("live_count", ctypes.c_uint64),
        ("live_bytes", ctypes.c_uint64),
        ("allocation_count", ctypes.c_uint64),
        ("failed_allocation_count", ctypes.c_uint64),
        ("refused_free_count", ctypes.c_uint64),
        ("failed_free_count", ctypes.c_uint64),
        ("record_stream_count", ctypes.c_uint64),
        ("record_stream_fallback_count", ctypes.c_uint64),
        ("capture_allocation_count", ctypes.c_uint64),
    ]


class TorchDeviceStats(ctypes.Structure):
    """gmr_torch_device_stats (integrations/torch/gmr_torch.h): one device's tensor counters."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("live_count", ctypes.c_uint64),
        ("peak_live_count", ctypes.c_uint64),
        ("live_bytes", ctypes.c_uint64),
        ("peak_live_bytes", ctypes.c_uint64),
        ("allocation_count", ctypes.c_uint64),
        ("free_count", ctypes.c_uint64),
        ("allocated_bytes", ctypes.c_uint64),
        ("freed_bytes", ctypes.c_uint64),
        ("failed_allocation_count", ctypes.c_uint64),
        ("retry_count", ctypes.c_uint64),
    ]


class TorchGraphPoolInfo(ctypes.Structure):
    """gmr_torch_graph_pool_info (integrations/torch/gmr_torch.h): one device's graph pools."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("pool_count", ctypes.c_size_t),
        ("active_pool_count", ctypes.c_size_t),
        ("live_block_count", ctypes.c_size_t),
        ("pending_memory_count", ctypes.c_size_t),
        ("deferred_free_count", ctypes.c_size_t),
        ("arena_held_bytes", ctypes.c_size_t),
    ]


class TorchHistoryEntry(ctypes.Structure):
    """gmr_torch_history_entry (integrations/torch/gmr_torch.h): one entry of the shim's history."""

    _fields_ = [
        ("time_us", ctypes.c_uint64),
        ("addr", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("stream", ctypes.c_uint64),
        ("context", ctypes.c_uint64),
        ("device_free", ctypes.c_uint64),
        ("device", ctypes.c_int32),
        ("action", ctypes.c_int32),
    ]


# gmr_torch_history_action, by value: PyTorch's names for them.
TORCH_HISTORY_ACTIONS = ("alloc", "free_requested", "free_completed", "oom")
TORCH_HISTORY_MAX_ENTRIES = 1 << 26  # GMR_TORCH_HISTORY_MAX_ENTRIES

# gmr_torch_context_fn: uint64_t (*)(void).
TORCH_CONTEXT_FN = ctypes.CFUNCTYPE(ctypes.c_uint64)


# gmr/scoped/scoped_pool.h


class ScopeRegistryConfig(ctypes.Structure):
    """gmr_scope_registry_config (gmr/scoped/scoped_pool.h)."""

    _fields_ = [
        ("chunk_bytes", ctypes.c_size_t),
        ("max_capacity_bytes", ctypes.c_size_t),
        ("alignment", ctypes.c_size_t),
    ]


class ScopeStruct(ctypes.Structure):
    """gmr_scope (gmr/scoped/scoped_pool.h); passed by value to gmr_scope_exit."""

    _fields_ = [("depth", ctypes.c_uint32), ("serial", ctypes.c_uint64)]


class ScopedPoolStats(ctypes.Structure):
    """gmr_scoped_pool_stats (gmr/scoped/scoped_pool.h, version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("device", ctypes.c_int),
        ("held_bytes", ctypes.c_size_t),
        ("peak_held_bytes", ctypes.c_size_t),
        ("live_bytes", ctypes.c_size_t),
        ("live_count", ctypes.c_size_t),
        ("mark_count", ctypes.c_size_t),
        ("allocation_count", ctypes.c_uint64),
        ("rewind_count", ctypes.c_uint64),
        ("released_count", ctypes.c_uint64),
        ("orphan_mark_count", ctypes.c_uint64),
        ("reset_count", ctypes.c_uint64),
        ("empty_count", ctypes.c_uint64),
        ("wrong_device_count", ctypes.c_uint64),
    ]


class ScopeRegistryStats(ctypes.Structure):
    """gmr_scope_registry_stats (gmr/scoped/scoped_pool.h, version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("device_count", ctypes.c_size_t),
        ("thread_count", ctypes.c_size_t),
        ("pool_count", ctypes.c_size_t),
        ("pools_created", ctypes.c_uint64),
        ("pools_retired", ctypes.c_uint64),
        ("orphan_scope_count", ctypes.c_uint64),
    ]


# gmr/policy.h, gmr/tiers/memory_space.h, gmr/tiers/reservation.h, gmr/tiers/tier_manager.h


class MemorySpaceId(ctypes.Structure):
    """gmr_memory_space_id (gmr/tiers/memory_space.h): a tier and an index in it."""

    _fields_ = [("tier", ctypes.c_int), ("index", ctypes.c_int)]


class LimitPolicy(ctypes.Structure):
    """gmr_limit_policy (gmr/policy.h); built by gmr_limit_policy_from_name."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("name", ctypes.c_void_p),
        ("decide", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
        ("padding_factor", ctypes.c_double),
        ("cap_bytes", ctypes.c_size_t),
        ("release", ctypes.c_void_p),
    ]


class OomPolicy(ctypes.Structure):
    """gmr_oom_policy (gmr/policy.h); built by gmr_oom_policy_from_name."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("name", ctypes.c_void_p),
        ("decide", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
        ("max_attempts", ctypes.c_uint32),
        ("wait_timeout_ns", ctypes.c_uint64),
        ("callback", ctypes.c_void_p),
        ("callback_ctx", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
    ]


class MemorySpaceConfig(ctypes.Structure):
    """gmr_memory_space_config (gmr/tiers/memory_space.h)."""

    _fields_ = [
        ("id", MemorySpaceId),
        ("capacity_bytes", ctypes.c_size_t),
        ("reservation_limit_fraction", ctypes.c_double),
        ("downgrade_trigger_fraction", ctypes.c_double),
        ("downgrade_stop_fraction", ctypes.c_double),
        ("require_reservation", ctypes.c_bool),
        ("max_stream_slots", ctypes.c_size_t),
        ("on_limit", LimitPolicy),
        ("on_oom", OomPolicy),
        ("stream_count", ctypes.c_size_t),
        ("stream_device", ctypes.c_int),
        ("upstream", ctypes.c_void_p),
        ("stack_spec", ctypes.c_char * SPACE_TEXT_BYTES),
        ("downgrade_numa_node", ctypes.c_int),
        ("numa_node", ctypes.c_int),
        ("block_bytes", ctypes.c_size_t),
        ("blocks_per_chunk", ctypes.c_size_t),
        ("initial_chunk_count", ctypes.c_size_t),
        ("mount_path", ctypes.c_char * SPACE_TEXT_BYTES),
    ]


class ReservationStrategy(ctypes.Structure):
    """gmr_reservation_strategy (gmr/tiers/reservation.h): where a reservation may go."""

    _fields_ = [
        ("kind", ctypes.c_int),
        ("space", MemorySpaceId),
        ("tiers", ctypes.c_int * TIER_COUNT),
        ("tier_count", ctypes.c_size_t),
    ]


class TierManagerStats(ctypes.Structure):
    """gmr_tier_manager_stats (gmr/tiers/tier_manager.h, version 2)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("space_count", ctypes.c_size_t),
        ("reservation_count", ctypes.c_size_t),
        ("reserve_count", ctypes.c_uint64),
        ("refused_count", ctypes.c_uint64),
        ("wait_count", ctypes.c_uint64),
        ("wait_ns", ctypes.c_uint64),
        ("max_wait_ns", ctypes.c_uint64),
        ("timeout_count", ctypes.c_uint64),
        ("shutdown_count", ctypes.c_uint64),
        ("release_count", ctypes.c_uint64),
        ("reserve_latency_ns", ctypes.c_uint64),
        ("max_reserve_latency_ns", ctypes.c_uint64),
        ("waiter_count", ctypes.c_size_t),
        ("shut_down", ctypes.c_bool),
        ("immediate_reserve_count", ctypes.c_uint64),
        ("immediate_reserve_latency_ns", ctypes.c_uint64),
        ("max_immediate_reserve_latency_ns", ctypes.c_uint64),
    ]


class MemorySpaceStats(ctypes.Structure):
    """gmr_memory_space_stats (gmr/tiers/memory_space.h, version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("id", MemorySpaceId),
        ("capacity_bytes", ctypes.c_size_t),
        ("reservation_limit_bytes", ctypes.c_size_t),
        ("downgrade_trigger_bytes", ctypes.c_size_t),
        ("downgrade_stop_bytes", ctypes.c_size_t),
        ("reserved_bytes", ctypes.c_size_t),
        ("peak_reserved_bytes", ctypes.c_size_t),
        ("reservation_count", ctypes.c_size_t),
        ("bound_stream_count", ctypes.c_size_t),
        ("allocated_bytes", ctypes.c_size_t),
        ("peak_allocated_bytes", ctypes.c_size_t),
        ("reserved_allocated_bytes", ctypes.c_size_t),
        ("untracked_bytes", ctypes.c_size_t),
        ("used_bytes", ctypes.c_size_t),
        ("available_bytes", ctypes.c_size_t),
        ("downgrading", ctypes.c_bool),
        ("downgrade_start_count", ctypes.c_uint64),
        ("no_reservation_count", ctypes.c_uint64),
        ("reservation_raise_count", ctypes.c_uint64),
        ("reservation_overage_count", ctypes.c_uint64),
        ("reservation_refusal_count", ctypes.c_uint64),
    ]


class ReservationInfo(ctypes.Structure):
    """gmr_reservation_info (gmr/tiers/reservation.h, version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("id", ctypes.c_uint64),
        ("space", MemorySpaceId),
        ("bytes", ctypes.c_size_t),
        ("allocated_bytes", ctypes.c_size_t),
        ("bound", ctypes.c_bool),
        ("stream", ctypes.c_void_p),
        ("raise_count", ctypes.c_uint64),
        ("overage_count", ctypes.c_uint64),
        ("refusal_count", ctypes.c_uint64),
        ("path", ctypes.c_char * RESERVATION_PATH_BYTES),
    ]


# Every mirror and the C struct it mirrors (layout_test compares each with
# the compiler's layout; a mirror missing here fails that test).
MIRRORS: Dict[type, str] = {
    FailureStruct: "gmr_failure",
    SpecErrorStruct: "gmr_spec_error",
    FootprintStruct: "gmr_footprint",
    PoolBlockInfo: "gmr_pool_block_info",
    VmmPoolRegion: "gmr_vmm_pool_region",
    TorchCounters: "gmr_torch_counters",
    TorchDeviceStats: "gmr_torch_device_stats",
    TorchGraphPoolInfo: "gmr_torch_graph_pool_info",
    TorchHistoryEntry: "gmr_torch_history_entry",
    ScopeRegistryConfig: "gmr_scope_registry_config",
    ScopeStruct: "gmr_scope",
    ScopedPoolStats: "gmr_scoped_pool_stats",
    ScopeRegistryStats: "gmr_scope_registry_stats",
    MemorySpaceId: "gmr_memory_space_id",
    LimitPolicy: "gmr_limit_policy",
    OomPolicy: "gmr_oom_policy",
    MemorySpaceConfig: "gmr_memory_space_config",
    ReservationStrategy: "gmr_reservation_strategy",
    TierManagerStats: "gmr_tier_manager_stats",
    MemorySpaceStats: "gmr_memory_space_stats",
    ReservationInfo: "gmr_reservation_info",
    VmmSleepOptions: "gmr_vmm_pool_sleep_options",
    VmmWakeOptions: "gmr_vmm_pool_wake_options",
    VmmTagStats: "gmr_vmm_pool_tag_stats",
    VmmPoolStats: "gmr_vmm_pool_resource_stats",
    VmmRangeInfo: "gmr_vmm_pool_range_info",
}
