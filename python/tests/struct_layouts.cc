// Prints, as JSON, the size and the field offsets of every C struct that
// python/gmr mirrors with ctypes, as this compiler lays them out;
// python/tests/layout_test.py compares its mirrors with them. A field added
// to a struct here but not in Python (or the other way round) shows as a
// size or offset that differs.
#include <cstddef>
#include <cstdio>

#include "gmr/gmr.h"
#include "gmr/scoped/scoped_pool.h"
#include "gmr/tiers/tier_manager.h"
#include "integrations/torch/gmr_torch.h"

namespace {

bool first_struct = true;
bool first_field = true;

void begin(const char *name, size_t size) {
  std::printf("%s\n \"%s\": {\"size\": %zu, \"fields\": {", first_struct ? "{" : ",", name, size);
  first_struct = false;
  first_field = true;
}

void field(const char *name, size_t offset) {
  std::printf("%s\"%s\": %zu", first_field ? "" : ", ", name, offset);
  first_field = false;
}

void end() { std::printf("}}"); }

}  // namespace

#define BEGIN(T) begin(#T, sizeof(T))
#define FIELD(T, f) field(#f, offsetof(T, f))

int main() {
  BEGIN(gmr_failure);
  FIELD(gmr_failure, size);
  FIELD(gmr_failure, version);
  FIELD(gmr_failure, status);
  FIELD(gmr_failure, cuda_error);
  FIELD(gmr_failure, bytes);
  FIELD(gmr_failure, alignment);
  FIELD(gmr_failure, stream);
  FIELD(gmr_failure, where);
  FIELD(gmr_failure, attempt);
  FIELD(gmr_failure, message);
  FIELD(gmr_failure, free_info_known);
  FIELD(gmr_failure, free_bytes);
  FIELD(gmr_failure, largest_free_block_bytes);
  end();
  BEGIN(gmr_spec_error);
  FIELD(gmr_spec_error, line);
  FIELD(gmr_spec_error, column);
  FIELD(gmr_spec_error, message);
  end();
  BEGIN(gmr_footprint);
  FIELD(gmr_footprint, held_bytes);
  FIELD(gmr_footprint, peak_held_bytes);
  end();
  BEGIN(gmr_pool_block_info);
  FIELD(gmr_pool_block_info, chunk);
  FIELD(gmr_pool_block_info, chunk_bytes);
  FIELD(gmr_pool_block_info, addr);
  FIELD(gmr_pool_block_info, bytes);
  FIELD(gmr_pool_block_info, requested_bytes);
  FIELD(gmr_pool_block_info, state);
  FIELD(gmr_pool_block_info, arena);
  end();
  BEGIN(gmr_vmm_pool_region);
  FIELD(gmr_vmm_pool_region, addr);
  FIELD(gmr_vmm_pool_region, bytes);
  FIELD(gmr_vmm_pool_region, kind);
  FIELD(gmr_vmm_pool_region, stream);
  FIELD(gmr_vmm_pool_region, pending);
  FIELD(gmr_vmm_pool_region, internal);
  FIELD(gmr_vmm_pool_region, tag);
  FIELD(gmr_vmm_pool_region, va_chunk_index);
  end();
  BEGIN(gmr_torch_history_entry);
  FIELD(gmr_torch_history_entry, time_us);
  FIELD(gmr_torch_history_entry, addr);
  FIELD(gmr_torch_history_entry, size);
  FIELD(gmr_torch_history_entry, stream);
  FIELD(gmr_torch_history_entry, context);
  FIELD(gmr_torch_history_entry, device_free);
  FIELD(gmr_torch_history_entry, device);
  FIELD(gmr_torch_history_entry, action);
  end();
  BEGIN(gmr_torch_counters);
  FIELD(gmr_torch_counters, size);
  FIELD(gmr_torch_counters, version);
  FIELD(gmr_torch_counters, live_count);
  FIELD(gmr_torch_counters, live_bytes);
  FIELD(gmr_torch_counters, allocation_count);
  FIELD(gmr_torch_counters, failed_allocation_count);
  FIELD(gmr_torch_counters, refused_free_count);
  FIELD(gmr_torch_counters, failed_free_count);
  FIELD(gmr_torch_counters, record_stream_count);
  FIELD(gmr_torch_counters, record_stream_fallback_count);
  FIELD(gmr_torch_counters, capture_allocation_count);
  end();
  BEGIN(gmr_torch_device_stats);
  FIELD(gmr_torch_device_stats, size);
  FIELD(gmr_torch_device_stats, version);
  FIELD(gmr_torch_device_stats, live_count);
  FIELD(gmr_torch_device_stats, peak_live_count);
  FIELD(gmr_torch_device_stats, live_bytes);
  FIELD(gmr_torch_device_stats, peak_live_bytes);
  FIELD(gmr_torch_device_stats, allocation_count);
  FIELD(gmr_torch_device_stats, free_count);
  FIELD(gmr_torch_device_stats, allocated_bytes);
  FIELD(gmr_torch_device_stats, freed_bytes);
  FIELD(gmr_torch_device_stats, failed_allocation_count);
  FIELD(gmr_torch_device_stats, retry_count);
  end();
  BEGIN(gmr_vmm_pool_sleep_options);
  FIELD(gmr_vmm_pool_sleep_options, size);
  FIELD(gmr_vmm_pool_sleep_options, version);
  FIELD(gmr_vmm_pool_sleep_options, save_all);
  FIELD(gmr_vmm_pool_sleep_options, save_tag_mask);
  FIELD(gmr_vmm_pool_sleep_options, keep_tag_mask);
  FIELD(gmr_vmm_pool_sleep_options, host);
  end();
  BEGIN(gmr_vmm_pool_wake_options);
  FIELD(gmr_vmm_pool_wake_options, size);
  FIELD(gmr_vmm_pool_wake_options, version);
  FIELD(gmr_vmm_pool_wake_options, wake_all);
  FIELD(gmr_vmm_pool_wake_options, wake_tag_mask);
  end();
  BEGIN(gmr_vmm_pool_tag_stats);
  FIELD(gmr_vmm_pool_tag_stats, size);
  FIELD(gmr_vmm_pool_tag_stats, version);
  FIELD(gmr_vmm_pool_tag_stats, live_bytes);
  FIELD(gmr_vmm_pool_tag_stats, live_count);
  FIELD(gmr_vmm_pool_tag_stats, asleep_bytes);
  FIELD(gmr_vmm_pool_tag_stats, asleep_count);
  FIELD(gmr_vmm_pool_tag_stats, saved_bytes);
  FIELD(gmr_vmm_pool_tag_stats, saved_count);
  FIELD(gmr_vmm_pool_tag_stats, saved_pinned);
  end();
  BEGIN(gmr_torch_graph_pool_info);
  FIELD(gmr_torch_graph_pool_info, size);
  FIELD(gmr_torch_graph_pool_info, version);
  FIELD(gmr_torch_graph_pool_info, pool_count);
  FIELD(gmr_torch_graph_pool_info, active_pool_count);
  FIELD(gmr_torch_graph_pool_info, live_block_count);
  FIELD(gmr_torch_graph_pool_info, pending_memory_count);
  FIELD(gmr_torch_graph_pool_info, deferred_free_count);
  FIELD(gmr_torch_graph_pool_info, arena_held_bytes);
  end();
  BEGIN(gmr_scope_registry_config);
  FIELD(gmr_scope_registry_config, chunk_bytes);
  FIELD(gmr_scope_registry_config, max_capacity_bytes);
  FIELD(gmr_scope_registry_config, alignment);
  end();
  BEGIN(gmr_scope);
  FIELD(gmr_scope, depth);
  FIELD(gmr_scope, serial);
  end();
  BEGIN(gmr_scoped_pool_stats);
  FIELD(gmr_scoped_pool_stats, size);
  FIELD(gmr_scoped_pool_stats, version);
  FIELD(gmr_scoped_pool_stats, device);
  FIELD(gmr_scoped_pool_stats, held_bytes);
  FIELD(gmr_scoped_pool_stats, peak_held_bytes);
  FIELD(gmr_scoped_pool_stats, live_bytes);
  FIELD(gmr_scoped_pool_stats, live_count);
  FIELD(gmr_scoped_pool_stats, mark_count);
  FIELD(gmr_scoped_pool_stats, allocation_count);
  FIELD(gmr_scoped_pool_stats, rewind_count);
  FIELD(gmr_scoped_pool_stats, released_count);
  FIELD(gmr_scoped_pool_stats, orphan_mark_count);
  FIELD(gmr_scoped_pool_stats, reset_count);
  FIELD(gmr_scoped_pool_stats, empty_count);
  FIELD(gmr_scoped_pool_stats, wrong_device_count);
  end();
  BEGIN(gmr_scope_registry_stats);
  FIELD(gmr_scope_registry_stats, size);
  FIELD(gmr_scope_registry_stats, version);
  FIELD(gmr_scope_registry_stats, device_count);
  FIELD(gmr_scope_registry_stats, thread_count);
  FIELD(gmr_scope_registry_stats, pool_count);
  FIELD(gmr_scope_registry_stats, pools_created);
  FIELD(gmr_scope_registry_stats, pools_retired);
  FIELD(gmr_scope_registry_stats, orphan_scope_count);
  end();
  BEGIN(gmr_memory_space_id);
  FIELD(gmr_memory_space_id, tier);
  FIELD(gmr_memory_space_id, index);
  end();
  BEGIN(gmr_limit_policy);
  FIELD(gmr_limit_policy, version);
  FIELD(gmr_limit_policy, name);
  FIELD(gmr_limit_policy, decide);
  FIELD(gmr_limit_policy, ctx);
  FIELD(gmr_limit_policy, padding_factor);
  FIELD(gmr_limit_policy, cap_bytes);
  FIELD(gmr_limit_policy, release);
  end();
  BEGIN(gmr_oom_policy);
  FIELD(gmr_oom_policy, version);
  FIELD(gmr_oom_policy, name);
  FIELD(gmr_oom_policy, decide);
  FIELD(gmr_oom_policy, ctx);
  FIELD(gmr_oom_policy, max_attempts);
  FIELD(gmr_oom_policy, wait_timeout_ns);
  FIELD(gmr_oom_policy, callback);
  FIELD(gmr_oom_policy, callback_ctx);
  FIELD(gmr_oom_policy, release);
  end();
  BEGIN(gmr_memory_space_config);
  FIELD(gmr_memory_space_config, id);
  FIELD(gmr_memory_space_config, capacity_bytes);
  FIELD(gmr_memory_space_config, reservation_limit_fraction);
  FIELD(gmr_memory_space_config, downgrade_trigger_fraction);
  FIELD(gmr_memory_space_config, downgrade_stop_fraction);
  FIELD(gmr_memory_space_config, require_reservation);
  FIELD(gmr_memory_space_config, max_stream_slots);
  FIELD(gmr_memory_space_config, on_limit);
  FIELD(gmr_memory_space_config, on_oom);
  FIELD(gmr_memory_space_config, stream_count);
  FIELD(gmr_memory_space_config, stream_device);
  FIELD(gmr_memory_space_config, upstream);
  FIELD(gmr_memory_space_config, stack_spec);
  FIELD(gmr_memory_space_config, downgrade_numa_node);
  FIELD(gmr_memory_space_config, numa_node);
  FIELD(gmr_memory_space_config, block_bytes);
  FIELD(gmr_memory_space_config, blocks_per_chunk);
  FIELD(gmr_memory_space_config, initial_chunk_count);
  FIELD(gmr_memory_space_config, mount_path);
  end();
  BEGIN(gmr_reservation_strategy);
  FIELD(gmr_reservation_strategy, kind);
  FIELD(gmr_reservation_strategy, space);
  FIELD(gmr_reservation_strategy, tiers);
  FIELD(gmr_reservation_strategy, tier_count);
  end();
  BEGIN(gmr_tier_manager_stats);
  FIELD(gmr_tier_manager_stats, size);
  FIELD(gmr_tier_manager_stats, version);
  FIELD(gmr_tier_manager_stats, space_count);
  FIELD(gmr_tier_manager_stats, reservation_count);
  FIELD(gmr_tier_manager_stats, reserve_count);
  FIELD(gmr_tier_manager_stats, refused_count);
  FIELD(gmr_tier_manager_stats, wait_count);
  FIELD(gmr_tier_manager_stats, wait_ns);
  FIELD(gmr_tier_manager_stats, max_wait_ns);
  FIELD(gmr_tier_manager_stats, timeout_count);
  FIELD(gmr_tier_manager_stats, shutdown_count);
  FIELD(gmr_tier_manager_stats, release_count);
  FIELD(gmr_tier_manager_stats, reserve_latency_ns);
  FIELD(gmr_tier_manager_stats, max_reserve_latency_ns);
  FIELD(gmr_tier_manager_stats, waiter_count);
  FIELD(gmr_tier_manager_stats, shut_down);
  FIELD(gmr_tier_manager_stats, immediate_reserve_count);
  FIELD(gmr_tier_manager_stats, immediate_reserve_latency_ns);
  FIELD(gmr_tier_manager_stats, max_immediate_reserve_latency_ns);
  end();
  BEGIN(gmr_memory_space_stats);
  FIELD(gmr_memory_space_stats, size);
  FIELD(gmr_memory_space_stats, version);
  FIELD(gmr_memory_space_stats, id);
  FIELD(gmr_memory_space_stats, capacity_bytes);
  FIELD(gmr_memory_space_stats, reservation_limit_bytes);
  FIELD(gmr_memory_space_stats, downgrade_trigger_bytes);
  FIELD(gmr_memory_space_stats, downgrade_stop_bytes);
  FIELD(gmr_memory_space_stats, reserved_bytes);
  FIELD(gmr_memory_space_stats, peak_reserved_bytes);
  FIELD(gmr_memory_space_stats, reservation_count);
  FIELD(gmr_memory_space_stats, bound_stream_count);
  FIELD(gmr_memory_space_stats, allocated_bytes);
  FIELD(gmr_memory_space_stats, peak_allocated_bytes);
  FIELD(gmr_memory_space_stats, reserved_allocated_bytes);
  FIELD(gmr_memory_space_stats, untracked_bytes);
  FIELD(gmr_memory_space_stats, used_bytes);
  FIELD(gmr_memory_space_stats, available_bytes);
  FIELD(gmr_memory_space_stats, downgrading);
  FIELD(gmr_memory_space_stats, downgrade_start_count);
  FIELD(gmr_memory_space_stats, no_reservation_count);
  FIELD(gmr_memory_space_stats, reservation_raise_count);
  FIELD(gmr_memory_space_stats, reservation_overage_count);
  FIELD(gmr_memory_space_stats, reservation_refusal_count);
  end();
  BEGIN(gmr_reservation_info);
  FIELD(gmr_reservation_info, size);
  FIELD(gmr_reservation_info, version);
  FIELD(gmr_reservation_info, id);
  FIELD(gmr_reservation_info, space);
  FIELD(gmr_reservation_info, bytes);
  FIELD(gmr_reservation_info, allocated_bytes);
  FIELD(gmr_reservation_info, bound);
  FIELD(gmr_reservation_info, stream);
  FIELD(gmr_reservation_info, raise_count);
  FIELD(gmr_reservation_info, overage_count);
  FIELD(gmr_reservation_info, refusal_count);
  FIELD(gmr_reservation_info, path);
  end();
  std::printf("\n}\n");
  return 0;
}
