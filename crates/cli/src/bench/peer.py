"""One workload timed in PyTorch or numpy as `accel bench` times it, for `accel bench --compare
torch|numpy`: warm-ups, then timed iterations, each one synchronised (PyTorch's CUDA work
included) and measured on its own; the median is kept. Run by accel in a fresh process
(`python3 -c` this text, the job as JSON in argv[1]); prints one line of JSON: what the
libraries are (job "describe"), or {"median_s", "iterations"}, or {"error"}.
"""
import json
import statistics
import sys
import time


def describe():
    """Each library's version and what computes in it, or why it does not import."""
    out = {}
    try:
        import torch
        threads = torch.get_num_threads()
        blas = "MKL" if torch.backends.mkl.is_available() else "no MKL"
        cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
        out["torch"] = {"version": torch.__version__,
                        "detail": f"{blas}, {threads} threads, {cuda} CUDA devices"}
    except Exception as e:  # noqa: BLE001 - any failure to import is the answer
        out["torch"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        import numpy
        detail = ""
        try:
            blas = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]
            detail = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
        except Exception:  # noqa: BLE001 - older numpy: the version alone
            pass
        out["numpy"] = {"version": numpy.__version__, "detail": detail}
    except Exception as e:  # noqa: BLE001
        out["numpy"] = {"error": f"{type(e).__name__}: {e}"}
    return out


def torch_work(job):
    import torch
    if job["device"].split(":")[0] not in ("cpu", "cuda"):
        raise RuntimeError(f"PyTorch has no counterpart of accel's {job['device']} here")
    dev = torch.device(job["device"])
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("this PyTorch sees no CUDA device (a CPU-only build?)")
        sync = lambda: torch.cuda.synchronize(dev)  # noqa: E731
    else:
        sync = lambda: None  # noqa: E731
    if job["kind"] == "copy":
        n = job["size"] // 4
        pinned = job["host"] == "pinned"
        host = lambda: torch.empty(n, dtype=torch.float32, pin_memory=pinned).fill_(1.0)  # noqa: E731
        here = lambda: torch.ones(n, dtype=torch.float32, device=dev)  # noqa: E731
        src, dst = {"h2d": (host, here), "d2h": (here, host), "d2d": (here, here)}[job["direction"]]
        s, d = src(), dst()
        return (lambda: d.copy_(s)), sync
    dt = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64}[job["dtype"]]
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        if dt in (torch.int32, torch.int64):
            return torch.randint(-8, 8, shape, generator=gen).to(dt).to(dev)
        return torch.randn(*shape, generator=gen).to(dt).to(dev)

    if job.get("tf32"):
        torch.backends.cuda.matmul.allow_tf32 = True
    return compute(job, rand, torch.matmul, torch.exp), sync


def numpy_work(job):
    import numpy as np
    if job["device"] != "cpu":
        raise RuntimeError("numpy computes on the CPU only")
    dtype = job.get("dtype", "f32")
    if dtype == "bf16":
        raise RuntimeError("numpy has no bf16")
    dt = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32,
          "i64": np.int64}[dtype]
    rng = np.random.default_rng(0)
    none = lambda: None  # noqa: E731
    if job["kind"] == "copy":
        n = job["size"] // 4
        s, d = np.ones(n, np.float32), np.empty(n, np.float32)
        return (lambda: np.copyto(d, s)), none

    def rand(*shape):
        if dt in (np.int32, np.int64):
            return rng.integers(-8, 8, shape).astype(dt)
        return rng.standard_normal(shape).astype(dt)

    return compute(job, rand, np.matmul, np.exp), none


def compute(job, rand, matmul, exp):
    """The call to time for a matmul or elementwise job, on operands from `rand(*shape)`."""
    if job["kind"] == "matmul":
        size, b = job["size"], job["batch"]
        m, n, k = job.get("m", size), job.get("n", size), job.get("k", size)
        lead = (b,) if b > 1 else ()
        x = rand(*lead, m, k)
        if job.get("b_transposed"):
            # Stored N x K and multiplied as a transposed view, as a Linear layer's weight.
            y = rand(*lead, n, k).swapaxes(-1, -2)
        else:
            y = rand(*lead, k, n)
        return lambda: matmul(x, y)
    x, y = rand(job["size"]), rand(job["size"])
    return {
        "add": lambda: x + y,
        "scale": lambda: x * 2,
        "exp": lambda: exp(x),
        "sum": lambda: x.sum(),
    }[job["op"]]


def timed(f, sync, warmup, iters, min_time_s, min_samples, max_samples):
    for _ in range(warmup):
        f()
        sync()
    samples = []
    while True:
        t = time.perf_counter()
        f()
        sync()
        samples.append(time.perf_counter() - t)
        if iters is not None:
            if len(samples) >= iters:
                break
        elif len(samples) >= min_samples and (sum(samples) >= min_time_s
                                               or len(samples) >= max_samples):
            break
    return samples


def main():
    job = json.loads(sys.argv[1])
    if job["kind"] == "describe":
        return describe()
    try:
        f, sync = (torch_work if job["lib"] == "torch" else numpy_work)(job)
        samples = timed(f, sync, job["warmup"], job["iters"], job["min_time_s"],
                        job["min_samples"], job["max_samples"])
    except Exception as e:  # noqa: BLE001 - the reason is the answer (out of memory, no device)
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
    return {"median_s": statistics.median(samples), "iterations": len(samples)}


print(json.dumps(main()))
