"""Direct-address k-mer index of a reference: for every ws-mer key (2 bits a base, first base most
significant), the sorted global positions where it occurs.

Arrays (memory-mapped from the index folder):
    offsets    uint32 or uint64 [4**ws + 1]  bucket of key k is positions[offsets[k]:offsets[k+1]]
    positions  uint32 [P]                    global start of every ws-mer that lies inside one contig and
                                             has no N, sorted by (key, position)

Built without a per-k-mer Python loop: rolling 2-bit keys over the whole genome (ws vectorised passes),
then one sort of the 64-bit words `key << 32 | position` (keys <= 28 bits, positions < 2**32) and a
bincount for the bucket offsets.

The folder (CONVENTIONS.md, "Files and paths"): `REF.gkx/` beside the FASTA, or `--index DIR`; if the
FASTA's folder is read-only, `$XDG_CACHE_HOME/gkmap/<checksum>/`. It is self-describing: `meta.json`
holds a magic string, the format version, the kind and ws, the reference's checksum and the contig table;
`map` refuses an index of another version or another reference with a one-line error.

Damage is caught, never trusted (README "Errors and safety"): meta.json carries a checksum of its own fields
(`meta_checksum`) and, per array, its dtype, shape, BLAKE2b digest and a sampled digest (4 KiB blocks evenly
spread, 4 MiB at most: every block of a small array; 16 MiB in indexes written before meta.json recorded
the count). Loading verifies the meta checksum, every size and
dtype, the sampled digests, that the offsets rise from 0 to len(positions), and, for a sample of positions,
that the k-mer there has its bucket's key, no N, and lies inside one contig: about a second for a human genome
at most. `gkmap index --check` verifies everything (`check_index`). Indexes written before these fields
existed (same format version) get the size and content checks only. An index is written
only into a new folder, an empty one or over an index of gkmap's own (`index_folder`): never into a folder
of the user's, which it would destroy.
"""
import contextlib
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import threading
import time
import tokenize
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mapper.version import __version__
from mapper.alphabet import CODE_N
from mapper.cores import on_cores
from mapper.errors import IndexFormatError, UsageError
from mapper.outputs import remove_stale, temp_prefix, umask
from mapper.reference import Reference, check_contig_name, file_checksum, read_fasta, require_readable

MAGIC = "gkmap-index"
FORMAT_VERSION = 1
KIND = "kmer"
WS_RANGE = (10, 14)
DEFAULT_WS = 12
_ARRAYS = ("seq2bit", "nmask", "offsets", "positions")

log = logging.getLogger("gkmap")


@dataclass
class KmerIndex:
    ws: int
    offsets: np.ndarray
    positions: np.ndarray
    reference: Reference
    folder: Path

    def bucket_sizes(self, keys):
        """Number of occurrences of each key (int64 array, same shape as `keys`)."""
        return self.offsets[keys + 1].astype(np.int64) - self.offsets[keys]


def check_ws(ws):
    if not WS_RANGE[0] <= ws <= WS_RANGE[1]:
        raise UsageError(f"--ws must be between {WS_RANGE[0]} and {WS_RANGE[1]}, not {ws}")


def kmer_keys(codes, ws):
    """Keys of the ws-mers starting at every position 0..len(codes)-ws (N contributes 0: mask it apart).
    A sequence shorter than ws has none."""
    n = max(len(codes) - ws + 1, 0)
    keys = np.zeros(n, dtype=np.uint32)
    for i in range(ws):
        keys <<= 2
        keys |= codes[i:i + n] & 3
    return keys


def valid_kmer_starts(reference, ws):
    """bool [G-ws+1]: the ws-mer at this position has no N and does not cross a contig end."""
    codes = reference.codes
    n = len(codes) - ws + 1
    if n <= 0:
        return np.zeros(0, dtype=bool)
    is_n = codes == CODE_N
    has_n = is_n[:n].copy()
    for i in range(1, ws):
        has_n |= is_n[i:i + n]
    valid = ~has_n
    for end in reference.ends:  # one slice per contig, not per k-mer
        valid[max(end - ws + 1, 0):min(end, n)] = False
    return valid


BUILD_CHUNK = 1 << 22  # k-mer starts per step of the build: ~0.1 GB of temporaries, whatever the genome


def build_arrays(reference, ws, chunk=BUILD_CHUNK):
    """(offsets, positions) of the index of `reference` for k-mer size ws, in memory bounded by the index
    itself plus one chunk's temporaries (a counting sort, not one sort of every k-mer): pass 1 counts
    each key's k-mers chunk by chunk, which gives the offsets; pass 2 takes the chunks in position order
    and puts each chunk's k-mers, sorted by (key, position), at their key's cursor, so every bucket is
    filled in position order."""
    if len(reference.codes) >= 2**32:
        raise UsageError("references of 2**32 bases or more are not supported by this index format")
    n = max(len(reference.codes) - ws + 1, 0)
    steps = [(a, min(a + chunk, n)) for a in range(0, n, chunk)]
    counts = np.zeros(4**ws, dtype=np.uint32)  # a genome below 2**32 bases: no bucket overflows
    kept = {}  # a genome of one chunk keeps its k-mers for pass 2 (no second extraction)
    for a, b in steps:
        keys, starts = _chunk_kmers(reference, ws, a, b)
        if 4**ws <= 8 * len(keys):  # a bincount over every key pays off only for a chunk this large
            np.add(counts, np.bincount(keys, minlength=4**ws), out=counts, casting="unsafe")
        else:
            present, number = np.unique(keys, return_counts=True)
            counts[present] += number.astype(np.uint32)
        if len(steps) == 1:
            kept[a] = keys, starts
    total = int(counts.sum(dtype=np.uint64))
    offsets = np.zeros(4**ws + 1, dtype=np.uint32 if total < 2**32 else np.uint64)
    np.cumsum(counts, out=offsets[1:])
    cursor = offsets[:-1].copy()  # each key's next free slot, in the offsets' own dtype
    del counts
    positions = np.empty(total, dtype=np.uint32)
    for a, b in steps:
        keys, starts = kept.pop(a, None) or _chunk_kmers(reference, ws, a, b)
        if not len(keys):  # a chunk of N (an assembly gap) or of contig ends only
            continue
        packed = keys.astype(np.uint64) << np.uint64(32)  # (key, start): one sort of plain words
        packed |= starts
        packed.sort()
        keys, starts = (packed >> np.uint64(32)).astype(np.int64), packed.astype(np.uint32)
        del packed
        first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        size = np.diff(np.r_[first, len(keys)])
        rank = np.arange(len(keys)) - np.repeat(first, size)
        positions[cursor[keys].astype(np.int64) + rank] = starts
        cursor[keys[first]] += size.astype(cursor.dtype)
    return offsets, positions


def _chunk_kmers(reference, ws, a, b):
    """(keys, starts) of the valid ws-mers (no N, inside one contig) starting in [a, b), by start."""
    codes = reference.codes[a:b + ws - 1]
    keys = kmer_keys(codes, ws)
    is_n = codes == CODE_N
    valid = ~is_n[:b - a]
    for i in range(1, ws):
        valid &= ~is_n[i:i + b - a]
    ends = reference.ends
    for end in ends[np.searchsorted(ends, a, side="right"):np.searchsorted(ends, b + ws - 1, side="right")].tolist():
        valid[max(end - ws + 1 - a, 0):min(end - a, b - a)] = False  # k-mers across a contig end
    return keys[valid], np.flatnonzero(valid).astype(np.uint32) + np.uint32(a)


def _read_only_dir(path):
    """A folder gkmap must not write into: not writable, or writable only because we are root."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return True
    return not os.access(path, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def beside_index_dir(ref_path):
    """`REF.gkx/`: the index folder beside the FASTA."""
    ref_path = Path(ref_path)
    return ref_path.with_name(ref_path.name + ".gkx")


def default_index_dir(ref_path):
    """`REF.gkx/` beside the FASTA, or the cache folder when the FASTA's folder is read-only."""
    ref_path = Path(ref_path)
    if not _read_only_dir(ref_path.resolve().parent):
        return beside_index_dir(ref_path)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gkmap" / file_checksum(ref_path)
    log.info("%s is in a read-only folder: using the index folder %s", ref_path, cache)
    return cache


def _is_gkmap_index(folder):
    """Whether `folder` holds a meta.json with gkmap's magic (of any kind or version): a folder gkmap made."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("magic") == MAGIC


def _index_target(folder):
    """The folder an index is written to, checked: gkmap writes an index only into a new folder, an empty
    one, or one that holds a gkmap index (stale: of another version or reference); never into a folder of
    the user's (README "Errors and safety"). Links are resolved, so `--index .` names the folder itself."""
    folder = Path(os.path.realpath(folder))
    if folder.exists():
        if not folder.is_dir():
            raise UsageError(f"index folder {folder}: exists and is not a folder")
        if any(folder.iterdir()) and not _is_gkmap_index(folder):
            raise UsageError(f"index folder {folder}: not empty and holds no gkmap index; gkmap writes an index "
                             f"only into a new or empty folder or over an index of its own (give another --index)")
    if not folder.name:
        raise UsageError(f"index folder {folder}: not a folder an index can be written to")
    return folder


def _ours(name):
    """Files an index folder of any kind holds, written by `building`: the arrays, meta.json, pyfaidx's ref.fai."""
    return name.endswith(".npy") or name in ("meta.json", "ref.fai")


def _install(tmp, folder):
    """Move the index built in `tmp` to `folder`. A new folder is one rename. Into an existing folder (empty,
    or a stale index: possibly the working folder, which must stay where it is), meta.json goes first and
    comes back last, so the folder is never taken for a whole index while it is not one; of the stale
    index only gkmap's own files are replaced or removed. An old array is removed before the new one takes
    its name: renamed over it, the new file would be written out to disk inside the rename (ext4's
    auto_da_alloc; outputs._exchange): human chr20's index installed over an older one in 0.18-0.23 s so,
    0.013 s this way."""
    if not folder.exists():
        os.replace(tmp, folder)
        return
    (folder / "meta.json").unlink(missing_ok=True)
    for old in folder.iterdir():
        if _ours(old.name) and old.is_file() and not (tmp / old.name).exists():
            old.unlink()
    for new in sorted(tmp.iterdir(), key=lambda p: p.name == "meta.json"):
        (folder / new.name).unlink(missing_ok=True)
        os.replace(new, folder / new.name)


@contextlib.contextmanager
def index_folder(folder):
    """Yield a fresh temporary folder beside `folder` whose content replaces `folder`'s when the block
    succeeds: an index is written whole or not at all. What an index build killed earlier left beside it
    (`.NAME.tmp-PID@HOST-*`) is removed first."""
    folder = _index_target(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{folder.name}.tmp-"
    remove_stale(folder.parent, prefix)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(prefix), dir=folder.parent))
    try:
        tmp.chmod(0o777 & ~umask())  # mkdtemp made it private
        yield tmp
        _install(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def building(ref_path, folder):
    """The start every index kind's build shares: yield (temporary folder, reference record for write_index,
    Reference) inside
    index_folder(folder), so the folder is written whole or not at all."""
    require_readable(ref_path)
    with index_folder(folder) as tmp:
        # the FASTA is hashed (hashlib and reads run without the GIL) while it is parsed: 6.5 s of a 3.1 Gbp
        # build. A daemon thread, so that an error or a signal during the parse does not wait for the hash.
        record = []
        hashing = threading.Thread(target=lambda: record.append(_recorded(ref_path)), daemon=True)
        hashing.start()
        reference = read_fasta(ref_path, tmp / "ref.fai")
        hashing.join()
        if isinstance(record[0], BaseException):
            raise record[0]
        yield tmp, record[0], reference


def _recorded(ref_path):
    """reference_record(ref_path), or the exception it raised (for the thread that runs it)."""
    try:
        return reference_record(ref_path)
    except BaseException as error:  # re-raised by the caller, in its own thread
        return error


def _stat_key(path):
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def reference_record(ref_path):
    """meta.json's "reference": path and checksum, and the size and modification time the file had while
    it was hashed (left out if it changed meanwhile): a later load whose FASTA still has them skips hashing it
    again (make's and rsync's quick check), which costs a second per gigabyte on every run."""
    before = _stat_key(ref_path)
    record = {"path": str(Path(ref_path).resolve()), "checksum": file_checksum(ref_path)}
    return {**record, **before} if _stat_key(ref_path) == before else record


def check_reference(folder, meta, ref_path, build, checksum=None):
    """Refuse an index built from another FASTA than `ref_path`. The file is hashed unless `checksum` is
    given or it still has the size and modification time recorded when it was hashed at build time."""
    recorded = meta["reference"]
    if checksum is None:
        with contextlib.suppress(OSError):
            if {k: recorded.get(k) for k in ("size", "mtime_ns")} == _stat_key(ref_path):
                checksum = recorded["checksum"]
    if recorded["checksum"] != (checksum or file_checksum(ref_path)):
        raise IndexFormatError(f"{folder}: built from another reference ({recorded['path']}), not {ref_path}; "
                               f"rebuild it with {build} or point --index elsewhere")


_BLOCK = 4096
# Blocks of a sampled digest: 1,024 (4 MiB of an array) in indexes written now, whose meta.json records the
# count ("sampled_blocks"); 4,096 in those written before it did. Every map hashes them on load: 4,096 blocks
# of each array took 25-35 ms of CPU time a run (Shigella, whose whole run is 0.4 s; human chr20).
SAMPLED_BLOCKS = 1024
OLD_SAMPLED_BLOCKS = 4096
CHECK_THREADS = 8  # `--check`'s position checks at a time
DIGEST_CHUNK = 64 << 20  # bytes of an array hashed (and written) by one thread at a time; part of the
                         # index format: a digest is only comparable with one made with the same pieces


def _bytes(array):
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def array_digest(array, sampled=None):
    """BLAKE2b of the array's bytes, its size first; `sampled`: of that many blocks of _BLOCK bytes evenly
    spread (all of them for an array of no more blocks). Full digests of this kind are those of
    indexes written before chunked_digest (one core at ~0.5 GB/s: 24 s of a 3.1 Gbp build); they are still
    checked by `gkmap index --check`."""
    data = _bytes(array)
    digest = hashlib.blake2b(str(len(data)).encode(), digest_size=16)
    blocks = -(-len(data) // _BLOCK)
    if not sampled or blocks <= sampled:
        for begin in range(0, len(data), 1 << 24):
            digest.update(data[begin:begin + (1 << 24)])
    else:  # the blocks gathered into one buffer, hashed by one call (the same digest as a call per block,
        # which cost a Python call and a GIL hand-over each: 8,192 of them on every load)
        chosen = np.linspace(0, blocks - 1, sampled).astype(np.int64)
        whole = len(data) // _BLOCK  # blocks of full size; only the last block can be shorter
        full = chosen[chosen < whole]
        digest.update(data[:whole * _BLOCK].reshape(whole, _BLOCK)[full])
        if len(full) < len(chosen):
            digest.update(data[whole * _BLOCK:])
    return digest.hexdigest()


def chunked_digest(array, fd=None, at=0):
    """BLAKE2b of the array's size and of the BLAKE2b digests of its DIGEST_CHUNK pieces in order, the
    pieces hashed on every core (hashlib releases the GIL); with `fd`, each piece is also written there at
    `at` + its offset by the thread that hashes it, while it is in that core's cache."""
    data = _bytes(array)

    def piece(begin):
        chunk = data[begin:begin + DIGEST_CHUNK]
        if fd is not None:
            view = memoryview(chunk)
            while len(view):
                view = view[os.pwrite(fd, view, at + begin + len(chunk) - len(view)):]
        return hashlib.blake2b(chunk, digest_size=16).digest()

    pieces = on_cores(piece, range(0, len(data), DIGEST_CHUNK))
    digest = hashlib.blake2b(f"{len(data)} {DIGEST_CHUNK}".encode(), digest_size=16)
    for part in pieces:
        digest.update(part)
    return digest.hexdigest()


def save_array(path, array):
    """np.save's file (the same bytes), its data written by chunked_digest's threads; returns that digest."""
    array = np.ascontiguousarray(array)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(array))
        f.flush()
        return chunked_digest(array, f.fileno(), f.tell())


def _meta_checksum(meta):
    fields = {k: v for k, v in meta.items() if k != "meta_checksum"}
    return hashlib.blake2b(json.dumps(fields, sort_keys=True).encode(), digest_size=16).hexdigest()


def write_index(tmp, arrays, meta, record, reference):
    """Save `arrays` as .npy files and meta.json: the common fields (magic, gkmap version, reference, contigs),
    the kind's own `meta` (kind, format version, parameters, sizes), each array's dtype, shape and digests,
    and the checksum of all these fields."""
    meta = {
        "magic": MAGIC, **meta, "gkmap_version": __version__,
        "reference": record,
        "contigs": [[n, int(l)] for n, l in zip(reference.names, reference.lengths)],
        "arrays": {name: {"dtype": array.dtype.str, "shape": list(array.shape),
                          "blake2b_chunks": save_array(tmp / f"{name}.npy", array),
                          "sampled": array_digest(array, sampled=SAMPLED_BLOCKS), "sampled_blocks": SAMPLED_BLOCKS}
                   for name, array in arrays.items()},
    }
    meta["meta_checksum"] = _meta_checksum(meta)
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def build_index(ref_path, ws=DEFAULT_WS, index_dir=None, device="cpu"):
    """Read the FASTA, build the index (with numpy, or on the GPU with device 'cuda': the same arrays), write
    it atomically (temp folder + rename); return it loaded."""
    check_ws(ws)
    folder = Path(index_dir) if index_dir else default_index_dir(ref_path)
    t0 = time.perf_counter()
    with building(ref_path, folder) as (tmp, record, reference):
        if device == "cuda":
            from mapper.backends import cuda_index  # pycuda only when asked for
            offsets, positions = cuda_index.build_arrays(reference, ws)
        else:
            offsets, positions = build_arrays(reference, ws)
        arrays = dict(reference.to_arrays(), offsets=offsets, positions=positions)
        write_index(tmp, {name: arrays[name] for name in _ARRAYS},
                    {"format_version": FORMAT_VERSION, "kind": KIND, "ws": ws, "positions": int(len(positions))},
                    record, reference)
    log.info("indexed %s: %d contigs, %d bases, %d %d-mers in %.1f s (%s) -> %s", ref_path, len(reference.names),
             len(reference.codes), len(positions), ws, time.perf_counter() - t0, device, folder)
    return KmerIndex(ws, offsets, positions, reference, folder)


def read_meta(folder, kind=KIND, version=None, build="'gkmap index'"):
    """meta.json of an index folder of `kind`, checked: magic, kind and format version (one-line errors).
    `version` None is the k-mer index's FORMAT_VERSION, read at the call (a test gives a worker another)."""
    version = FORMAT_VERSION if version is None else version
    meta_path = Path(folder) / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise IndexFormatError(f"{folder}: not a gkmap index (no meta.json); build one with {build}") from None
    except (OSError, ValueError) as e:
        raise IndexFormatError(f"{meta_path}: unreadable index metadata ({e})") from None
    if not isinstance(meta, dict) or meta.get("magic") != MAGIC:
        raise IndexFormatError(f"{folder}: not a gkmap index (bad magic)")
    if meta.get("kind") != kind:
        raise IndexFormatError(f"{folder}: a '{meta.get('kind')}' index, not a '{kind}' index")
    if meta.get("format_version") != version:
        raise IndexFormatError(
            f"{folder}: index format version {meta.get('format_version')}, but this gkmap ({__version__}) reads "
            f"version {version}; rebuild it with {build}")
    if "meta_checksum" in meta and meta["meta_checksum"] != _meta_checksum(meta):
        raise IndexFormatError(f"{meta_path}: damaged index (meta.json changed since the index was built: checksum "
                               f"mismatch); rebuild it with {build}")
    return meta


def _damaged(folder, what, build="'gkmap index'"):
    return IndexFormatError(f"{folder}: damaged index ({what}); rebuild it with {build}")


def check_meta(folder, meta, build="'gkmap index'"):
    """The common fields every index kind reads, checked (one line, never a traceback): (names, lengths)."""
    try:
        names, lengths = zip(*meta["contigs"]) if meta["contigs"] else ((), ())
        record = meta["reference"]
        ok = (isinstance(record, dict) and isinstance(record.get("checksum"), str)
              and all(isinstance(n, str) for n in names)
              and all(isinstance(l, int) and not isinstance(l, bool) and l > 0 for l in lengths) and names)
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        raise _damaged(folder, "meta.json: bad 'contigs' or 'reference'", build)
    for name in names:
        problem = check_contig_name(name)
        if problem:
            raise _damaged(folder, f"meta.json: contig name {name[:80]!r}: {problem}", build)
    if len(set(names)) != len(names):
        raise _damaged(folder, "meta.json: a contig name occurs twice", build)
    return list(names), list(lengths)


def verify_arrays(folder, meta, arrays, full=False, build="'gkmap index'"):
    """Each array's dtype and shape against meta.json, and its sampled digest (`full`: its whole digest), when
    meta.json records them (indexes written before it did: nothing to compare)."""
    records = meta.get("arrays")
    if records is None:
        return
    if not isinstance(records, dict) or set(records) != set(arrays):
        raise _damaged(folder, "meta.json: bad 'arrays'", build)
    for name, array in arrays.items():
        record = records[name]
        if not isinstance(record, dict) or array.dtype.str != record.get("dtype") or \
                list(array.shape) != record.get("shape"):
            raise _damaged(folder, f"{name}.npy: {array.dtype.str} {list(array.shape)}, but meta.json says "
                                   f"{record.get('dtype') if isinstance(record, dict) else '?'} "
                                   f"{record.get('shape') if isinstance(record, dict) else '?'}", build)

    def matches(name):
        array, record = arrays[name], records[name]
        if not full:
            blocks = record.get("sampled_blocks", OLD_SAMPLED_BLOCKS)
            return isinstance(blocks, int) and blocks > 0 and array_digest(array, blocks) == record.get("sampled")
        if "blake2b_chunks" in record:
            return chunked_digest(array) == record["blake2b_chunks"]
        return array_digest(array) == record.get("blake2b")  # an index written before the chunked digests

    # the sampled digests of the arrays on several cores (a load's ~14 MB of hashing; 56 MB, 70 ms on one
    # core, for an index of 4,096-block digests);
    # the full ones one array at a time, since chunked_digest spreads each array over every core itself
    names = list(arrays)
    for name, ok in zip(names, on_cores(matches, names, most=1 if full else None)):
        if not ok:
            raise _damaged(folder, f"{name}.npy: checksum mismatch", build)


def _check_positions(folder, index, sample):
    """Whether positions[sample] hold, each, a ws-mer of its bucket's key, with no N, inside one contig, and
    each is below the next position of its bucket (sorted)."""
    ws, offsets, positions, reference = index.ws, index.offsets, index.positions, index.reference
    if not len(sample):
        return
    where = np.asarray(positions[sample]).astype(np.int64)
    if int(where.max()) > reference.size - ws:
        raise _damaged(folder, "a position past the end of the reference")
    keys, has_n = reference.keys_at(where, ws)
    contig, offset = reference.locate(where)
    # sample i lies in bucket keys[i] when offsets[key] <= i < offsets[key + 1] (offsets never decrease:
    # _check_offsets): two reads of the memory-mapped offsets a sample, where a search took about 24
    lo = np.asarray(offsets[keys]).astype(np.int64)
    hi = np.asarray(offsets[keys + 1]).astype(np.int64)
    if ((sample < lo) | (sample >= hi)).any() or has_n.any() or (offset + ws > reference.lengths[contig]).any():
        raise _damaged(folder, "positions that do not hold their bucket's k-mer (shuffled or damaged arrays, "
                               "or flipped reference bases)")
    after = sample + 1
    same = (after < len(positions)) & (after < hi)
    if (np.asarray(positions[after[same]]).astype(np.int64) <= where[same]).any():
        raise _damaged(folder, "positions not sorted within a bucket")


def _check_offsets(folder, offsets, total):
    if int(offsets[0]) != 0 or int(offsets[-1]) != total:
        raise _damaged(folder, f"offsets run from {int(offsets[0])} to {int(offsets[-1])}, not from 0 to the "
                               f"{total} positions")
    step = 1 << 18  # a block's comparison temporaries are reused from the heap, not fresh pages each time
    for begin in range(0, len(offsets) - 1, step):
        block = np.asarray(offsets[begin:begin + step + 1])
        if (block[1:] < block[:-1]).any():
            raise _damaged(folder, "offsets that decrease")


def load_index(ref_path, index_dir=None, checksum=None, samples=1024):
    """Load and validate the index of `ref_path` (memory-mapped arrays): meta.json, sizes, sampled digests and
    a sample of `samples` positions (module docstring); damage gives one line (IndexFormatError)."""
    folder = Path(index_dir) if index_dir else default_index_dir(ref_path)
    meta = read_meta(folder)
    names, lengths = check_meta(folder, meta)
    check_reference(folder, meta, ref_path, "'gkmap index'", checksum)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy's warnings about a header gkmap did not write: damage
            arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
    # numpy parses an .npy header as a Python literal: a damaged one fails with SyntaxError, TokenError,
    # or a TypeError/KeyError from the dictionary it reads
    except (OSError, ValueError, EOFError, SyntaxError, tokenize.TokenError, TypeError, KeyError, Warning) as e:
        raise IndexFormatError(f"{folder}: damaged index ({e}); rebuild it with 'gkmap index'") from None
    ws, total = meta.get("ws"), meta.get("positions")
    if not (isinstance(ws, int) and WS_RANGE[0] <= ws <= WS_RANGE[1] and isinstance(total, int) and total >= 0):
        raise _damaged(folder, "meta.json: bad 'ws' or 'positions'")
    genome = sum(lengths)
    expected = {"seq2bit": ((-(-genome // 16),), ("<u4",)), "nmask": ((-(-genome // 8),), ("|u1",)),
                "offsets": ((4**ws + 1,), ("<u4", "<u8")), "positions": ((total,), ("<u4",))}
    for name, (shape, dtypes) in expected.items():
        array = arrays[name]
        if array.shape != shape or array.dtype.str not in dtypes:
            raise IndexFormatError(f"{folder}: damaged index (array sizes disagree with meta.json: {name}.npy is "
                                   f"{array.dtype.str} {list(array.shape)}, not {dtypes[0]} {list(shape)}); "
                                   f"rebuild it with 'gkmap index'")
    verify_arrays(folder, meta, arrays)
    _check_offsets(folder, arrays["offsets"], total)
    reference = Reference.from_arrays(names, lengths, arrays["seq2bit"], arrays["nmask"])
    index = KmerIndex(ws, arrays["offsets"], arrays["positions"], reference, folder)
    if total:  # positions evenly spread over the array, first and last included (distinct: spacing >= 1);
        # not numpy.random and np.unique, whose imports (numpy.random, numpy.ma) cost every run ~25 ms
        sample = np.linspace(0, total - 1, min(samples, total)).astype(np.int64)
        _check_positions(folder, index, sample)
    return index


def check_index(ref_path, index_dir=None):
    """`gkmap index --check`: everything load_index checks, then every array's whole digest and every
    position (its k-mer, sorted buckets, and as many positions as the reference has valid k-mers: the exact
    set). Returns the index; damage raises IndexFormatError."""
    require_readable(ref_path)
    folder = Path(index_dir) if index_dir else default_index_dir(ref_path)
    index = load_index(ref_path, folder, samples=0)
    meta = read_meta(folder)
    verify_arrays(folder, meta, {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in _ARRAYS},
                  full=True)
    step, total = 1 << 22, len(index.positions)
    check = lambda begin: _check_positions(folder, index, np.arange(begin, min(begin + step, total), dtype=np.int64))
    # the gathers run without the GIL (0.27 us a position on one core); each thread holds ~0.3 GB of a step's
    # temporaries, so at most CHECK_THREADS of them; the first damage found ends the check
    on_cores(check, range(0, total, step), most=CHECK_THREADS)
    valid = int(np.count_nonzero(valid_kmer_starts(index.reference, index.ws)))
    if valid != len(index.positions):
        raise _damaged(folder, f"{len(index.positions)} positions, but the reference has {valid} k-mers")
    log.info("%s: index checked, no damage found (%d contigs, %d positions, ws %d)", folder,
             len(index.reference.names), len(index.positions), index.ws)
    if "arrays" not in meta:
        log.warning("%s: written by an older gkmap, without checksums (its content was checked); rebuild it "
                    "with 'gkmap index' to add them", folder)
    return index


def find_index(ref_path, index_dir=None):
    """(the index folder of a readable reference: `index_dir`, else default_index_dir's, whether it holds an
    index): open_index loads that one, or builds it."""
    require_readable(ref_path)
    folder = Path(index_dir) if index_dir else default_index_dir(ref_path)
    return folder, (folder / "meta.json").exists()


def open_index(ref_path, ws=None, index_dir=None):
    """The index `map` uses: load it, or build it when the folder has none (like minimap2)."""
    folder, built = find_index(ref_path, index_dir)
    if not built:
        log.info("no index in %s: building it", folder)
        return build_index(ref_path, ws or DEFAULT_WS, folder)
    return load_for(ref_path, ws, folder)


def load_for(ref_path, ws, folder):
    """The index in `folder` (find_index's, which holds one), loaded and checked against --ws `ws`."""
    index = load_index(ref_path, folder)
    if ws is not None and ws != index.ws:
        raise UsageError(f"--ws {ws} asked, but the index {folder} has ws {index.ws}; "
                         f"rebuild it with 'gkmap index --ws {ws}' or drop --ws")
    return index
