#!/usr/bin/env python3
"""Device memory in use and the allocator's held bytes at each phase of the
graph_replay workload (model, warm-up on a side stream, capture, replays):
where an allocator's footprint differs from PyTorch's (GPU run 44).

Usage (repository root, GPU machine, after tools/gpu/stage.sh):
  GMR_LIBRARY_DIR=.gpu/lib PYTHONPATH=python python3 tools/frameworks/graph_phases.py \
      torch|expandable|gmr
"""
import os, sys, ctypes
alloc = sys.argv[1]
if alloc == "expandable":
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
import torch
if alloc == "gmr":
    import gmr.torch
    gmr.torch.use("vmm")
torch.cuda.init(); torch.cuda.synchronize()
free, total = torch.cuda.mem_get_info(); base = total - free
def held():
    if alloc == "gmr":
        import gmr
        return gmr.stack_stats(0)["held_bytes"] / 2**20
    return torch.cuda.memory_reserved() / 2**20
def show(tag):
    torch.cuda.synchronize()
    f, t = torch.cuda.mem_get_info()
    print("%-10s %-22s used %7.1f held %7.1f" % (alloc, tag, (t - f - base) / 2**20, held()), flush=True)
show("start")
torch.manual_seed(0)
model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(4096, 4096), torch.nn.GELU())]).cuda().to(torch.bfloat16)
static_in = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
show("model")
warm = torch.cuda.Stream(); warm.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(warm), torch.no_grad():
    for _ in range(3): model(static_in)
torch.cuda.current_stream().wait_stream(warm)
show("warm-up on side stream")
graph = torch.cuda.CUDAGraph()
with torch.no_grad():
    with torch.cuda.graph(graph):
        static_out = model(static_in)
show("captured")
for _ in range(10): graph.replay()
show("10 replays")
x = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
show("randn")
gen = torch.Generator(device="cuda").manual_seed(6)
sums = []
for i in range(1000):
    static_in.copy_(torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16, generator=gen))
    graph.replay()
    sums.append(static_out.float().sum())
    if i % 200 == 199: show("replay loop %d" % (i + 1))
