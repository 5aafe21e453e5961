"""Reserve now, commit later, and never unmap under running kernels, on a
GPU (issue 33, goals 2 and 3), for serving_check.py.

Parts (each in a process of its own, started by serving_check.py):
  kvcache  a KV cache in a range reserved by gmr.serving.reserve() for
           LAYERS layers of MAX_BLOCKS blocks: one tensor over the whole
           range and a view per layer made apart; a little committed (the
           first page of each layer), CUDA graphs of a step that reads and
           writes the blocks a static block table names captured over it;
           then the rest committed at the same addresses, the table pointed
           at blocks committed after the capture: each replay bit-identical
           to the same step run eagerly from the same state; part of the
           range decommitted and committed again: the graph still replays,
           bit-identical; a commit the device has no room for raises
           gmr.OutOfMemoryError and changes nothing (device memory, the
           range, the graph's results); a sleep with the range backed up
           and a wake: the graph replays bit-identical, the blocks as they
           were; the range freed once its tensors are gone.
  unmap    work still running on a side stream when the memory it writes is
           decommitted, or put to sleep: a spin kernel (torch.cuda._sleep)
           then a write, queued; the decommit, and the sleep, must wait for
           them (a fault would end the process: the check is that it lives,
           and that the sleep saved what the late write wrote).
"""

import gc

MIB = 1 << 20
GIB = 1 << 30
LAYERS = 8
TOKENS, HIDDEN = 16, 1024                # a block: 16 tokens of 1024 fp16 values, 32 KiB
BLOCK_BYTES = TOKENS * HIDDEN * 2
MAX_BLOCKS = 4096                        # 128 MiB per layer, 1 GiB in all
LAYER_BYTES = MAX_BLOCKS * BLOCK_BYTES
PAGE = 2 * MIB                           # the pool's page: the range's commit granularity
BLOCKS_PER_PAGE = PAGE // BLOCK_BYTES
TABLE = 48                               # blocks each step touches


def _step(torch, layers, table, x):
    """Read the table's blocks of every layer, mix in x, write them back; the
    per-layer sums of what was written are the output."""
    outs = []
    for i, kv in enumerate(layers):
        old = kv.index_select(0, table)
        new = old * 0.5 + x * float(i + 1)
        kv.index_copy_(0, table, new)
        outs.append(new.float().sum(dim=(1, 2)))
    return torch.stack(outs)


def part_kvcache(args):
    import serving_check as sc  # noqa: PLC0415
    torch, g = sc._torch()
    import gmr  # noqa: PLC0415
    checks = []

    def check(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})

    torch.cuda.init()
    rng = g.reserve(LAYERS * LAYER_BYTES, tag="kv_cache")
    whole = rng.tensor(torch.float16, (LAYERS, MAX_BLOCKS, TOKENS, HIDDEN))
    layers = [rng.tensor(torch.float16, (MAX_BLOCKS, TOKENS, HIDDEN), offset=i * LAYER_BYTES)
              for i in range(LAYERS)]  # a view per layer, made apart
    check("views over the range", whole.data_ptr() == rng.ptr and
          all(v.data_ptr() == rng.ptr + i * LAYER_BYTES for i, v in enumerate(layers)),
          "one tensor of %d MiB and %d layer views at the range's addresses"
          % (rng.nbytes // MIB, LAYERS))
    free_before = torch.cuda.mem_get_info()[0]
    for i in range(LAYERS):  # a little: the first page of each layer
        rng.commit(i * LAYER_BYTES, PAGE)
    check("commit a little before the capture",
          rng.committed() == LAYERS * PAGE and
          free_before - torch.cuda.mem_get_info()[0] >= LAYERS * PAGE,
          "%d MiB committed of %d MiB reserved" % (rng.committed() // MIB, rng.nbytes // MIB))
    gen = torch.Generator(device="cuda").manual_seed(5)
    with g.region("inputs"):
        table = torch.arange(TABLE, device="cuda")
        x = torch.randn(TABLE, TOKENS, HIDDEN, device="cuda", generator=gen).half()
    for v in layers:
        v[:BLOCKS_PER_PAGE].normal_(generator=gen)

    def state():
        return [v.index_select(0, table).clone() for v in layers]

    def restore(saved):
        for v, s in zip(layers, saved):
            v.index_copy_(0, table, s)

    # Capture, after a warm-up on a side stream.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        saved = state()
        for _ in range(2):
            _step(torch, layers, table, x)
        restore(saved)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _step(torch, layers, table, x)

    def compare(what):
        """The graph's replay against the eager step from the same state."""
        saved = state()
        eager = _step(torch, layers, table, x).cpu()
        eager_kv = [s.cpu() for s in state()]
        restore(saved)
        graph.replay()
        torch.cuda.synchronize()
        ok = sc._same(eager, out.cpu()) and all(
            sc._same(a, b.cpu()) for a, b in zip(eager_kv, state()))
        check("graph = eager: %s" % what, ok, "outputs and the %d blocks written, bit for bit"
              % (TABLE * LAYERS))
        return ok

    compare("over the pages committed before the capture")
    # The final size at the same addresses; the table moves to new blocks.
    rng.commit()
    check("commit the rest", rng.committed() == rng.nbytes, "%d MiB committed"
          % (rng.committed() // MIB))
    late = MAX_BLOCKS - 3 * BLOCKS_PER_PAGE  # blocks of pages committed after the capture
    for v in layers:
        v[BLOCKS_PER_PAGE:].normal_(generator=gen)
    table.copy_(torch.arange(late, late + TABLE, device="cuda"))
    compare("over pages committed after the capture")
    # Decommit the middle of every layer (not what the table names), recommit.
    middle = (PAGE, LAYER_BYTES - 8 * PAGE)
    for i in range(LAYERS):
        rng.decommit(i * LAYER_BYTES + middle[0], middle[1])
    check("decommit part", rng.committed() == rng.nbytes - LAYERS * middle[1],
          "%d MiB committed" % (rng.committed() // MIB))
    compare("after a decommit of other pages")
    for i in range(LAYERS):
        rng.commit(i * LAYER_BYTES + middle[0], middle[1])
    for v in layers:
        v[BLOCKS_PER_PAGE:late].normal_(generator=gen)
    table.copy_(torch.arange(BLOCKS_PER_PAGE + 7, BLOCKS_PER_PAGE + 7 + TABLE, device="cuda"))
    compare("over pages decommitted and committed again")

    # Out of memory on commit: a clear error, nothing changed.
    torch.cuda.synchronize()
    free = torch.cuda.mem_get_info()[0]
    huge = g.reserve(free + 2 * GIB, tag="kv_cache")
    ok, detail = False, "no error"
    try:
        huge.commit()
    except gmr.OutOfMemoryError as e:
        torch.cuda.synchronize()
        ok = huge.committed() == 0 and torch.cuda.mem_get_info()[0] == free
        detail = "%s; committed %d bytes, device free %d -> %d bytes" % (
            str(e)[:160], huge.committed(), free, torch.cuda.mem_get_info()[0])
    huge.free()
    check("out of memory on commit changes nothing", ok, detail)
    compare("after the failed commit")

    # Sleep with the KV cache backed up, wake: the same blocks, the same graph.
    saved = [s.cpu() for s in state()]
    g.sleep(backup=["kv_cache", "inputs", "untagged"])
    asleep = rng.info()
    g.wake()
    check("sleep and wake keep the range", asleep["asleep"] and asleep["saved"] and
          all(sc._same(a, b.cpu()) for a, b in zip(saved, state())),
          "asleep %s, saved %s; the table's blocks bit-identical after wake"
          % (asleep["asleep"], asleep["saved"]))
    compare("after sleep and wake")

    del graph, out, whole, layers, table, x, saved, v  # v: the last layer, from the loops above
    gc.collect()
    torch.cuda.synchronize()
    views = rng.live_views()
    try:
        rng.free()
        freed = "freed"
    except RuntimeError as e:  # a view still alive: leave the range (the process ends)
        freed = str(e)
    check("free the range", views == 0 and freed == "freed",
          "%d views alive at the free; %s" % (views, freed))
    return {"checks": checks}


def part_unmap(args):
    import serving_check as sc  # noqa: PLC0415
    torch, g = sc._torch()
    checks = []
    torch.cuda.init()
    spin = 200_000_000  # cycles: about 0.1 s on an H100's clock
    side = torch.cuda.Stream()

    # Decommit while a kernel writing the page is still queued behind a spin.
    rng = g.reserve(4 * PAGE, tag="kv_cache")
    rng.commit()
    v = rng.tensor(torch.float32)
    v.zero_()
    torch.cuda.synchronize()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(spin)
        v[PAGE // 4:].fill_(7.0)  # writes pages 1..3
    pending = not side.query()
    rng.decommit(PAGE, PAGE)  # must wait for the write before unmapping page 1
    done = side.query()
    torch.cuda.synchronize()  # a fault would be reported here (or end the process)
    rng.commit(PAGE, PAGE)
    checks.append({"check": "decommit waits for a kernel still writing the page",
                   "ok": done, "detail": "kernel pending when decommit was called: %s; done "
                   "when it returned: %s; no fault" % (pending, done)})
    del v
    gc.collect()
    rng.free()

    # Sleep while a kernel writing a backed-up tensor is still queued.
    with g.region("weights"):
        w = torch.zeros(64 * MIB // 4, device="cuda")
    torch.cuda.synchronize()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(spin)
        w.fill_(3.0)
    pending = not side.query()
    g.sleep(backup=["weights"])
    g.wake()
    ok = bool((w == 3.0).all().item())
    checks.append({"check": "sleep waits for a kernel still writing the memory", "ok": ok,
                   "detail": "kernel pending when sleep was called: %s; the late write is in "
                   "the backup: %s" % (pending, ok)})
    del w
    return {"checks": checks}
