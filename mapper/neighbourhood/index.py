"""The neighbourhood index (MAROSE's): for every seed s of ls bases, the block of the right neighbourhoods b of
ln bases that follow s in the reference, each with its positions; every block is a perfect hash table.

A pattern is a seed mask (`######-##`: '#' bases are the seed, '-' any base; contiguous `#`*ls without
--spaced) followed at once by ln neighbourhood bases: it covers width = len(mask) + ln reference bases. It is
indexed at every global position p whose window [p, p + width) lies inside one contig with no N on a '#' or
neighbourhood base.

Arrays (memory-mapped from the folder; B = 4**ls blocks, S distinct (seed, neighbourhood) slots):
    nboff      int64  [B+1]   block s holds slots nboff[s]:nboff[s+1]
    nbkeys     uint32 [S]     the slot's neighbourhood (2 bits a base, first base most significant), sorted
                              inside a block (binary search and list traversal read it as it is)
    posoff     int64  [S+1]   slot k's positions are positions[posoff[k]:posoff[k+1]]
    positions  uint32 [P]     global start of the pattern (the seed's first base), increasing within a slot
    seed_j, voff, g, vslot    the per-block perfect hash (hashing.py)

Built without a per-position Python loop: keys by width vectorised passes, one 64-bit sort of
(seed, neighbourhood, position) (an argsort when the three do not fit 64 bits), and the vectorised BDZ
construction. The folder `REF.fa.nbx/` (or --index DIR) has a meta.json with the magic, the format version,
the kind "neighbourhood", ls, ln, the mask and the reference's checksum, like the k-mer index's.
"""
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mapper.alphabet import CODE_N
from mapper.errors import IndexFormatError, UsageError
from mapper.index import building, check_reference, default_index_dir, read_meta, write_index
from mapper.neighbourhood.hashing import Phf, build_phf
from mapper.reference import Reference, require_readable

KIND = "neighbourhood"
FORMAT_VERSION = 1
DEFAULT_SEED_LEN = 8
DEFAULT_NB_LEN = 7
SEED_LEN_RANGE = (1, 12)   # 4**12 blocks is the table ceiling
NB_LEN_RANGE = (1, 16)     # a neighbourhood key is one uint32
_ARRAYS = ("seq2bit", "nmask", "nboff", "nbkeys", "posoff", "positions", "seed_j", "voff", "g", "vslot")

log = logging.getLogger("gkmap")


def seed_mask(seed_len=None, spaced=None):
    """The checked seed mask: `spaced` ('#' seed bases, '-' any base), else '#' * seed_len (default 8)."""
    if spaced is None:
        seed_len = DEFAULT_SEED_LEN if seed_len is None else seed_len
        mask = "#" * seed_len
    else:
        mask = spaced
        if set(mask) - set("#-") or not mask.startswith("#") or not mask.endswith("#"):
            raise UsageError(f"--spaced must be '#' (seed base) and '-' (any base), starting and ending with '#', "
                             f"not {spaced!r}")
        if seed_len is not None and seed_len != mask.count("#"):
            raise UsageError(f"--seed-len {seed_len} disagrees with --spaced {spaced} ({mask.count('#')} seed bases)")
    ls = mask.count("#")
    if not SEED_LEN_RANGE[0] <= ls <= SEED_LEN_RANGE[1]:
        raise UsageError(f"--seed-len must be between {SEED_LEN_RANGE[0]} and {SEED_LEN_RANGE[1]}, not {ls}")
    return mask


def check_nb_len(nb_len):
    if not NB_LEN_RANGE[0] <= nb_len <= NB_LEN_RANGE[1]:
        raise UsageError(f"--nb-len must be between {NB_LEN_RANGE[0]} and {NB_LEN_RANGE[1]}, not {nb_len}")
    return nb_len


def seed_offsets(mask):
    """Offsets of the seed bases ('#') inside a pattern."""
    return np.array([i for i, c in enumerate(mask) if c == "#"], dtype=np.int64)


def nb_offsets(mask, ln):
    """Offsets of the neighbourhood bases: right after the mask."""
    return len(mask) + np.arange(ln, dtype=np.int64)


@dataclass
class NeighbourhoodIndex:
    mask: str
    ln: int
    nboff: np.ndarray
    nbkeys: np.ndarray
    posoff: np.ndarray
    positions: np.ndarray
    phf: Phf
    reference: Reference
    folder: Path

    @property
    def ls(self):
        return self.mask.count("#")

    @property
    def seed_offsets(self):
        return seed_offsets(self.mask)

    @property
    def nb_offsets(self):
        return nb_offsets(self.mask, self.ln)

    @property
    def width(self):
        return len(self.mask) + self.ln


def packed_keys(codes, offsets, starts=None, n=None):
    """(uint32 keys, has-N flags) of the bases at start + offsets, first offset most significant; with
    `starts` None, of every start 0..n-1 (slices, not gathers). N packs as A: callers decide what it means."""
    size = n if starts is None else len(starts)
    keys = np.zeros(size, dtype=np.uint32)
    has_n = np.zeros(size, dtype=bool)
    for o in offsets.tolist():
        base = codes[o:o + n] if starts is None else codes[starts + o]
        keys <<= np.uint32(2)
        keys |= base & 3
        has_n |= base == CODE_N
    return keys, has_n


def build_arrays(reference, mask, ln, device="cpu"):
    """(nboff, nbkeys, posoff, positions, phf) of `reference` (module docstring); with device "cuda" the same
    arrays computed on the GPU (gpu_build.py)."""
    codes = reference.codes
    if len(codes) >= 2**32:
        raise UsageError("references of 2**32 bases or more are not supported by this index format")
    if device == "cuda":
        from mapper.neighbourhood import gpu_build
        return gpu_build.build_arrays(reference, mask, ln)
    ls, width = mask.count("#"), len(mask) + ln
    n = max(len(codes) - width + 1, 0)
    seed, seed_n = packed_keys(codes, seed_offsets(mask), n=n)
    nb, nb_n = packed_keys(codes, nb_offsets(mask, ln), n=n)
    valid = ~(seed_n | nb_n)
    del seed_n, nb_n
    for end in reference.ends:  # one slice per contig: windows that cross its end
        valid[max(int(end) - width + 1, 0):min(int(end), n)] = False
    pos = np.flatnonzero(valid).astype(np.uint64)
    key = (seed[valid].astype(np.uint64) << np.uint64(2 * ln)) | nb[valid]
    del seed, nb, valid
    pos_bits = max(int(len(codes) - 1).bit_length(), 1)
    if 2 * (ls + ln) + pos_bits <= 64:  # one sort of key:position words
        key <<= np.uint64(pos_bits)
        key |= pos
        key.sort()
        pos = key & np.uint64((1 << pos_bits) - 1)
        key >>= np.uint64(pos_bits)
    else:
        order = np.argsort(key, kind="stable")  # positions were increasing: they stay so inside a key
        key, pos = key[order], pos[order]
    new = np.ones(len(key), dtype=bool)
    new[1:] = key[1:] != key[:-1]
    first = np.flatnonzero(new)
    nbkeys = (key[first] & np.uint64((1 << 2 * ln) - 1)).astype(np.uint32)
    nboff = np.zeros(4**ls + 1, dtype=np.int64)
    np.cumsum(np.bincount((key[first] >> np.uint64(2 * ln)).astype(np.int64), minlength=4**ls), out=nboff[1:])
    posoff = np.append(first, len(key)).astype(np.int64)
    return nboff, nbkeys, posoff, pos.astype(np.uint32), build_phf(nbkeys, nboff)


def default_folder(ref_path):
    """`REF.fa.nbx/` (beside the k-mer index's `REF.fa.gkx/`, or its cache folder + '.nbx')."""
    return default_index_dir(ref_path).with_suffix(".nbx")


def build_index(ref_path, mask, ln, index_dir=None, device="cpu"):
    """Read the FASTA, build the neighbourhood index (numpy, or the GPU with device "cuda"), write it atomically
    (temp folder + rename); return it."""
    check_nb_len(ln)
    folder = Path(index_dir) if index_dir else default_folder(ref_path)
    t0 = time.perf_counter()
    with building(ref_path, folder) as (tmp, record, reference):
        t_read = time.perf_counter()
        nboff, nbkeys, posoff, positions, phf = build_arrays(reference, mask, ln, device)
        t_arrays = time.perf_counter()
        arrays = dict(reference.to_arrays(), nboff=nboff, nbkeys=nbkeys, posoff=posoff, positions=positions,
                      seed_j=phf.seed_j, voff=phf.voff, g=phf.g, vslot=phf.vslot)
        write_index(tmp, {name: arrays[name] for name in _ARRAYS},
                    {"format_version": FORMAT_VERSION, "kind": KIND, "mask": mask, "ln": ln,
                     "slots": int(len(nbkeys)), "positions": int(len(positions)), "vertices": int(phf.voff[-1])},
                    record, reference)
    log.info("neighbourhood index of %s (seed %s, ln %d): %d patterns, %d neighbourhoods, %d vertices in %.1f s "
             "(FASTA %.1f s, arrays on %s %.1f s, writing %.1f s) -> %s", ref_path, mask, ln, len(positions),
             len(nbkeys), int(phf.voff[-1]), time.perf_counter() - t0, t_read - t0, device, t_arrays - t_read,
             time.perf_counter() - t_arrays, folder)
    return NeighbourhoodIndex(mask, ln, nboff, nbkeys, posoff, positions, phf, reference, folder)


def load_index(ref_path, index_dir=None):
    """Load and validate the neighbourhood index of `ref_path` (memory-mapped arrays)."""
    folder = Path(index_dir) if index_dir else default_folder(ref_path)
    meta = read_meta(folder, KIND, FORMAT_VERSION, "'gkmap index --index-kind neighbourhood'")
    check_reference(folder, meta, ref_path, "'gkmap index --index-kind neighbourhood'")
    try:
        a = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
    except (OSError, ValueError) as e:
        raise IndexFormatError(f"{folder}: damaged index ({e}); rebuild it with 'gkmap index'") from None
    mask, ln = meta["mask"], int(meta["ln"])
    if (len(a["nboff"]) != 4**mask.count("#") + 1 or len(a["nbkeys"]) != meta["slots"]
            or len(a["positions"]) != meta["positions"] or len(a["vslot"]) != meta["vertices"]):
        raise IndexFormatError(f"{folder}: damaged index (array sizes disagree with meta.json)")
    names, lengths = zip(*meta["contigs"])
    reference = Reference.from_arrays(names, lengths, a["seq2bit"], a["nmask"])
    phf = Phf(a["seed_j"], a["voff"], a["g"], a["vslot"])
    return NeighbourhoodIndex(mask, ln, a["nboff"], a["nbkeys"], a["posoff"], a["positions"], phf, reference, folder)


def open_index(ref_path, seed_len=None, nb_len=None, spaced=None, index_dir=None):
    """The index `map` uses: load it, or build it when the folder has none; asked parameters must match."""
    require_readable(ref_path)
    folder = Path(index_dir) if index_dir else default_folder(ref_path)
    if not (folder / "meta.json").exists():
        log.info("no neighbourhood index in %s: building it", folder)
        return build_index(ref_path, seed_mask(seed_len, spaced), check_nb_len(nb_len or DEFAULT_NB_LEN), folder)
    index = load_index(ref_path, folder)
    for flag, asked, has in (("--seed-len", seed_len, index.ls), ("--nb-len", nb_len, index.ln),
                             ("--spaced", spaced, index.mask)):
        if asked is not None and asked != has:
            raise UsageError(f"{flag} {asked} asked, but the index {folder} has {has}; rebuild it with "
                             f"'gkmap index --index-kind neighbourhood {flag} {asked}' or drop {flag}")
    return index
