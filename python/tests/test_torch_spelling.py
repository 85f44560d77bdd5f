"""The seeds' Python, as PyTorch spells it, against accel: each printed text is what PyTorch
2.x prints for the same code (the rules of PyTorch's `_tensor_str`: 4 decimals, `1.` for whole
floats, scientific past a 1000x spread, columns right-aligned, 80-character lines, edges only
past 1000 elements), with `accel.` where PyTorch writes `torch.`; values against NumPy."""

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import accelkit as accel

from test_accel import skip


PRINTED = [
    (lambda m: m.tensor([1.0, 2.0, 3.0]), "tensor([1., 2., 3.])"),
    (lambda m: m.tensor([[1, 2], [3, 4]]), "tensor([[1, 2],\n        [3, 4]])"),
    (lambda m: m.matmul(m.tensor([[1, 1], [2, 2]]), m.tensor([[5, 6], [7, 8]])),
     "tensor([[12, 14],\n        [24, 28]])"),
    (lambda m: m.tensor([0.1234567, 2.5]), "tensor([0.1235, 2.5000])"),
    (lambda m: m.tensor([-1.5, 20.25]), "tensor([-1.5000, 20.2500])"),
    (lambda m: m.tensor([1e-5, 1.0]), "tensor([1.0000e-05, 1.0000e+00])"),
    (lambda m: m.tensor([1.0, 2000.0]), "tensor([1.0000e+00, 2.0000e+03])"),
    (lambda m: m.tensor([1.5, 2.0], dtype=m.float64),
     "tensor([1.5000, 2.0000], dtype=accel.float64)"),
    (lambda m: m.tensor([1, 2], dtype=m.int32), "tensor([1, 2], dtype=accel.int32)"),
    (lambda m: m.tensor(3.5), "tensor(3.5000)"),
    (lambda m: m.tensor(5), "tensor(5)"),
    (lambda m: m.tensor([]), "tensor([])"),
    (lambda m: m.zeros(2, 3), "tensor([[0., 0., 0.],\n        [0., 0., 0.]])"),
    (lambda m: m.ones(2, dtype=m.int64), "tensor([1, 1])"),
    (lambda m: m.full((2,), 7), "tensor([7, 7])"),
    (lambda m: m.arange(10), "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"),
    (lambda m: m.arange(30),
     "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
     "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])"),
    (lambda m: m.arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (lambda m: m.zeros(100, 100),
     "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        ...,\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.]])"),
    (lambda m: m.ones(2, 1, 2),
     "tensor([[[1., 1.]],\n\n        [[1., 1.]]])"),
    (lambda m: m.tensor([[1, 2], [3, 4]]) / 2, "tensor([[0.5000, 1.0000],\n        [1.5000, 2.0000]])"),
    (lambda m: m.tensor([[1, 2], [3, 4]]) + 1, "tensor([[2, 3],\n        [4, 5]])"),
    (lambda m: m.tensor([1, 2]) + 0.5, "tensor([1.5000, 2.5000])"),
    (lambda m: 10 - m.tensor([1, 2]), "tensor([9, 8])"),
    (lambda m: 1 / m.tensor([2.0, 4.0]), "tensor([0.5000, 0.2500])"),
    (lambda m: -m.tensor([1.0, -2.0]), "tensor([-1.,  2.])"),
    (lambda m: m.tensor([1.0, 2.0]) * m.tensor([[1.0], [3.0]]),
     "tensor([[1., 2.],\n        [3., 6.]])"),
    (lambda m: m.tensor([1.0, 2.0], dtype=m.float64) + m.tensor([1.0, 1.0]),
     "tensor([2., 3.], dtype=accel.float64)"),
    (lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]).sum(), "tensor(10.)"),
    (lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]).mean(0), "tensor([2., 3.])"),
    (lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]).t(), "tensor([[1., 3.],\n        [2., 4.]])"),
    (lambda m: m.arange(6).reshape(2, -1), "tensor([[0, 1, 2],\n        [3, 4, 5]])"),
    (lambda m: m.arange(24).reshape(2, 3, 4)[1], "tensor([[12, 13, 14, 15],\n        [16, 17, 18, 19],\n        [20, 21, 22, 23]])"),
    (lambda m: m.arange(24).reshape(2, 3, 4)[0, 1:3, ::2], "tensor([[ 4,  6],\n        [ 8, 10]])"),
    (lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]])[:, 1], "tensor([2., 4.])"),
    (lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]])[-1, -1], "tensor(4.)"),
]


@pytest.mark.parametrize("make, printed", PRINTED)
def test_printed_as_pytorch_prints(make, printed):
    assert str(make(accel)) == printed
    assert repr(make(accel)) == printed


def torch_or_skip():
    """PyTorch, where it is installed (the test command does not install it: its Linux wheels
    bring CUDA's, gigabytes); skipped with the reason, or failing under ACCEL_TEST_REQUIRE=torch."""
    try:
        import torch
    except ImportError as e:
        skip("torch", f"PyTorch is not installed ({e}): the texts above are PyTorch 2.x's, "
                      "transcribed")
    return torch


def test_pytorch_itself_prints_the_same():
    torch = torch_or_skip()
    for make, printed in PRINTED:
        assert str(make(torch)) == printed.replace("accel.", "torch.")


def test_the_seeds_device_script_prints_the_same_under_pytorch():
    torch_or_skip()
    if accel.cuda.is_available():
        skip("standin", "this machine has a GPU: the script's .cuda() lines differ")
    under_torch = run_seed(SEED_DEVICES.replace("import accelkit as torch", "import torch"))
    assert under_torch.returncode == 0, under_torch.stderr
    assert run_seed(SEED_DEVICES).stdout == under_torch.stdout


def test_what_a_tensor_says_about_itself():
    x = accel.tensor([[1, 2], [3, 4]])
    assert x.is_cuda is False and x.is_cpu
    assert x.device == "cpu" and x.device.type == "cpu" and x.device.index is None
    assert str(x.device) == "cpu" and repr(x.device) == "device(type='cpu')"
    assert x.dtype is accel.int64 and repr(x.dtype) == "accel.int64"
    assert accel.tensor([1.0]).dtype is accel.float32
    assert x.shape == (2, 2) and x.size() == (2, 2) and x.size(1) == 2
    assert repr(x.shape) == "accel.Size([2, 2])"
    assert x.ndim == 2 and x.dim() == 2 and x.numel() == 4 and len(x) == 2
    assert x.tolist() == [[1, 2], [3, 4]] and isinstance(x.tolist()[0][0], int)
    assert accel.tensor([2.5]).item() == 2.5 and accel.tensor(7).item() == 7
    assert float(accel.tensor(1.5)) == 1.5 and int(accel.tensor(3)) == 3
    assert f"{accel.tensor(1.23456):.2f}" == "1.23"
    assert accel.tensor([1.5, 2.5], dtype=accel.bfloat16).tolist() == [1.5, 2.5]
    assert accel.tensor([1.5, 2.5], dtype=accel.float16).tolist() == [1.5, 2.5]
    assert [r.tolist() for r in x] == [[1, 2], [3, 4]]


def test_indexing_reads_as_numpy_and_pytorch_index():
    a = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    x = accel.tensor(a)
    for key in [0, -1, (1, 2), (0, slice(1, 3)), (slice(None), 1), (Ellipsis, -1),
                (0, slice(None), slice(None, None, 2)), (slice(5, 9),), (1, 2, 4),
                (Ellipsis,), (slice(None), slice(None), slice(1, 4, 2))]:
        got = x[key]
        values = np.array(got.tolist(), dtype=np.float32).reshape(got.shape)
        assert got.shape == a[key].shape and np.array_equal(values, a[key]), key
        assert got.dtype is accel.float32
    for d in accel.devices():
        if d.type in ("xla", "wgpu"):
            y = x.to(d)[1, :, 2]
            assert y.device == d and y.cpu().tolist() == a[1, :, 2].tolist()
            break
    with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2") as e:
        x[2]
    assert isinstance(e.value, accel.AccelError)
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 3"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        accel.tensor(1.0)[0]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(TypeError, match="does not support item assignment") as e:
        x[0] = 1
    assert isinstance(e.value, accel.AccelError)


def test_devices_are_objects_equal_to_their_names():
    d = accel.device("cuda:1")
    assert (d.type, d.index) == ("cuda", 1) and d == "cuda:1" and str(d) == "cuda:1"
    assert repr(d) == "device(type='cuda', index=1)"
    assert accel.device("cuda") != accel.device("cuda:0")  # as PyTorch's
    assert accel.device("xla", 0) == "xla:0" and accel.device(accel.device("mps")) == "mps"
    assert {accel.device("cpu"): 1}[accel.device("cpu")] == 1
    assert accel.Device is accel.device
    with pytest.raises(RuntimeError, match="tpu"):
        accel.device("tpu:0")


def test_values_against_numpy():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    ta, tb = accel.tensor(a), accel.tensor(b)
    assert np.allclose((ta @ tb).numpy(), a @ b, rtol=1e-5, atol=1e-6)
    assert np.allclose(accel.matmul(ta, tb).numpy(), a @ b, rtol=1e-5, atol=1e-6)
    assert np.allclose((ta * 2 - 1).numpy(), a * 2 - 1)
    assert np.allclose((ta / ta.exp()).numpy(), a / np.exp(a), rtol=1e-5)
    assert np.allclose(ta.relu().numpy(), np.maximum(a, 0))
    assert np.allclose(ta.sum(1).numpy(), a.sum(1), rtol=1e-5)
    assert np.allclose(ta.max(0).numpy(), a.max(0))
    assert np.allclose(ta.transpose(0, 1).numpy(), a.T)
    assert np.allclose(ta.T.numpy(), a.T)
    # numpy() shares the tensor's memory, read-only (accel's tensors do not change).
    n = ta.numpy()
    assert n.__array_interface__["data"][0] == ta.__array_interface__["data"][0]
    assert not n.flags.writeable


def test_random_tensors_follow_the_seed_and_the_shape():
    accel.manual_seed(42)
    a = accel.randn(3, 4)
    accel.manual_seed(42)
    b = accel.randn((3, 4))
    assert a.shape == (3, 4) and a.dtype is accel.float32 and a.tolist() == b.tolist()
    accel.manual_seed(1)
    big = accel.randn(100_000).numpy()
    assert abs(big.mean()) < 0.02 and abs(big.std() - 1) < 0.02
    u = accel.rand(100_000, dtype=accel.float64).numpy()
    assert u.dtype == np.float64 and 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01


def test_errors_are_what_pytorch_raises_and_are_accel_errors():
    a = accel.tensor([[1.0, 2.0]])
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(1x2 and 1x2\)") as e:
        a @ a
    assert isinstance(e.value, accel.AccelError)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)") as e:
        a.sum(5)
    assert isinstance(e.value, accel.AccelError)
    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1 \\(got 1\\)") as e:
        accel.tensor([[1, 2], [3]])
    assert isinstance(e.value, accel.AccelError)
    with pytest.raises(TypeError) as e:
        accel.tensor(["a"])
    assert isinstance(e.value, accel.AccelError)
    with pytest.raises(RuntimeError, match="shape '\\[3\\]' is invalid for input of size 2"):
        a.reshape(3)
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        a.item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)
    with pytest.raises(RuntimeError, match="same dtype"):
        accel.matmul(a, accel.tensor([[1.0], [2.0]], dtype=accel.float64))
    # No Rust spelling reaches Python.
    for bad in (lambda: accel.tensor([1.0]).to("tpu"), lambda: a @ a, lambda: a.sum(5)):
        with pytest.raises(accel.AccelError) as e:
            bad()
        assert "&" not in str(e.value) and "DType::" not in str(e.value)


def test_mixed_devices_are_refused_in_pytorch_s_words_with_the_python_fix():
    others = [d for d in accel.devices() if d.type in ("xla", "wgpu")]
    if not others:
        skip("xla", "no device besides the CPU to mix with")
    other = others[0]
    a = accel.tensor([[1.0, 2.0]]).to(other)
    b = accel.tensor([[1.0], [2.0]])
    for f in (lambda: a @ b, lambda: accel.matmul(a, b), lambda: a + b.t()):
        with pytest.raises(RuntimeError) as e:
            f()
        msg = str(e.value)
        assert msg.startswith(f"Expected all tensors to be on the same device, but found at "
                              f"least two devices, {other} and cpu!"), msg
        assert f'.to("{other}")' in msg and isinstance(e.value, accel.AccelError)
    assert (a @ b.to(other)).cpu().tolist() == [[5.0]]
    assert (a.cpu() @ b).tolist() == [[5.0]]


def test_moving_between_devices():
    x = accel.tensor([[1, 2], [3, 4]])
    assert x.to("cpu") is x and x.cpu() is x
    assert x.to(accel.float64).dtype is accel.float64
    assert x.to("cpu", accel.float16).dtype is accel.float16
    assert x.to(device="cpu", dtype=accel.float32).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    for d in accel.devices():
        if d.type == "cpu":
            continue
        y = accel.tensor([[1.0, 2.0], [3.0, 4.0]], device=d)
        assert y.device == d and y.to("cpu").tolist() == [[1.0, 2.0], [3.0, 4.0]]
        assert str(y) == f"tensor([[1., 2.],\n        [3., 4.]], device='{d}')"
        with pytest.raises(TypeError, match="Use Tensor.cpu\\(\\)"):
            y.numpy()
    if not accel.cuda.is_available():
        with pytest.raises(accel.AccelError, match="cuda"):
            x.cuda()


def test_linear_moves_between_devices_and_computes_x_w_t_plus_b():
    accel.manual_seed(3)
    layer = accel.nn.Linear(3, 2)
    assert repr(layer) == "Linear(in_features=3, out_features=2, bias=True)"
    assert layer.weight.shape == (2, 3) and layer.bias.shape == (2,)
    assert len(list(layer.parameters())) == 2 and layer.device == "cpu"
    bound = 1 / math.sqrt(3)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound and np.abs(w).max() > 0
    x = accel.randn(4, 3)
    assert np.allclose(layer(x).numpy(), x.numpy() @ w.T + b, rtol=1e-5, atol=1e-6)
    assert np.allclose(layer(accel.tensor([1.0, 0.0, 0.0])).numpy(), w[:, 0] + b)
    assert layer.to("cpu") is layer and layer.cpu() is layer
    for d in accel.devices():
        if d.type in ("xla", "wgpu"):
            layer.to(d)
            assert layer.device == d and layer.weight.device == d
            y = layer(x.to(d)).cpu().numpy()
            assert np.allclose(y, x.numpy() @ w.T + b, rtol=1e-4, atol=1e-5)
            layer.cpu()
            break
    assert accel.nn.Linear(3, 2, bias=False).bias is None


def test_cuda_mps_xla_and_accelerator_answer_as_torch_s_do():
    n = accel.cuda.device_count()
    assert accel.cuda.is_available() == (n > 0)
    # Counters of accel's allocator, as the Rust API reports them.
    assert accel.cuda.memory_allocated() >= 0 and accel.cuda.memory_reserved() >= 0
    if n == 0:
        assert accel.cuda.memory_allocated() == 0 and accel.cuda.max_memory_allocated() == 0
        with pytest.raises(accel.AccelError):
            accel.cuda.current_device()
        with pytest.raises(accel.AccelError):
            accel.cuda.get_device_name(0)
    else:
        assert accel.cuda.current_device() == 0
        assert accel.cuda.get_device_name(0)
    accel.cuda.empty_cache()
    assert accel.mps.is_built() == (sys.platform == "darwin")
    assert accel.backends.mps.is_available() == accel.mps.is_available()
    best = accel.best()
    assert accel.accelerator.is_available() == (best != "cpu")
    cur = accel.accelerator.current_accelerator()
    assert (cur is None) == (best == "cpu")
    if cur is not None:
        assert cur.type == best.type and accel.accelerator.device_count() >= 1
    assert accel.accelerator.current_device_index() == 0
    assert accel.accelerator.memory.memory_allocated() >= 0
    assert accel.accelerator.memory_allocated() == accel.accelerator.memory.memory_allocated()
    xla = accel.xla.devices()
    assert all(d.type == "xla" for d in xla)
    if xla:
        assert accel.xla.device() == "xla:0" and accel.xla.device().type == "xla"
        accel.xla.sync()
    else:
        with pytest.raises(accel.AccelError):
            accel.xla.device()
    accel.synchronize("cpu")


def test_the_allocator_counts_what_tensors_hold():
    cpu = "cpu"
    before = accel.accelerator.memory.memory_allocated(cpu)
    x = accel.zeros(1024, 256)  # 1 MiB of f32
    during = accel.accelerator.memory.memory_allocated(cpu)
    assert during - before >= 1 << 20
    del x
    assert accel.accelerator.memory.memory_allocated(cpu) <= during - (1 << 20)


SEED_DEVICES = '''
import accelkit as torch
print(torch.cuda.is_available())
print(torch.cuda.device_count())
print(f"Metal Performance Shaders (MPS)를 지원하도록 build 되었음: {torch.backends.mps.is_built()}")
print(f"현재 mps 가속을 사용할 수 있음: {torch.backends.mps.is_available()}")
devices = []
if torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        devices.append(f"cuda:{i}")
if torch.backends.mps.is_available():
    devices.append("mps")
devices.append("cpu")
print(f"Available devices: {devices}")
device = torch.device(devices[0])
x = torch.tensor([1.0, 2.0, 3.0])
x = x.to(device)
print(x)
print(x.device)
data = [
    [1, 2],
    [3, 4]
]
x = torch.tensor(data)
print("초기 상태:", x.is_cuda)
b = torch.tensor([
    [5, 6],
    [7, 8]
])
a = torch.tensor([
    [1, 1],
    [2, 2]
])
print(torch.matmul(a.cpu(), b))
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.tensor([[1, 2], [3, 4]], device=device)
print(x.device)
print(f"Allocated: {torch.cuda.memory_allocated() / 1024**2:.2f} MB")
print(f"Reserved : {torch.cuda.memory_reserved() / 1024**2:.2f} MB")
'''

# What PyTorch (CPU build) prints for the script above.
SEED_DEVICES_PRINTED = '''False
0
Metal Performance Shaders (MPS)를 지원하도록 build 되었음: False
현재 mps 가속을 사용할 수 있음: False
Available devices: ['cpu']
tensor([1., 2., 3.])
cpu
초기 상태: False
tensor([[12, 14],
        [24, 28]])
cpu
Allocated: 0.00 MB
Reserved : 0.00 MB
'''

SEED_MATMUL = '''
import time
import accelkit as torch
N = 256
num_iter = 3
A_cpu = torch.randn(N, N)
B_cpu = torch.randn(N, N)
if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    try:
        import accelkit.xla as torch_xla
        device = torch_xla.device()
    except Exception:
        device = torch.device("cpu")
A_gpu = A_cpu.to(device)
B_gpu = B_cpu.to(device)
def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()
    elif device.type == "xla":
        torch_xla.sync()
for _ in range(3):
    C_cpu = A_cpu @ B_cpu
start = time.perf_counter()
for _ in range(num_iter):
    C_cpu = A_cpu @ B_cpu
cpu_time = (time.perf_counter() - start) / num_iter
for _ in range(3):
    C_gpu = A_gpu @ B_gpu
synchronize(device)
start = time.perf_counter()
for _ in range(num_iter):
    C_gpu = A_gpu @ B_gpu
synchronize(device)
gpu_time = (time.perf_counter() - start) / num_iter
print(f"CPU average: {cpu_time:.6f} sec")
print(f"{device} average: {gpu_time:.6f} sec")
print(f"Speedup: {cpu_time / gpu_time:.2f}x")
diff = (C_cpu - C_gpu.cpu()).numpy()
print(f"max abs difference: {abs(diff).max():.1e}")
'''


def run_seed(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONIOENCODING": "utf-8"})


def test_the_seeds_device_script_prints_what_pytorch_prints():
    if accel.cuda.is_available() or accel.mps.is_available():
        skip("standin", "this machine has a GPU: PyTorch's lines here are a CPU machine's")
    r = run_seed(SEED_DEVICES)
    assert r.returncode == 0, r.stderr
    assert r.stdout == SEED_DEVICES_PRINTED


def test_the_seeds_matmul_script_runs_on_the_accelerator_it_picks():
    r = run_seed(SEED_MATMUL)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("CPU average: ") and lines[0].endswith(" sec")
    assert lines[2].startswith("Speedup: ") and lines[2].endswith("x")
    xla = accel.xla.devices()
    picked = "xla:0" if xla and not accel.cuda.is_available() else None
    if picked:
        assert lines[1].startswith("xla:0 average: "), lines
    # Both multiplied the same operands: the results agree to f32 rounding.
    assert float(lines[3].split(": ")[1]) < 1e-3, lines
