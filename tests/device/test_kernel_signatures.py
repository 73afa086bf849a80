"""Kernel launches are typed by each kernel's signature (mapper/device/signatures.py): every kernel of
kernels/*.cu has one, a launch with the wrong number of arguments fails naming the kernel, and plain ints
reach 64-bit and unsigned parameters intact on the host layer."""
import numpy as np
import pytest

from conftest import ROOT
from mapper.device import host, signatures

SOURCE = """
#define PAIR_PARAMS const long long *a, \\
    unsigned int *b
extern "C" __global__ void demo(const uint8_t *__restrict__ p, const int n, u32 m, const long long big,
                                PAIR_PARAMS, u64 wide) {}
"""


def test_every_kernel_has_a_signature():
    kernels = 0
    for path in sorted((ROOT / "kernels").glob("*.cu")):
        text = path.read_text()
        for match in signatures.KERNEL.finditer(text):
            kinds = signatures.signature(text, match.group(1))
            assert kinds and set(kinds) <= set("PiIqQ"), (path.name, match.group(1), kinds)
            kernels += 1
    assert kernels > 40


def test_kinds_macros_and_names():
    assert signatures.signature(SOURCE, "demo") == "PiIqPPQ"
    text = SOURCE.split("void demo(")[1].split(")")[0]
    assert [name for _, name in signatures.parameters(text, SOURCE)] == ["p", "n", "m", "big", "a", "b", "wide"]


def test_unknown_types_and_wrong_counts_are_refused():
    with pytest.raises(signatures.KernelError, match="kernel odd: no launch rule .*'float'"):
        signatures.signature('extern "C" __global__ void odd(float x) {}', "odd")
    with pytest.raises(signatures.KernelError, match="kernel demo takes 7 arguments"):
        signatures.values("PiIqPPQ", [0, 1, 2], "demo")
    assert signatures.values("iIQ", [np.int64(-1), -1, -1], "demo") == [-1, 2**32 - 1, 2**64 - 1]


def test_host_launch_types_its_arguments():
    """take_i32 (out[k * n + i] = src[k * n_src + index[i]]) run with plain ints for its long long and int
    parameters, and refused with an argument missing."""
    kernel = host.function("gather.cu", "take_i32")
    assert kernel.kinds == "PqPqiP"
    src, index, out = np.arange(20, dtype=np.int32), np.array([7, 2, 9], dtype=np.int64), np.zeros(6, np.int32)
    host.launch(kernel, 6, src, 5, index, 3, 2, out)
    assert out.tolist() == [7, 2, 9, 12, 7, 14]
    with pytest.raises(signatures.KernelError, match="kernel take_i32 takes 6 arguments"):
        host.launch(kernel, 1, src, 5)
