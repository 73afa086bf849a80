"""Reference genome: FASTA (plain, gzip or BGZF) -> one global sequence of 2-bit codes plus a contig table.

Output (`Reference`):
    codes    uint8 [G]   all contigs concatenated in FASTA order, one byte per base, 0..3 = ACGT, 4 = N
                         (any non-ACGT letter; lower case is upper-cased first)
    names    list[str]   contig names (first word of the header line), FASTA order
    starts   int64 [C]   global position of each contig's first base; lengths int64 [C]

Positions are global (0-based into `codes`); `locate()` maps them back to (contig, offset). No padding sits
between contigs: stages that look across a boundary (k-mers, verification windows) clip to the contig.
On disk (in the index folder) the sequence is stored as 2-bit words (16 bases per uint32, first base in
bits 31..30, the layout the kernels read) plus a packed bit mask of N positions.

One FASTA reader, one set of rules, whatever the compression (plain, gzip, BGZF, or anything xopen
decompresses): the decompressed bytes are parsed with numpy, a few megabytes at a time (README "Errors and
safety", "FASTA references"):
  - the file starts with a '>' header (blank lines before it are ignored); a contig's name is the header's
    first word, which must be a valid SAM reference name (`CONTIG_NAME`: not '*', not starting with '=' or
    '*', only the characters the SAM specification allows) and unique; the rest of the header is free;
  - sequence lines hold ASCII letters only (any case; every letter but A, C, G, T is N); lines may have any
    width; blank lines are ignored; a line ends with LF or CR LF (a CR anywhere else is refused);
  - anything else (a digit, a space or tab, '*', '-', a control or non-ASCII byte in a sequence line, an empty
    contig, a missing name, corrupt or truncated compressed data) is refused with one line naming the file,
    the line and the contig.
"""
import hashlib
import lzma
import os
import re
import threading
import zlib

import numpy as np

from mapper.alphabet import CODE_N, ENCODE, REF_ASCII, pack_2bit, pack_n_mask, unpack_2bit
from mapper.errors import InputError

# The SAM specification's RNAME (and @SQ SN) rule, '*' (no reference) excluded.
CONTIG_NAME = re.compile(r"[0-9A-Za-z!#$%&+./:;?@^_|~-][0-9A-Za-z!#$%&*+./:;=?@^_|~-]*")


def _optional_errors():
    errors = []
    try:
        from isal.isal_zlib import error as isal_error
        errors.append(isal_error)
    except ImportError:  # pragma: no cover - depends on the installed packages
        pass
    try:
        from zlib_ng.zlib_ng import error as zlib_ng_error
        errors.append(zlib_ng_error)
    except ImportError:  # pragma: no cover
        pass
    try:
        from zstandard import ZstdError
        errors.append(ZstdError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


# What reading a damaged or truncated compressed file may raise, besides gzip.BadGzipFile (an OSError).
DECOMPRESSION_ERRORS = (EOFError, zlib.error, lzma.LZMAError) + _optional_errors()


def stream_error(path, error):
    """The InputError for an exception met while reading (decompressing) `path`."""
    text = str(error).strip().rstrip(".") or error.__class__.__name__
    if isinstance(error, EOFError):
        return InputError(path, f"truncated compressed file ({text})")
    if isinstance(error, DECOMPRESSION_ERRORS) or error.__class__.__name__ == "BadGzipFile":
        return InputError(path, f"corrupt compressed data ({text})")
    return InputError(path, f"cannot read the file ({error.__class__.__name__}: {text})")


def shared_bytes(nbytes):
    """(uint8 array of nbytes, path) where the array is memory this process's children can map by `path`
    (a memfd, opened through /proc/PID/fd: the render processes map the codes where the main process
    unpacked them, instead of a 3.1 GB file written for them at every run); (plain array, None) where the
    system has no memfd or no such /proc. The memfd stays open while the array lives."""
    if not hasattr(os, "memfd_create"):
        return np.empty(nbytes, dtype=np.uint8), None
    import mmap
    import weakref
    try:
        fd = os.memfd_create("gkmap-reference", os.MFD_CLOEXEC)
    except OSError:  # a sandbox that forbids the call
        return np.empty(nbytes, dtype=np.uint8), None
    try:
        os.ftruncate(fd, max(nbytes, 1))
        path = f"/proc/{os.getpid()}/fd/{fd}"
        os.close(os.open(path, os.O_RDONLY))  # what a child will do
        memory = mmap.mmap(fd, max(nbytes, 1))
    except OSError:
        os.close(fd)
        return np.empty(nbytes, dtype=np.uint8), None
    weakref.finalize(memory, os.close, fd)
    return np.frombuffer(memory, dtype=np.uint8, count=nbytes), path


def unpack_codes(seq2bit, n, nmask):
    """(the n codes of an index's packed arrays, the path other processes map them by or None): alphabet.
    unpack_2bit's codes, by kernels/reference.cu built for the host, on the cores the host layer may use,
    into `shared_bytes`, where a C++ compiler is; by numpy's look-ups into private memory without one."""
    from mapper.device import host  # the kernels' host build, loaded by the first unpacking only
    if not host.available():
        return unpack_2bit(seq2bit, n, nmask), None
    words = np.ascontiguousarray(seq2bit, dtype=np.uint32)
    mask = np.ascontiguousarray(nmask, dtype=np.uint8)
    codes, path = shared_bytes(max(len(words), 1) * 16)
    host.launch(host.function("reference.cu", "unpack_2bit"), len(words), words, len(words), mask, len(mask), codes)
    return codes[:n], path


class Reference:
    """The sequence and its contig table. Loaded from an index, the codes are unpacked from the 2-bit words on
    first use (`codes`), not at load: a client that only writes the SAM header (a Dask run's) or checks a
    sample of positions (`bases`) never pays the ~1 s a Gbp of unpacking a human genome. The cuda backend
    starts the host's unpacking in a thread at its load (`unpack_behind`) and meanwhile unpacks the packed
    words on the GPU itself (cuda_mapping._device_codes); `codes` waits for that thread rather than
    unpacking again."""

    def __init__(self, names, starts, lengths, codes=None, packed=None):
        self.names, self.starts, self.lengths = list(names), starts, lengths
        self._codes, self._packed = codes, packed  # packed: (seq2bit, nmask) until codes is unpacked
        self.codes_path = None  # where this process's children can map the codes (unpack_codes), or None
        self._unpacking, self._unpacker = threading.Lock(), None

    def __getstate__(self):
        """Pickled without codes_path (it names a file of this process), the lock and the thread."""
        return {**self.__dict__, "codes_path": None, "_unpacking": None, "_unpacker": None}

    def __setstate__(self, state):
        self.__dict__.update(state, _unpacking=threading.Lock())

    @property
    def size(self):
        """Bases in all contigs (the length of `codes`)."""
        return int(np.sum(self.lengths))

    @property
    def codes(self):
        if self._codes is None:
            with self._unpacking:
                if self._codes is None:
                    seq2bit, nmask = self._packed
                    self._codes, self.codes_path = unpack_codes(seq2bit, self.size, nmask)
                    self._packed = None  # after _codes: a reader that still saw the packed arrays may use them
        return self._codes

    @property
    def packed(self):
        """(seq2bit, nmask), the index's packed arrays, while the codes are not unpacked; else None."""
        return self._packed

    def unpack_behind(self):
        """Start unpacking the codes in a thread of their own, for a caller that needs them soon but not
        now: `codes` then returns them once that thread is done (once per reference: a second call does
        nothing). Its error, if any, comes from the next `codes`, which unpacks again."""
        if self._codes is None and self._unpacker is None:
            self._unpacker = threading.Thread(target=lambda: self.codes, name="gkmap-unpack", daemon=True)
            self._unpacker.start()

    def bases(self, positions):
        """Codes at global `positions` (int64 array), read from the 2-bit words while `codes` is not unpacked."""
        packed = self._packed
        if packed is None:
            return self.codes[positions]
        seq2bit, nmask = packed
        words = np.asarray(seq2bit[positions >> 4]).astype(np.int64)
        codes = ((words >> (30 - 2 * (positions & 15))) & 3).astype(np.uint8)
        masked = (np.asarray(nmask[positions >> 3]) >> (7 - (positions & 7)).astype(np.uint8)) & 1
        codes[masked.astype(bool)] = CODE_N
        return codes

    def keys_at(self, starts, k):
        """(keys int64, has_n bool) of the k-mers at global `starts` (int64, each k-mer inside the
        reference): the 2-bit key, first base most significant (an N counts as A), and whether it holds an
        N. While the codes are packed and k <= 16, a k-mer is two word reads and one 3-byte N-mask read
        (its 2k bits and k mask bits never span more), not k base reads: `gkmap index --check` reads a key
        for every position of the index."""
        packed = self._packed
        if packed is None or k > 16:
            keys = np.zeros(len(starts), dtype=np.int64)
            has_n = np.zeros(len(starts), dtype=bool)
            for i in range(k):
                c = self.bases(starts + i)
                has_n |= c == CODE_N
                keys = (keys << 2) | (c & 3)
            return keys, has_n
        # a read past the last word or mask byte (clipped to it) only fills bits that the shifts drop: the
        # k-mer ends inside the reference, so its own bits all lie in words and bytes that exist
        seq2bit, nmask = packed
        word = starts >> 4
        pair = np.asarray(seq2bit[word]).astype(np.uint64) << np.uint64(32)
        pair |= np.asarray(seq2bit[np.minimum(word + 1, len(seq2bit) - 1)]).astype(np.uint64)
        shift = (64 - 2 * k - 2 * (starts & 15)).astype(np.uint64)
        keys = ((pair >> shift) & np.uint64((1 << 2 * k) - 1)).astype(np.int64)
        window = np.zeros(len(starts), dtype=np.uint32)
        for i in range(3):  # mask bytes byte .. byte + 2, most significant first
            at = np.minimum((starts >> 3) + i, len(nmask) - 1)
            window = (window << np.uint32(8)) | np.asarray(nmask[at]).astype(np.uint32)
        mask_shift = (24 - k - (starts & 7)).astype(np.uint32)
        has_n = ((window >> mask_shift) & np.uint32((1 << k) - 1)) != 0
        return keys, has_n

    @property
    def ends(self):
        return self.starts + self.lengths

    @property
    def ascii(self):
        """The sequence spelled for edlib (alphabet.REF_ASCII: N never matches a read's N); built once."""
        if getattr(self, "_ascii", None) is None:
            self._ascii = REF_ASCII[self.codes]
        return self._ascii

    def locate(self, positions):
        """Global positions -> (contig index, 0-based offset in that contig), vectorised."""
        contig = np.searchsorted(self.starts, positions, side="right") - 1
        return contig, positions - self.starts[contig]

    def to_arrays(self):
        """The arrays stored in an index folder (see module docstring)."""
        return {"seq2bit": pack_2bit(self.codes), "nmask": pack_n_mask(self.codes)}

    @classmethod
    def from_arrays(cls, names, lengths, seq2bit, nmask):
        """The reference of an index folder's arrays, its codes unpacked on first use."""
        lengths = np.asarray(lengths, dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        return cls(names, starts, lengths, packed=(seq2bit, nmask))


def require_readable(path):
    """Raise InputError unless `path` is readable (checked before any work starts). Pipes and process
    substitutions (`<(zcat reads.fq.gz)`) are fine; a folder is not."""
    if not os.path.exists(path):
        raise InputError(path, "no such file")
    if os.path.isdir(path):
        raise InputError(path, "is a folder, not a file")
    if not os.access(path, os.R_OK):
        raise InputError(path, "cannot read the file (permission denied)")


def file_checksum(path):
    """BLAKE2b of the file's bytes: identifies the reference an index was built from."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_contig_name(name):
    """Why `name` cannot be a SAM reference name (None if it can)."""
    if CONTIG_NAME.fullmatch(name):
        return None
    if name == "*":
        return "'*' means 'no reference' in SAM"
    if name[:1] in "=*":
        return f"it starts with '{name[0]}'"
    bad = next(c for c in name if not CONTIG_NAME.fullmatch("A" + c))
    return f"it holds {bad!r}, which SAM forbids in a reference name"


_CHUNK = 1 << 24
_LF, _CR, _GT = b"\n\r>"
_LETTER = np.zeros(256, dtype=bool)
_LETTER[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")] = True
_SEQUENCE_BYTE = _LETTER.copy()  # what a sequence line may hold, its line end included
_SEQUENCE_BYTE[[_LF, _CR]] = True
_SHOWN = {32: "a space", 9: "a tab", 0: "a NUL byte"}
FAST_HEADERS = 16  # headers a block may hold for fast_block; more go to `block` whole (~55 us a call)
# bytes.translate's table for a block of sequence lines: a letter's code, 0xFF for any other byte
_TRANSLATE = bytes(int(ENCODE[b]) if _LETTER[b] else 0xFF for b in range(256))


class _FastaParser:
    """The state of one reading: contigs so far (names, lengths, code chunks, header lines) and lines read."""

    def __init__(self, path):
        self.path = path
        self.names, self.lengths, self.header_lines, self.chunks = [], [], [], []
        self.current = 0  # bases of the contig being read, so far
        self.lines = 0  # lines before the block being parsed

    def line(self, at, breaks):
        """The line number (from 1) of byte `at` of the block whose line ends are `breaks`."""
        return self.lines + 1 + int(np.searchsorted(breaks, at))

    def fast_block(self, data):
        """Parse `data` (bytes: whole lines) with the bytes methods' C loops where it is what nearly all of a
        genome is: its sequence lines go through `_sequence`, and only its header lines (and any piece that
        `_sequence` declines) through `block`'s numpy passes, which took ~15 ns a base (47 s of a 3.1 Gbp
        build) against ~2 here. Returns False, having done nothing, where a CR, a '>' inside a line or more
        than FAST_HEADERS headers (a block of short contigs) make the block `block`'s alone."""
        if b"\r" in data:
            return False
        pieces, at, start = [], data.find(b">"), 0
        while at >= 0:
            if at and data[at - 1] != _LF or len(pieces) >= 2 * FAST_HEADERS:
                return False  # many headers (short contigs): one numpy pass over the block beats a call each
            end = data.find(b"\n", at) + 1 or len(data)
            pieces += [(data[start:at], False), (data[at:end], True)]
            start, at = end, data.find(b">", end)
        pieces.append((data[start:], False))
        for piece, header in pieces:
            if piece and (header or not self._sequence(piece)):
                self.block(np.frombuffer(piece, dtype=np.uint8), False)
        return True

    def _sequence(self, data):
        """Sequence lines of the open contig, LF line ends, letters only: two C passes (bytes.translate
        dropping the line ends, a search for a byte it did not translate). False, having done nothing, for
        anything else, which `block` parses and reports."""
        if not self.names:
            return False
        codes = data.translate(_TRANSLATE, b"\n")
        if codes.find(b"\xff") >= 0:
            return False
        if codes:
            self.chunks.append(np.frombuffer(codes, dtype=np.uint8))
        self.current += len(codes)
        self.lines += len(data) - len(codes)  # the line ends, the only bytes dropped
        return True

    def block(self, data, final):
        """Parse `data` (uint8): whole lines, the last one unterminated only when `final`. Of the problems in
        it, the first in the file is reported, so that the error does not depend on where blocks are cut."""
        n = len(data)
        breaks = np.flatnonzero(data == _LF)
        line_starts = np.concatenate([[0], breaks + 1])
        line_starts = line_starts[line_starts < n]
        headers = line_starts[data[line_starts] == _GT]
        header_ends = np.append(breaks, n)[np.searchsorted(breaks, headers)]
        problems = []  # (byte position, message, line or None: the position's)
        names = []
        for start, end in zip(headers.tolist(), header_ends.tolist()):
            text = bytes(data[start + 1:end]).decode("ascii", "replace")
            words = text.split(None, 1)
            if not text[:1].strip() or not words:
                problems.append((start, "a header without a contig name ('>' must be followed by the name)", None))
                break
            problem = check_contig_name(words[0])
            if problem:
                problems.append((start, f"contig name {words[0][:80]!r} is not a valid SAM reference name: "
                                        f"{problem}", None))
                break
            names.append(words[0])
        in_header = np.zeros(n + 1, dtype=np.int8)
        in_header[headers] = 1
        in_header[header_ends] -= 1
        in_header = np.cumsum(in_header[:n], dtype=np.int8).view(bool)
        returns = np.flatnonzero(data == _CR)
        lone = returns[(returns + 1 < n) & (data[np.minimum(returns + 1, n - 1)] != _LF)]
        if len(lone):
            problems.append((int(lone[0]), "a carriage return (CR) that does not end a line", None))
        returns = returns[~in_header[returns]]  # those of sequence lines
        bad = ~_SEQUENCE_BYTE[data]
        bad &= ~in_header
        if bad.any():
            at = int(np.argmax(bad))
            k = int(np.searchsorted(headers, at, side="right")) - 1
            contig = (names[k] if k < len(names) else None) if k >= 0 else self.names[-1] if self.names else None
            if k < 0 and not self.names:
                problems.append((at, "not a FASTA file (it does not start with a '>' header)", None))
            elif contig is not None:
                byte = int(data[at])
                shown = _SHOWN.get(byte) or (repr(chr(byte)) if 32 < byte < 127 else f"byte 0x{byte:02x}")
                problems.append((at, f"{shown} in a sequence line of contig '{contig}' (only letters are allowed)",
                                 None))
        del bad
        keep = ~in_header
        keep &= _LETTER[data]
        bases = data[keep]
        del keep
        # letters before each header: its position less the header bytes, line ends and CRs before it
        header_bytes = np.concatenate([[0], np.cumsum(header_ends - headers)[:-1]]).astype(np.int64)
        before = headers - header_bytes - np.searchsorted(breaks, headers) - np.searchsorted(returns, headers)
        before = [0] + before.tolist() + [len(bases)]
        if before[1] and not self.names:
            problems.append((0, "not a FASTA file (it does not start with a '>' header)", None))
        sizes = [self.current + before[1]] + [b - a for a, b in zip(before[1:], before[2:])]
        owners = [(self.names[-1], self.header_lines[-1])] if self.names else [None]
        owners += [(name, self.line(start, breaks)) for name, start in zip(names, headers.tolist())]
        for owner, size, start in zip(owners, sizes, headers.tolist()):  # the contigs that end in the block
            if owner is not None and size == 0:
                problems.append((start, f"contig '{owner[0]}' is empty", owner[1]))
                break
        if problems:
            at, message, line = min(problems, key=lambda p: p[0])
            raise InputError(self.path, message, line=line or self.line(at, breaks))
        del in_header
        self.current = sizes[0]
        for (name, line), size in zip(owners[1:], sizes[1:]):
            self.end_contig()
            self.names.append(name)
            self.header_lines.append(line)
            self.current = size
        if len(bases):
            self.chunks.append(ENCODE[bases])
        self.lines += len(breaks)

    def end_contig(self):
        if not self.names:
            return
        if self.current == 0:
            raise InputError(self.path, f"contig '{self.names[-1]}' is empty", line=self.header_lines[-1])
        self.lengths.append(self.current)


def _open(path):
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic[:2] == b"\x1f\x8b" or magic[:3] == b"BZh" or magic == b"\xfd7zXZ\x00" or magic[:4] == b"\x28\xb5\x2f\xfd":
        from xopen import xopen
        return xopen(path, "rb", threads=0)
    return open(path, "rb")


def read_fasta(path, fai_path=None):
    """Read a FASTA file (plain or compressed, one set of rules: module docstring) into a `Reference`.
    `fai_path` is kept for callers of the former reader (pyfaidx's index): nothing is written there."""
    path = os.fspath(path)
    require_readable(path)
    parser = _FastaParser(path)
    try:
        with _open(path) as stream:
            pending = []  # what is read of a line longer than a chunk
            while True:
                chunk = stream.read(_CHUNK)
                final = not chunk
                if not final:
                    cut = chunk.rfind(b"\n") + 1
                    if cut == 0:  # no line ends here: read on
                        pending.append(chunk)
                        continue
                    data = b"".join(pending + [chunk[:cut]])
                    pending = [chunk[cut:]]
                else:
                    data = b"".join(pending)
                if data and not parser.fast_block(data):
                    parser.block(np.frombuffer(data, dtype=np.uint8), final)
                if final:
                    break
    except InputError:
        raise
    except (OSError, *DECOMPRESSION_ERRORS) as e:
        raise stream_error(path, e) from None
    parser.end_contig()
    names, lengths = parser.names, parser.lengths
    if not names:
        raise InputError(path, "no FASTA records found")
    if len(set(names)) != len(names):
        seen = set()
        dup = next(n for n in names if n in seen or seen.add(n))
        raise InputError(path, f"contig name '{dup}' occurs twice")
    lengths = np.array(lengths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    single = len(parser.chunks) == 1 and parser.chunks[0].flags.writeable  # _sequence's are read-only
    codes = parser.chunks[0] if single else np.concatenate(parser.chunks)
    return Reference(names, starts, lengths, codes)
