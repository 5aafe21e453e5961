"""gmr.scoped and gmr.tiers on a real GPU (or the simulation with GMR_CUDA_SIM=1): a scope
that gives back the same addresses three times, and a GPU reservation bound to a pooled
stream. Prints OK at the end; any failure raises.

    PYTHONPATH=python GMR_LIBRARY_DIR=.gpu/lib python3 python/tests/tiers_gpu_check.py
"""
import gmr, gmr.scoped, gmr.tiers as t
print("simulated:", gmr.simulated())
reg = gmr.scoped.Registry("pool > cuda(kind=async)")
pool = reg.pool()
addrs = []
for _ in range(3):
    with reg.scope() as sc:
        addrs.append([pool.allocate(n) for n in (4096, 1 << 20, 64 << 20)])
assert addrs[0] == addrs[1] == addrs[2], addrs
print("scoped: %d blocks back per scope, same addresses, %d MiB held" % (sc.released_count, pool.stats()["held_bytes"] >> 20))
pool.empty(); reg.close()
m = t.Manager([t.space_config("GPU", 0, capacity_bytes=1 << 30, reservation_limit_fraction=1.0),
               t.space_config("HOST", 0, capacity_bytes=256 << 20, numa_node=-1, initial_chunk_count=0)])
g = m.space("GPU", 0); s = g.acquire_stream()
with m.reserve(["GPU", "HOST"], 512 << 20) as r:
    r.bind(s); p = g.allocate(256 << 20, s); g.deallocate(p, 256 << 20, s)
g.release_stream(s)
print("tiers: %d reservation(s), %d at once" % (m.stats()["reserve_count"], m.stats()["immediate_reserve_count"])); m.close()
print("OK")
