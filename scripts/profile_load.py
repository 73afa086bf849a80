#!/usr/bin/env python3
"""Where the load of an index goes before the first batch: each step of a single process's load timed.

    scripts/profile_load.py REFERENCE INDEX_DIR [--device cpu|cuda]

Steps: load_index (memory maps and the sampled checks), the reference's codes unpacked from the 2-bit
words (mapper/alphabet.py unpack_2bit, on every core), and with --device cuda the CUDA context, each
upload (offsets, positions, codes: mapper/device/cuda.py copy_into) and the backend's whole load; then the
reference files the render processes read (mapper/render.py). Why a script: the whole-genome load (issue
#17: at most 10 s) and each `--gpus` worker's (issue #22) are made of these steps, and the run summary
gives only their sum.
"""
import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(label, step):
    t = time.perf_counter()
    result = step()
    print(f"{label}: {time.perf_counter() - t:.2f} s", flush=True)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("reference")
    p.add_argument("index_dir")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = p.parse_args()
    from mapper.index import load_index
    from mapper.render import _write_reference
    index = timed("load_index", lambda: load_index(args.reference, args.index_dir))
    codes = timed(f"unpack the reference ({index.reference.size / 1e9:.2f} G bases)", lambda: index.reference.codes)
    if args.device == "cuda":
        from mapper.backends import get_backend
        from mapper.device import cuda
        timed("CUDA context", cuda.driver)
        for name, array in (("offsets", index.offsets), ("positions", index.positions), ("codes", codes)):
            t = time.perf_counter()
            cuda.upload(array).free()
            seconds = time.perf_counter() - t
            print(f"upload {name}: {array.nbytes / 1e9:.2f} GB in {seconds:.2f} s ({array.nbytes / 1e9 / seconds:.1f} GB/s)")
        timed("backend load (the index resident)", lambda: get_backend("cuda").load(index))
    folder = tempfile.mkdtemp(prefix="gkmap-profile-load-")
    try:
        timed("render processes' reference files", lambda: _write_reference(folder, index.reference))
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
