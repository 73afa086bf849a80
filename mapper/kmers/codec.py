"""Compression of one bin of sorted distinct k-mers and their counts; all steps are whole-array numpy.

k-mers (`encode_keys`): channel by channel, a key's channel c is stored as the difference from the
previous key's channel c when channels 0..c-1 of the two keys are equal, and as its plain value
otherwise (sorted distinct keys make every difference non-negative; the first key of a bin is plain).
This is the delta of the k-mer's integer, split at word boundaries so that no borrow crosses words.
The values are written channel-major (all of channel 0, then all of channel 1, ...) as VLQ.

VLQ (`vlq_encode`): an unsigned integer in 7-bit groups, least significant group first (LEB128 order),
one byte per group, the high bit set on every byte but the last; 1 to 10 bytes per uint64.

Counts (`simple8b_encode`): count - 1 (so the common count 1 is 0) in Simple-8b words (Anh & Moffat,
2010): a uint64 word is a 4-bit selector (bits 63..60) and 60 payload bits holding n values of b bits
each, first value in the lowest bits:

    selector  0    1    2   3   4   5   6   7   8  9  10  11  12  13  14  15
    n         240  120  60  30  20  15  12  10  8  7  6   5   4   3   2   1
    b         0    0    1   2   3   4   5   6   7  8  10  12  15  20  30  60

The decoder reads every selector. The encoder packs blocks of 60 values, each block with the narrowest
selector whose n divides 60 (so it vectorises; a greedy packer would be a loop over words); the last
block is padded with zeros, and the number of values is stored beside the words.
"""
import numpy as np

S8B_N = np.array([240, 120, 60, 30, 20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1], dtype=np.int64)
S8B_BITS = np.array([0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 60], dtype=np.int64)
BLOCK = 60
# Selectors the encoder uses: those whose n divides a block of 60, narrowest first.
_BLOCK_SELECTORS = np.array([s for s in range(2, 16) if BLOCK % S8B_N[s] == 0], dtype=np.int64)
MAX_COUNT = 2 ** 60


class CodecError(ValueError):
    """A compressed stream that does not decode to what its header announces."""


def vlq_sizes(values):
    """int16 [n]: the VLQ length of each uint64 value (1..10 bytes), from its bit length: the float64 exponent,
    one too high where rounding to 53 bits carried into the next power of two."""
    exponent = (values.astype(np.float64).view(np.uint64) >> np.uint64(52)).astype(np.int16)
    bits = np.maximum(exponent - 1022, 1)
    bits -= values < (np.uint64(1) << (bits - 1).astype(np.uint64))
    return np.maximum((bits + 6) // 7, 1)


def _spread_groups(values):
    """uint64 [n]: bits 0..55 of each value in 7-bit groups, group j in byte j (three halving steps)."""
    x = values & np.uint64((1 << 56) - 1)
    x = (x & np.uint64(0xFFFFFFF)) | ((x & np.uint64(0xFFFFFFF << 28)) << np.uint64(4))
    x = (x & np.uint64(0x00003FFF00003FFF)) | ((x & np.uint64(0x0FFFC0000FFFC000)) << np.uint64(2))
    return (x & np.uint64(0x007F007F007F007F)) | ((x & np.uint64(0x3F803F803F803F80)) << np.uint64(1))


# continuation bits (0x80) of the first min(size - 1, 8) bytes, by VLQ size
_CONTINUED = np.array([sum(0x80 << (8 * j) for j in range(min(size - 1, 8))) for size in range(11)],
                      dtype=np.uint64)


def vlq_encode(values):
    """uint64 [n] -> uint8 [bytes]: each value as a row of its 7-bit groups with the continuation bits set
    (little-endian uint64 words, plus two bytes for values of 57 bits or more), then the first `size`
    bytes of each row (boolean indexing reads row-major, which is stream order)."""
    values = np.asarray(values, dtype=np.uint64)
    sizes = vlq_sizes(values)
    low = (_spread_groups(values) | _CONTINUED[sizes]).view(np.uint8).reshape(-1, 8)
    if int(sizes.max(initial=1)) <= 8:
        rows = low
    else:
        rows = np.empty((len(values), 10), dtype=np.uint8)
        rows[:, :8] = low
        high = values >> np.uint64(56)
        rows[:, 8] = (high & np.uint64(0x7F)).astype(np.uint8) | np.where(sizes > 9, 0x80, 0).astype(np.uint8)
        rows[:, 9] = (high >> np.uint64(7)).astype(np.uint8)
    return rows[np.arange(rows.shape[1], dtype=np.int16) < sizes[:, None]]


def vlq_decode(data, count):
    """uint8 [bytes] -> uint64 [count]; CodecError if the stream does not hold exactly `count` values."""
    data = np.asarray(data, dtype=np.uint8)
    last = data < 0x80
    ends = np.flatnonzero(last)
    if len(ends) != count or (len(data) and not last[-1]):
        raise CodecError(f"VLQ stream holds {len(ends)} values, expected {count}")
    if count == 0:
        return np.empty(0, dtype=np.uint64)
    starts = np.concatenate(([0], ends[:-1] + 1))
    value_of_byte = np.cumsum(last) - last
    position = np.arange(len(data)) - starts[value_of_byte]
    if position.max() > 9:
        raise CodecError("VLQ value longer than 10 bytes")
    groups = (data & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.bitwise_or.reduceat(groups, starts)


def simple8b_encode(values):
    """uint64 [n] (each < 2^60) -> uint64 Simple-8b words."""
    values = np.asarray(values, dtype=np.uint64)
    blocks = np.zeros((-(-len(values) // BLOCK), BLOCK), dtype=np.uint64)
    blocks.reshape(-1)[:len(values)] = values
    widest = blocks.max(axis=1, initial=0)
    # index into _BLOCK_SELECTORS of the narrowest selector that holds the block's largest value
    choice = np.zeros(len(blocks), dtype=np.int64)
    for s in _BLOCK_SELECTORS[:-1]:
        choice += widest >= np.uint64(1 << int(S8B_BITS[s]))
    if len(widest) and widest.max() >= MAX_COUNT:
        raise ValueError("Simple-8b holds values below 2^60")
    selectors = _BLOCK_SELECTORS[choice]
    words_per_block = BLOCK // S8B_N[selectors]
    first_word = np.cumsum(words_per_block) - words_per_block
    words = np.empty(int(words_per_block.sum()), dtype=np.uint64)
    for s in np.unique(selectors):
        n, bits = int(S8B_N[s]), int(S8B_BITS[s])
        idx = np.flatnonzero(selectors == s)
        fields = blocks[idx].reshape(-1, n) << (np.arange(n, dtype=np.uint64) * np.uint64(bits))
        packed = np.bitwise_or.reduce(fields, axis=1) | (np.uint64(s) << np.uint64(60))
        at = first_word[idx][:, None] + np.arange(BLOCK // n)
        words[at.reshape(-1)] = packed
    return words


def simple8b_decode(words, count):
    """uint64 Simple-8b words -> uint64 [count]; CodecError if they hold fewer than `count` values."""
    words = np.asarray(words, dtype=np.uint64)
    selectors = (words >> np.uint64(60)).astype(np.int64)
    n_per_word = S8B_N[selectors]
    first = np.cumsum(n_per_word) - n_per_word
    total = int(n_per_word.sum())
    if total < count:
        raise CodecError(f"Simple-8b words hold {total} values, expected {count}")
    out = np.empty(total, dtype=np.uint64)
    for s in np.unique(selectors):
        n, bits = int(S8B_N[s]), int(S8B_BITS[s])
        idx = np.flatnonzero(selectors == s)
        mask = np.uint64((1 << bits) - 1)
        fields = (words[idx][:, None] >> (np.arange(n, dtype=np.uint64) * np.uint64(bits))) & mask
        out[(first[idx][:, None] + np.arange(n)).reshape(-1)] = fields.reshape(-1)
    return out[:count]


def _prefix_equal(keys, channel):
    """bool [n]: key i equals key i-1 on channels 0..channel-1 (False for key 0)."""
    equal = np.ones(keys.shape[1], dtype=bool)
    equal[:1] = False
    for c in range(channel):
        equal[1:] &= keys[c, 1:] == keys[c, :-1]
    return equal


def encode_keys(keys):
    """Sorted distinct keys uint64 [C, n] -> VLQ bytes (see the module docstring)."""
    deltas = np.empty_like(keys)
    deltas[:, :1] = keys[:, :1]
    same = None  # keys i and i-1 (i >= 1) are equal on the channels before c
    for c in range(keys.shape[0]):
        np.subtract(keys[c, 1:], keys[c, :-1], out=deltas[c, 1:])
        if same is not None:
            deltas[c, 1:] = np.where(same, deltas[c, 1:], keys[c, 1:])
            same &= keys[c, 1:] == keys[c, :-1]
        else:
            same = deltas[c, 1:] == 0
    return vlq_encode(deltas.reshape(-1))


def decode_keys(data, channels, count):
    """Inverse of `encode_keys`: VLQ bytes -> keys uint64 [channels, count]."""
    keys = vlq_decode(data, channels * count).reshape(channels, count)
    for c in range(channels):
        # a segmented prefix sum: each run of keys that share channels 0..c-1 restarts from a plain value
        restart = ~_prefix_equal(keys, c)
        total = np.cumsum(keys[c])
        first = np.flatnonzero(restart)
        before = total[first] - keys[c, first]
        keys[c] = total - before[np.cumsum(restart) - 1]
    return keys


def encode_counts(counts):
    """counts uint64 [n] (each >= 1) -> Simple-8b words of count - 1."""
    return simple8b_encode(np.asarray(counts, dtype=np.uint64) - np.uint64(1))


def decode_counts(words, count):
    return simple8b_decode(words, count) + np.uint64(1)
