"""The 2-bit DNA code, defined once for numpy and handed to the kernels (as -D constants).

Codes: A=0, C=1, G=2, T=3. Every other letter (N, IUPAC, '.') is "N" for gkmap (CONVENTIONS.md): it is
never part of a seed and never matches anything, not even another N. In uint8 code arrays N is
`CODE_N` = 4; code arrays are what the cpu backend works on, one byte per base.

For edlib, an N must differ from every base *and from an N on the other side*: reads are spelled with
`READ_ASCII` (N -> 'N') and reference windows with `REF_ASCII` (N -> 'n'), so edlib never matches them.
"""
import numpy as np

from mapper.cores import on_cores

BASES = "ACGT"
CODE_N = 4

# ASCII byte -> code. Lower case is upper-cased first (input is case-insensitive).
ENCODE = np.full(256, CODE_N, dtype=np.uint8)
for _code, _base in enumerate(BASES):
    ENCODE[ord(_base)] = _code
    ENCODE[ord(_base.lower())] = _code
del _code, _base

# code -> complement code (N stays N)
COMPLEMENT = np.array([3, 2, 1, 0, CODE_N], dtype=np.uint8)

READ_ASCII = np.frombuffer(b"ACGTN", dtype=np.uint8)
REF_ASCII = np.frombuffer(b"ACGTn", dtype=np.uint8)
# What a SAM MD tag shows for a reference base: N for an unknown reference base.
MD_ASCII = np.frombuffer(b"ACGTN", dtype=np.uint8)


def encode(ascii_bytes):
    """uint8 ASCII array (or bytes) -> uint8 code array (0..3, CODE_N)."""
    return ENCODE[np.frombuffer(ascii_bytes, dtype=np.uint8) if isinstance(ascii_bytes, (bytes, bytearray)) else ascii_bytes]


def reverse_complement(codes):
    """Reverse complement of a code array along its last axis."""
    return COMPLEMENT[codes[..., ::-1]]


def pack_2bit(codes):
    """uint8 codes [n] -> uint32 words, 16 bases a word, first base in bits 31..30 (N packs as A; keep the N
    mask beside it). The last word is zero-padded. This is the layout the kernels read. Built a byte (4
    bases) at a time and read as big-endian words, in pieces of PACK_WORDS words on every core (numpy
    releases the GIL): on one core a 3.1 Gbp genome took 10 s of its index build."""
    n = len(codes)
    words = np.empty(-(-n // 16), dtype=np.uint32)
    on_cores(lambda begin: _pack_piece(codes[16 * begin:16 * (begin + PACK_WORDS)],
                                        words[begin:begin + PACK_WORDS]), range(0, len(words), PACK_WORDS))
    return words


def pack_n_mask(codes):
    """np.packbits(codes == CODE_N), in pieces of 8 PACK_WORDS bases on every core."""
    mask = np.empty(-(-len(codes) // 8), dtype=np.uint8)
    step = 8 * PACK_WORDS

    def pack(begin):
        piece = np.packbits(codes[begin:begin + step] == CODE_N)
        mask[begin // 8:begin // 8 + len(piece)] = piece

    on_cores(pack, range(0, len(codes), step))
    return mask


PACK_WORDS = 1 << 22  # words a thread packs at a time (64 M bases)


def _pack_piece(codes, out):
    """pack_2bit of one piece (a multiple of 16 codes, but for the last) into `out`."""
    padded = np.zeros(len(out) * 16, dtype=np.uint8)
    padded[:len(codes)] = codes
    padded &= 3
    quads = padded.reshape(-1, 4)
    packed = quads[:, 0] << 6
    for i, shift in ((1, 4), (2, 2), (3, 0)):
        packed |= quads[:, i] << shift
    out[:] = packed.view(">u4")


# byte of a 2-bit word -> its 4 codes (first base in the high bits) as one uint32 (the codes in memory order)
_BYTE_CODES = np.ascontiguousarray(((np.arange(256)[:, None] >> np.array([6, 4, 2, 0])) & 3)
                                   .astype(np.uint8)).view(np.uint32).reshape(-1)


# byte of a packed N mask (np.packbits order) -> which of its 8 bases are N
_MASK_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).view(bool)


# words a thread unpacks at a time (4 M bases): numpy's take casts its byte indices to a temporary intp array
# (8 bytes a byte), which at 4 M words a piece was 128 MB of fresh pages to fault in (human chr20, one
# core: 0.15-0.57 s to unpack); at 256 K words it is reused from the heap and cached (0.07-0.08 s)
UNPACK_WORDS = 1 << 18


def unpack_2bit(words, n, nmask=None):
    """Inverse of `pack_2bit`: uint32 words -> uint8 codes [n], N where the packed mask `nmask` has a bit (A
    without one). One lookup of 4 codes per byte, the word's bytes taken high to low, in pieces on every
    core (numpy's take runs without the GIL): the unpacking before, on one core, took 5.47 s for a 3.09 Gbp
    genome on an H200 host (scripts/profile_load.py's steps). The mask is applied to the 8-base blocks of
    its non-zero bytes only (a genome's N runs are a few percent of it)."""
    little = np.asarray(words, dtype="<u4").view(np.uint8).reshape(-1, 4)
    codes = np.empty(len(little) * 16, dtype=np.uint8)  # 16 bases a word: 8 | its length
    quads = codes.view(np.uint32).reshape(-1, 4)

    def unpack(begin):
        piece = np.ascontiguousarray(little[begin:begin + UNPACK_WORDS, ::-1])
        np.take(_BYTE_CODES, piece, out=quads[begin:begin + UNPACK_WORDS])

    on_cores(unpack, range(0, len(little), UNPACK_WORDS))
    if nmask is not None:
        nmask = np.asarray(nmask)
        octets = codes[:len(nmask) * 8].reshape(-1, 8)
        marked = np.flatnonzero(nmask)
        block = octets[marked]
        np.copyto(block, CODE_N, where=_MASK_BITS[nmask[marked]])
        octets[marked] = block
    return codes[:n]


# ASCII complement for SAM's SEQ on the reverse strand: IUPAC codes map to their complements, N to N.
COMPLEMENT_ASCII = np.arange(256, dtype=np.uint8)
for _a, _b in zip(b"ACGTRYKMBVDHN", b"TGCAYRMKVBHDN"):
    COMPLEMENT_ASCII[_a] = _b
del _a, _b
