"""Reading a k-mer table back: text dump, jellyfish-compatible histogram, and lookups.

dump:  one `KMER<TAB>COUNT` line per k-mer, in lexicographic order (bin by bin, a bin a pool thread), written
       by compiled kernels (dump_lines) or as one numpy byte matrix per slice of k-mers (numpy_lines): no
       per-line Python formatting.
histo: the lines of `jellyfish histo [-l LOW] [-h HIGH] [-i INC] [-f]`, `LABEL COUNT`: bucket i counts
       the k-mers whose count c has base + i INC <= c < base + (i + 1) INC, with base = LOW - INC when
       LOW > INC and 0 otherwise; counts below base go to the first bucket and counts >= HIGH + INC to
       the last (there are (HIGH + 2 INC - base) // INC buckets). Empty buckets are left out unless
       `full`. This is jellyfish 2.3's behaviour, checked against it in the tests.
query: `KMER<TAB>COUNT` per k-mer asked (0 when absent), the k-mer upper-cased and, in a canonical
       table, canonicalised, as `jellyfish query` prints it.
"""
import numpy as np

from mapper.device import host
from mapper.device.cuda import BLOCK
from mapper.kmers.binning import bin_of
from mapper.kmers.encode import BASES_PER_WORD, canonical_keys, keys_from_strings

# the four bases of each byte of a key, most significant first, as ASCII: QUADS[byte] = 4 letters
QUADS = np.frombuffer(b"ACGT", dtype=np.uint8)[(np.arange(256)[:, None] >> np.array([6, 4, 2, 0])) & 3]
DUMP_SLICE = 1 << 16
POWERS_OF_TEN = 10 ** np.arange(20, dtype=np.uint64)


def _digits(counts):
    """(uint8 [n, W] ASCII digits right-aligned, int64 [n] number of digits) of counts uint64 [n]."""
    ndigits = 1 + (counts[:, None] >= POWERS_OF_TEN[1:]).sum(axis=1)
    width = int(ndigits.max(initial=1))
    digits = (counts[:, None] // POWERS_OF_TEN[width - 1::-1]) % np.uint64(10)
    return digits.astype(np.uint8) + ord("0"), ndigits


def _letters(keys, layout):
    """uint8 [n, k]: the k-mers of keys uint64 [C, n] as ASCII letters, a byte of a key (four bases) at a time
    through QUADS (a third of the time of the bases one by one: their shifted copies are 8 bytes a base)."""
    n = keys.shape[1]
    letters = np.empty((n, layout.k), dtype=np.uint8)
    for c in range(layout.channels):
        width = layout.bases(c)  # in the low 2 * width bits, most significant base first
        quads = QUADS[np.ascontiguousarray(keys[c]).byteswap().view(np.uint8).reshape(n, 8)].reshape(n, 32)
        letters[:, BASES_PER_WORD * c:BASES_PER_WORD * c + width] = quads[:, 32 - width:]
    return letters


def dump_lines(keys, counts, layout):
    """bytes: the `KMER<TAB>COUNT\\n` lines of keys uint64 [C, n] and counts uint64 [n]: by kernels/kmer_codec.cu's
    dump_sizes and dump_write compiled for the host (one pass over the k-mers, on the calling thread: dump
    runs a bin a pool thread), or by numpy (numpy_lines) where there is no compiler."""
    n = len(counts)
    if not host.available() or n == 0:
        return numpy_lines(keys, counts, layout)
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    counts = np.ascontiguousarray(counts, dtype=np.uint64)
    sizes = np.empty(n + 1, dtype=np.uint64)
    host.launch(host.function("kmer_codec.cu", "dump_sizes", BLOCK=BLOCK), n + 1, counts, n, layout.k, sizes,
                workers=1)
    at = np.cumsum(sizes, dtype=np.uint64) - sizes  # where each line starts; at[n] = the text's length
    out = np.empty(int(at[n]), dtype=np.uint8)
    host.launch(host.function("kmer_codec.cu", "dump_write", BLOCK=BLOCK), n, keys, counts, at, n, layout.k, out,
                workers=1)
    return out.tobytes()


def numpy_lines(keys, counts, layout):
    """dump_lines in numpy: the lines built as one byte matrix (no per-line Python formatting)."""
    k = layout.k
    digits, ndigits = _digits(counts)
    width = digits.shape[1]
    lines = np.empty((len(counts), k + width + 2), dtype=np.uint8)
    lines[:, :k] = _letters(keys, layout)
    lines[:, k] = ord("\t")
    lines[:, k + 1:k + 1 + width] = digits
    lines[:, -1] = ord("\n")
    keep = np.ones(lines.shape, dtype=bool)
    keep[:, k + 1:k + 1 + width] = np.arange(width) >= (width - ndigits)[:, None]
    return lines[keep].tobytes()


def dump(table, out, min_count=1):
    """Write every k-mer of `table` with count >= min_count to the binary stream `out`, the bins' lines made
    by the thread pool (KmerTable.map_bins) and written in order."""
    def bin_lines(b):
        keys, counts = table.read_bin(b)
        if min_count > 1:
            keep = counts >= np.uint64(min_count)
            keys, counts = keys[:, keep], counts[keep]
        return [dump_lines(keys[:, lo:lo + DUMP_SLICE], counts[lo:lo + DUMP_SLICE], table.layout)
                for lo in range(0, len(counts), DUMP_SLICE)]

    for lines in table.map_bins(bin_lines):
        out.writelines(lines)


def histogram_lines(table, low=1, high=10000, increment=1, full=False):
    """str: `jellyfish histo` output for `table` (see the module docstring); needs high >= low."""
    base = low - increment if low > increment else 0
    buckets = (high + 2 * increment - base) // increment
    def bin_histogram(b):
        counts = table.read_counts(b).astype(np.int64)
        index = np.where(counts < base, 0, np.minimum((counts - base) // increment, buckets - 1))
        return np.bincount(index, minlength=buckets)

    histogram = np.zeros(buckets, dtype=np.int64)
    for part in table.map_bins(bin_histogram):
        histogram += part
    shown = np.arange(buckets) if full else np.flatnonzero(histogram)
    return "".join(f"{base + i * increment} {histogram[i]}\n" for i in shown)


def _sortable(keys):
    """keys uint64 [C, n] -> void [n] whose byte order (big-endian words) is the lexicographic order."""
    return np.ascontiguousarray(keys.T).byteswap().view(f"V{8 * keys.shape[0]}").ravel()


def query(table, kmers):
    """(keys uint64 [C, n], counts uint64 [n]): each k-mer string as stored (canonical in a canonical
    table) and its count, 0 when absent; ValueError for a string that is not a k-mer of the table's k."""
    keys = keys_from_strings(kmers, table.layout)
    if table.canonical:
        keys = canonical_keys(keys, table.layout)
    found = np.zeros(len(kmers), dtype=np.uint64)
    bins = bin_of(keys, table.k)
    for b in np.unique(bins):
        wanted = np.flatnonzero(bins == b)
        bin_keys, counts = table.read_bin(int(b))
        if not len(counts):
            continue
        haystack, needles = _sortable(bin_keys), _sortable(keys[:, wanted])
        at = np.minimum(np.searchsorted(haystack, needles), len(counts) - 1)
        hit = haystack[at] == needles
        found[wanted[hit]] = counts[at[hit]]
    return keys, found
