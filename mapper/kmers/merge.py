"""The second phase: merge sorted runs bin by bin into one table (out of core: one bin in memory at a time).

In : runs, each holding sorted distinct keys with counts and answering `read_bin(b)` -> (keys uint64
     [C, n], counts uint64 [n]): the runs spilled to the temporary folder (store.KmerTable) and the runs
     still in memory (the cpu backend's BinnedRun; the cuda backend merges on the device instead:
     gpu.CudaBackend.merge_pieces)
Out: bin by bin, the union of the runs' bins with the counts of equal keys added and the k-mers below
     min_count left out, written to a store.TableWriter.

A bin present in one run only is copied as it is; otherwise its slices are concatenated and re-sorted
with their counts as weights (count.sort_count), which is the multiway merge.
"""
import numpy as np

from mapper.kmers.binning import bin_bits
from mapper.kmers.workers import in_order


def merge_runs(runs, writer, k, sort_count, min_count=1):
    """Write the merge of `runs` to `writer`, bin by bin; sort_count is the backend's (count.py). Each bin is
    read and merged by a task of the thread pool, a few bins ahead (workers.in_order), and written in
    order: the bins are independent, and their reads, decoding and sorts leave the GIL."""
    def merged(b):
        parts = [part for part in (run.read_bin(b) for run in runs) if len(part[1])]
        if not parts:
            return None
        if len(parts) == 1:
            keys, counts = parts[0]
        else:
            keys, counts = sort_count(np.concatenate([p[0] for p in parts], axis=1),
                                      np.concatenate([p[1] for p in parts]))
        if min_count > 1:
            keep = counts >= np.uint64(min_count)
            keys, counts = keys[:, keep], counts[keep]
        return keys, counts

    bins = range(2 ** bin_bits(k))
    for b, result in zip(bins, in_order(merged, bins)):
        if result is not None:
            writer.write_bin(b, *result)
