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
`map` refuses an index of another version or another reference with a one-line error. An index is written
only into a new folder, an empty one or over an index of gkmap's own (`index_folder`): never into a folder
of the user's, which it would destroy.
"""
import contextlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mapper import __version__
from mapper.alphabet import CODE_N
from mapper.errors import IndexFormatError, UsageError
from mapper.outputs import remove_stale, temp_prefix, umask
from mapper.reference import Reference, file_checksum, read_fasta, require_readable

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


def build_arrays(reference, ws):
    """(offsets, positions) of the index of `reference` for k-mer size ws."""
    if len(reference.codes) >= 2**32:
        raise UsageError("references of 2**32 bases or more are not supported by this index format")
    keys = kmer_keys(reference.codes, ws)
    valid = valid_kmer_starts(reference, ws)
    packed = keys[valid].astype(np.uint64)
    del keys
    packed <<= np.uint64(32)
    packed |= np.flatnonzero(valid).astype(np.uint64)
    del valid
    packed.sort()
    positions = packed.astype(np.uint32)  # the low 32 bits
    packed >>= np.uint64(32)
    counts = np.bincount(packed.view(np.int64), minlength=4**ws)
    del packed
    offsets = np.zeros(4**ws + 1, dtype=np.uint32 if len(positions) < 2**32 else np.uint64)
    np.cumsum(counts, out=offsets[1:])
    return offsets, positions


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
    index only gkmap's own files are replaced or removed."""
    if not folder.exists():
        os.replace(tmp, folder)
        return
    (folder / "meta.json").unlink(missing_ok=True)
    for old in folder.iterdir():
        if _ours(old.name) and old.is_file() and not (tmp / old.name).exists():
            old.unlink()
    for new in sorted(tmp.iterdir(), key=lambda p: p.name == "meta.json"):
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
        yield tmp, reference_record(ref_path), read_fasta(ref_path, tmp / "ref.fai")


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


def write_index(tmp, arrays, meta, record, reference):
    """Save `arrays` as .npy files and meta.json: the common fields (magic, gkmap version, reference, contigs)
    and the kind's own `meta` (kind, format version, parameters, sizes)."""
    for name, array in arrays.items():
        np.save(tmp / f"{name}.npy", array)
    meta = {
        "magic": MAGIC, **meta, "gkmap_version": __version__,
        "reference": record,
        "contigs": [[n, int(l)] for n, l in zip(reference.names, reference.lengths)],
    }
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
    return meta


def load_index(ref_path, index_dir=None, checksum=None):
    """Load and validate the index of `ref_path` (memory-mapped arrays)."""
    folder = Path(index_dir) if index_dir else default_index_dir(ref_path)
    meta = read_meta(folder)
    check_reference(folder, meta, ref_path, "'gkmap index'", checksum)
    try:
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
    except (OSError, ValueError) as e:
        raise IndexFormatError(f"{folder}: damaged index ({e}); rebuild it with 'gkmap index'") from None
    names, lengths = zip(*meta["contigs"])
    reference = Reference.from_arrays(names, lengths, arrays["seq2bit"], arrays["nmask"])
    ws = int(meta["ws"])
    if len(arrays["offsets"]) != 4**ws + 1 or len(arrays["positions"]) != meta["positions"]:
        raise IndexFormatError(f"{folder}: damaged index (array sizes disagree with meta.json)")
    return KmerIndex(ws, arrays["offsets"], arrays["positions"], reference, folder)


def open_index(ref_path, ws=None, index_dir=None):
    """The index `map` uses: load it, or build it when the folder has none (like minimap2)."""
    require_readable(ref_path)
    folder = Path(index_dir) if index_dir else default_index_dir(ref_path)
    if not (folder / "meta.json").exists():
        log.info("no index in %s: building it", folder)
        return build_index(ref_path, ws or DEFAULT_WS, folder)
    index = load_index(ref_path, folder)
    if ws is not None and ws != index.ws:
        raise UsageError(f"--ws {ws} asked, but the index {folder} has ws {index.ws}; "
                         f"rebuild it with 'gkmap index --ws {ws}' or drop --ws")
    return index
