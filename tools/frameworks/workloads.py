"""The real-client workloads of tools/frameworks/bench.py. Models come from
configs with random weights (nothing is downloaded); every workload seeds its
random numbers, so the same workload computes the same numbers under every
allocator (up to the non-determinism of atomics in some backward kernels).

Each workload is a function (torch, meter, args) -> dict with
  steps       timed steps (after `warmup` untimed ones)
  loss_first  loss (or output checksum) of the first timed step
  loss_last   loss (or checksum) of the last timed step
and calls meter.step(fn) for each step, which times it and samples memory.
"""

import random


def gpt2_train(torch, meter, args):
    """GPT-2 (124M, GPT2Config()) training: batch 8x512, bf16 autocast, AdamW."""
    from transformers import GPT2Config, GPT2LMHeadModel  # noqa: PLC0415

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(1)
    steps = args.warmup + args.steps
    batches = [torch.randint(0, model.config.vocab_size, (8, 512), generator=gen)
               for _ in range(steps)]
    losses = []

    def step(i):
        ids = batches[i].cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())

    for i in range(steps):
        meter.step(lambda: step(i), timed=i >= args.warmup)
    timed = [float(x) for x in losses[args.warmup:]]
    return {"steps": args.steps, "loss_first": timed[0], "loss_last": timed[-1]}


def resnet50_train(torch, meter, args):
    """ResNet-50 (torchvision, random weights) training: batch 64, bf16 autocast, SGD."""
    import torchvision  # noqa: PLC0415

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(2)
    images = torch.randn(64, 3, 224, 224, generator=gen)
    labels = torch.randint(0, 1000, (64,), generator=gen)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []

    def step():
        x = images.cuda(non_blocking=True)
        y = labels.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())

    for i in range(args.warmup + args.steps):
        meter.step(step, timed=i >= args.warmup)
    timed = [float(x) for x in losses[args.warmup:]]
    return {"steps": args.steps, "loss_first": timed[0], "loss_last": timed[-1]}


def bert_infer(torch, meter, args):
    """BERT-base (BertConfig()) fp16 inference; each step a random batch 1-32 and
    sequence length 16-512 (the dynamic-shape case that fragments caches)."""
    from transformers import BertConfig, BertModel  # noqa: PLC0415

    torch.manual_seed(0)
    model = BertModel(BertConfig()).cuda().half().eval()
    rng = random.Random(3)
    steps = args.warmup + args.steps * 2
    shapes = [(rng.randint(1, 32), rng.randint(16, 512)) for _ in range(steps)]
    gen = torch.Generator().manual_seed(4)
    inputs = [torch.randint(0, model.config.vocab_size, s, generator=gen) for s in shapes]
    sums = []

    def step(i):
        with torch.inference_mode():
            ids = inputs[i].cuda(non_blocking=True)
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            sums.append(out.float().mean())

    for i in range(steps):
        meter.step(lambda: step(i), timed=i >= args.warmup)
    timed = [float(x) for x in sums[args.warmup:]]
    return {"steps": steps - args.warmup, "loss_first": timed[0], "loss_last": timed[-1]}


def side_stream(torch, meter, args):
    """Producer on the main stream, consumer on a side stream: each tensor is
    made on the main stream, used on the side stream, marked with
    Tensor.record_stream(side) and dropped on the main stream while the side
    stream may still read it. Correct only if the allocator honours
    record_stream; the checksum catches reuse too early."""
    torch.manual_seed(0)
    side = torch.cuda.Stream()
    rng = random.Random(5)
    sizes = [rng.choice([1, 4, 16, 64]) << 18 for _ in range(400)]  # 1-64 MiB of float32
    results = []

    def step(i):
        n = sizes[i]
        x = torch.full((n,), float(i % 7 + 1), device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(4):  # keep the side stream busy while x is freed
                y = x * 2.0
            results.append(y.sum())
        x.record_stream(side)
        del x
        # The next iteration's tensor may reuse x's memory on the main stream.

    steps = len(sizes)
    for i in range(steps):
        meter.step(lambda: step(i), timed=i >= args.warmup)
    torch.cuda.synchronize()
    expected = [2.0 * (i % 7 + 1) * sizes[i] for i in range(steps)]
    got = [float(r) for r in results]
    bad = sum(1 for g, e in zip(got, expected) if abs(g - e) > 1e-3 * e)
    return {"steps": steps - args.warmup, "loss_first": got[args.warmup],
            "loss_last": got[-1], "wrong_results": bad}


def graph_replay(torch, meter, args, pool=None):
    """A 4-layer MLP (4096 wide, batch 512, bf16) captured with torch.cuda.graph
    and replayed 1,000 times with new inputs; the last output is checked
    against eager execution."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(4) for m in (
        torch.nn.Linear(4096, 4096), torch.nn.GELU())]).cuda().to(torch.bfloat16)
    static_in = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm), torch.no_grad():
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad():
        if pool is None:
            with torch.cuda.graph(graph):
                static_out = model(static_in)
        else:
            with torch.cuda.graph(graph, pool=pool):
                static_out = model(static_in)
    gen = torch.Generator(device="cuda").manual_seed(6)
    replays = 1000
    sums = []

    def step():
        static_in.copy_(torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16,
                                    generator=gen))
        graph.replay()
        sums.append(static_out.float().sum())

    for i in range(replays):
        meter.step(step, timed=True, sample_memory=(i % 100 == 99))
    with torch.no_grad():
        eager = model(static_in)
    diff = float((eager.float() - static_out.float()).abs().max())
    result = {"steps": replays, "loss_first": float(sums[0]), "loss_last": float(sums[-1]),
              "max_abs_diff_vs_eager": diff}
    del graph
    return result


def cupy_mix(cupy, meter, args):
    """CuPy: FFTs, matrix products and elementwise work on arrays of 1-256 MiB
    with random sizes (CuPy's own pool and gmr see the same sequence)."""
    rng = random.Random(7)
    cupy.random.seed(0)
    sums = []
    plan = [(rng.choice(["fft", "matmul", "elementwise"]), rng.choice([1, 4, 16, 64, 256]))
            for _ in range(args.warmup + 300)]

    def step(kind, mib):
        n = (mib << 20) // 8
        if kind == "fft":
            a = cupy.random.random(n).astype(cupy.complex64)
            r = cupy.fft.fft(a).real.sum()
        elif kind == "matmul":
            k = max(64, int((n // 2) ** 0.5))
            a = cupy.random.random((k, k), dtype=cupy.float32)
            r = (a @ a).sum()
        else:
            a = cupy.random.random(n)
            r = (cupy.sin(a) * 2 + a).sum()
        sums.append(r)

    for i, (kind, mib) in enumerate(plan):
        meter.step(lambda: step(kind, mib), timed=i >= args.warmup)
    timed = [float(x) for x in sums[args.warmup:]]
    return {"steps": len(timed), "loss_first": timed[0], "loss_last": timed[-1]}


TORCH_WORKLOADS = {
    "gpt2_train": gpt2_train,
    "resnet50_train": resnet50_train,
    "bert_infer": bert_infer,
    "side_stream": side_stream,
    "graph_replay": graph_replay,
}
