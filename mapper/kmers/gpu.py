"""The cuda backend's sort + run-length encoding (kernels/kmer_sort.cu), launched through PyCUDA.

pycuda is imported inside the functions, never at module load, so `import mapper` works without a GPU.
"""


def unavailable():
    """None when pycuda imports and a CUDA device is present; otherwise a one-line reason."""
    try:
        import pycuda.driver as driver
    except ImportError:
        return "pycuda is not installed (pip install 'gkmap[gpu]')"
    try:
        driver.init()
        if driver.Device.count() == 0:
            return "no CUDA GPU found"
    except driver.Error as e:
        return f"CUDA is not usable ({e})"
    return None
