"""Block parser for reads files: a whole batch of FASTQ or FASTA records cut with a few numpy operations.

Why: dnaio builds one Python object per read (about 1.3 µs) and `reads._to_batch` then walks those objects
again: ~2.7 CPU-seconds per million reads holding the GIL in the reader thread, taken from the main thread
that drives the GPU. Here a batch costs a handful of large numpy operations (which release the GIL), one
`str.split()` for the names, and no Python per read.

Input: `read_chunks(stream)`, the decompressed bytes (what dnaio would read) in chunks of `CHUNK` bytes,
with the positions and values of their bytes <= 32 (reads.py has them read ahead by a thread).
Output, per batch of `batch_size` records (fewer only for the last), as in reads.ReadBatch:
    names    list[str]    each header's first word (Python's str.split() whitespace ends it)
    seq      uint8 [T]    the sequences concatenated, as in the file (reads.py upper-cases them)
    qual     uint8 [T]    the qualities concatenated (FASTQ), or None (FASTA)
    lengths  int64 [n]
It accepts only what it checks fully, and for which dnaio gives the same records:
    FASTQ  4-line records: '@' header, '+' line bare or repeating the header, as many qualities as bases;
           one '\\r' before a '\\n' is dropped (dnaio's CRLF rule); a missing final newline is fine.
    FASTA  '>' headers; sequence lines (one or many per record, or empty) of ASCII bytes above 32;
           CRLF line ends.
    Both   ASCII only; a header's first word starts right after its '@' / '>'.
    SAM    what SAM can hold (README "Errors and safety"): names of 1 to 254 bytes of printable ASCII but
           '@' (the specification's QNAME, [!-?A-~]{1,254}), sequences of letters and '.', qualities '!' to '~'.
Anything else (a malformed or truncated record, a lone '\\r' in FASTA, a '#' comment line, blanks in a
FASTA sequence line, an empty name, non-ASCII bytes, an error reading the stream) raises `Unsure` instead
of returning the batch that holds it: reads.py then has dnaio read the file, so the user gets dnaio's
records and dnaio's error (file, line, record) unchanged.
"""
import numpy as np

CHUNK = 1 << 22
_LF, _CR, _AT, _GT, _PLUS, _HASH = b"\n\r@>+#"
# Python's str.split() whitespace among ASCII bytes: all are <= 32, hence among the `low` positions
_SPACE = np.zeros(256, dtype=bool)
_SPACE[[byte for byte in range(128) if chr(byte).isspace()]] = True
# SAM's QNAME: [!-?A-~]{1,254}, printable ASCII but '@'
MAX_NAME = 254
NAME_BYTE = np.zeros(256, dtype=bool)
NAME_BYTE[33:127] = True
NAME_BYTE[ord("@")] = False
_NAME_OR_SPACE = NAME_BYTE | _SPACE


SEQ_BYTE = np.zeros(256, dtype=bool)  # SAM's SEQ, [A-Za-z=.]+, less '=' (it means "the reference's base")
SEQ_BYTE[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.")] = True


def sequence_ok(seq):
    """Whether every byte of `seq` (uint8) is an ASCII letter or '.': three SIMD passes for letters only (a
    letter of either case, OR 0x20, lies in 'a'..'z'; nothing else does), a table look-up only when not."""
    if not len(seq):
        return True
    folded = np.bitwise_or(seq, 0x20)
    folded -= ord("a")
    return int(folded.max()) < 26 or bool(SEQ_BYTE[seq].all())


def qualities_ok(qual):
    """Whether every byte of `qual` lies in '!'..'~' (SAM's QUAL)."""
    return qual is None or not len(qual) or (int(qual.min()) >= 33 and int(qual.max()) <= 126)


class Unsure(Exception):
    """The block parser met input it does not check itself: dnaio must read the file."""


def read_chunks(stream):
    """Yield (chunk, low, kind): `stream`'s bytes CHUNK at a time, the positions in the chunk of its bytes
    <= 32 (line ends, blanks, control bytes) and those bytes: every pass over all the bytes is done here,
    where the reading is (reads.py runs this in a thread of its own). Raises Unsure at a non-ASCII byte."""
    flags = np.empty(CHUNK, dtype=bool)
    while chunk := stream.read(CHUNK):
        array = np.frombuffer(chunk, dtype=np.uint8)
        if array.max() >= 128:
            raise Unsure  # dnaio: "Non-ASCII characters found in record", or a decoding error (FASTA)
        np.less_equal(array, 32, out=flags[:len(array)])
        low = np.flatnonzero(flags[:len(array)])
        yield chunk, low, array[low]


def _rows(data, starts, width):
    """data[s : s + width] for each of `starts`, as an (n, width) copy made a row at a time (a row is one
    numpy void item: one memcpy, where a uint8 window would be copied byte by byte)."""
    items = np.ndarray((len(data) - width + 1,), dtype=f"V{width}", buffer=data, strides=(1,))
    return items[starts].view(np.uint8).reshape(-1, width)


def _as_rows(data, starts, lengths):
    """Whether `_rows` as wide as the longest of `lengths` suits: little wasted (not one long item among
    short ones), and not past the end of `data` (`starts` ascending)."""
    width = int(lengths.max())
    return len(starts) * width <= 2 * int(lengths.sum()) + 64 * len(starts) and int(starts[-1]) + width <= len(data)


def _tail_mask(lengths, width):
    """bool [n, width], True from column lengths[i] on in row i: rows of a small table, copied whole (a
    comparison for wide rows, whose table would take width**2 bytes)."""
    if width > 1024:
        return np.arange(width) >= lengths[:, None]
    table = np.arange(width) >= np.arange(width + 1)[:, None]
    return _rows(table.view(np.uint8).reshape(-1), lengths * width, width).view(bool)


def gather(data, starts, lengths):
    """data[starts[i] : starts[i] + lengths[i]] for every i (starts ascending), concatenated (uint8)."""
    if not lengths.any():
        return np.empty(0, dtype=np.uint8)
    if not _as_rows(data, starts, lengths):
        shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        return data[shift + np.arange(shift.size)]
    width = int(lengths.max())
    rows = _rows(data, starts, width)
    if (lengths == width).all():
        return rows.reshape(-1)
    return rows[~_tail_mask(lengths, width)]


def _same_bytes(data, starts, others, lengths):
    """Whether data[starts[i]:][:lengths[i]] == data[others[i]:][:lengths[i]] for every i (`others` ascending
    and after `starts`)."""
    if not _as_rows(data, others, lengths):
        return np.array_equal(gather(data, starts, lengths), gather(data, others, lengths))
    width = int(lengths.max())
    differ = _rows(data, starts, width) != _rows(data, others, width)
    return not (differ & ~_tail_mask(lengths, width)).any()


def _word_ends(low, kind, starts, line_ends):
    """Where the words that begin at `starts` end: at the next whitespace byte (`low`, `kind`: positions and
    values of the bytes <= 32, among which every whitespace byte); at their line's end (`line_ends`) when
    the only such bytes are line ends (most files)."""
    if (kind == _LF).all():
        return line_ends
    spaces = low[_SPACE[kind]]
    return spaces[np.searchsorted(spaces, starts)]


def _first_words(data, starts, ends):
    """The names data[starts[i]:ends[i]] (each followed by a whitespace byte) as a list of str."""
    lengths = ends - starts
    if (lengths == 0).any():
        raise Unsure  # an empty name, or blanks before it: dnaio's rule, and reads.py's error
    if int(lengths.max()) > MAX_NAME:
        raise Unsure  # not a SAM read name: reads.py's check names the record
    if _as_rows(data, starts, lengths + 1):  # each name, its whitespace byte, maybe more: blanked
        text = _rows(data, starts, int(lengths.max()) + 1)
        np.putmask(text, _tail_mask(lengths, text.shape[1]), ord(" "))
    else:
        text = gather(data, starts, lengths + 1)
    if not _NAME_OR_SPACE[text].all():
        raise Unsure  # not a SAM read name: reads.py's check names the record
    return text.tobytes().decode("ascii").split()


class _Buffer:
    """The bytes not yet parsed: data[start:stop] of one array the chunks are copied into (`start` is a
    record's start; when the array is full, what is left is moved to its front). Per chunk, the positions in
    `data` of its bytes <= 32 (`low`), those bytes (`kind`) and the positions of the format's marks
    (`marker(data, low, kind, begin, end, at_line_start)`: FASTQ line ends, FASTA header starts)."""

    def __init__(self, chunks, marker):
        self.chunks, self.marker = chunks, marker
        self.data = np.empty(2 * CHUNK, dtype=np.uint8)
        self.start = self.stop = 0
        self.low, self.kind, self.marks = [], [], []
        self.eof = False

    def read(self):
        """Take one more chunk; at the end of the stream set `eof` (and end the last line, as dnaio does)."""
        try:
            chunk, low, kind = next(self.chunks)
        except StopIteration:
            self.eof = True
            if self.stop == self.start or self.data[self.stop - 1] == _LF:
                return
            chunk, low, kind = b"\n", np.zeros(1, dtype=np.int64), np.full(1, _LF, dtype=np.uint8)
        except Exception:  # Unsure, or a read error: dnaio meets it again, and reports it its own way
            raise Unsure from None
        if self.stop + len(chunk) > len(self.data):
            self._compact(len(chunk))
        begin = self.stop
        self.stop += len(chunk)
        self.data[begin:self.stop] = np.frombuffer(chunk, dtype=np.uint8)
        low = low + begin
        self.low.append(low)
        self.kind.append(kind)
        at_line_start = begin == 0 or self.data[begin - 1] == _LF
        self.marks.append(self.marker(self.data, low, kind, begin, self.stop, at_line_start))

    def _compact(self, room):
        size = self.stop - self.start
        if size + room > len(self.data) // 2:
            data = np.empty(2 * (size + room), dtype=np.uint8)
            data[:size] = self.data[self.start:self.stop]
            self.data = data
        else:
            self.data[:size] = self.data[self.start:self.stop]
        self.low = [positions - self.start for positions in self.low]
        self.marks = [positions - self.start for positions in self.marks]
        self.start, self.stop = 0, size

    def find(self, k):
        """Position of the k-th mark (from 1) from `start` on, reading as far as needed; None if the stream
        ends before (`count()` then says how many there are)."""
        while True:
            counts = self._counts()
            if len(counts) and counts[-1] >= k:
                i = int(np.searchsorted(counts, k))
                return int(self.marks[i][k - 1 - (counts[i - 1] if i else -self._skip())])
            if self.eof:
                return None
            self.read()

    def count(self):
        counts = self._counts()
        return int(counts[-1]) if len(counts) else 0

    def _skip(self):
        return int(np.searchsorted(self.marks[0], self.start)) if self.marks else 0

    def _counts(self):
        return np.cumsum([len(m) for m in self.marks]) - self._skip()

    def take(self, end):
        """The bytes from `start` to `end` as (data, low, kind, start, end): data[start:end], and the
        positions and values of its bytes <= 32. `drop(end)` once they are parsed."""
        low, kind = (np.concatenate(a) if len(a) > 1 else a[0] for a in (self.low, self.kind))
        first, last = np.searchsorted(low, [self.start, end])
        return self.data, low[first:last], kind[first:last], self.start, end

    def drop(self, end):
        """Forget the bytes before `end`."""
        self.start = end
        while self.low and all(not len(p) or p[-1] < end for p in (self.low[0], self.marks[0])):
            del self.low[0], self.kind[0], self.marks[0]


class _Blocks:
    """Batches of one format: iterate for [names, seq, qual, lengths]."""

    def __init__(self, chunks, batch_size):
        self.buffer = _Buffer(chunks, self.marker)
        self.batch_size = batch_size

    def _parse(self, data, low, kind, base, end):
        batch = self._records(data, low, kind, base, end)
        self.buffer.drop(end)
        return batch


class FastqBlocks(_Blocks):
    @staticmethod
    def marker(data, low, kind, begin, end, at_line_start):
        return low[kind == _LF]

    def __iter__(self):
        buffer, need = self.buffer, 4 * self.batch_size
        while True:
            found = buffer.find(need)
            if found is None:  # the last records
                lines = buffer.count()
                if lines % 4:
                    raise Unsure  # a truncated record: dnaio's "Premature end of file"
                if lines == 0:
                    return
                found = buffer.find(lines)
            yield self._parse(*buffer.take(found + 1))

    @staticmethod
    def _records(data, low, kind, base, end):
        breaks = np.flatnonzero(kind == _LF).reshape(-1, 4)  # (indices in `low`)
        ends = low[breaks]
        starts = np.empty_like(ends)
        starts.reshape(-1)[0] = base
        np.add(ends.reshape(-1)[:-1], 1, out=starts.reshape(-1)[1:])
        if not ((data[starts[:, 0]] == _AT).all() and (data[starts[:, 2]] == _PLUS).all()):
            raise Unsure
        if (kind == _CR).any():
            ends -= data[ends - 1] == _CR  # dnaio drops one '\r' before each '\n'
        lengths = ends - starts
        if (lengths[:, 1] != lengths[:, 3]).any():
            raise Unsure
        repeated = lengths[:, 2] > 1  # a '+' line that repeats the header must repeat it exactly
        if repeated.any():
            header, plus = starts[repeated, 0] + 1, starts[repeated, 2] + 1
            if (lengths[repeated, 2] != lengths[repeated, 0]).any() or \
                    not _same_bytes(data, header, plus, lengths[repeated, 0] - 1):
                raise Unsure
        # A name ends at the header's first byte <= 32 (the next one in `low`) if that is whitespace.
        first_low = np.zeros(len(ends), dtype=np.int64)
        first_low[1:] = breaks[:-1, 3] + 1
        names_end = low[first_low] if _SPACE[kind[first_low]].all() else \
            _word_ends(low, kind, starts[:, 0] + 1, ends[:, 0])
        names = _first_words(data, starts[:, 0] + 1, names_end)
        seq = gather(data, starts[:, 1], lengths[:, 1])
        qual = gather(data, starts[:, 3], lengths[:, 3])
        if not (sequence_ok(seq) and qualities_ok(qual)):
            raise Unsure  # not SAM's SEQ or QUAL: reads.py's check names the record
        return names, seq, qual, lengths[:, 1].copy()


class FastaBlocks(_Blocks):
    @staticmethod
    def marker(data, low, kind, begin, end, at_line_start):
        breaks = low[kind == _LF]
        line_starts = breaks[breaks + 1 < end] + 1
        if at_line_start:
            line_starts = np.concatenate([[begin], line_starts])
        return line_starts[data[line_starts] == _GT]

    def __iter__(self):
        buffer, need = self.buffer, self.batch_size + 1  # a record ends where the next header starts
        while True:
            found = buffer.find(need)
            if found is None:  # the last records: up to the end of the stream
                if buffer.start == buffer.stop:
                    return
                found = buffer.stop
            yield self._parse(*buffer.take(found))

    @staticmethod
    def _records(data, low, kind, base, end):
        breaks = low[kind == _LF]
        line_starts = np.concatenate([[base], breaks[:-1] + 1])
        first = data[line_starts]
        if (first == _HASH).any():
            raise Unsure  # a comment line (dnaio skips it)
        headers = line_starts[first == _GT]  # the first is at `base`
        returns = low[kind == _CR]
        if (data[returns + 1] != _LF).any():
            raise Unsure  # a lone '\r' ends a line for dnaio (universal newlines)
        header_ends = breaks[np.searchsorted(breaks, headers)]
        blanks = low[(kind != _LF) & (kind != _CR)]
        record = np.searchsorted(headers, blanks, side="right") - 1
        if (blanks > header_ends[record]).any():
            raise Unsure  # a blank or control byte in a sequence line (dnaio strips some, keeps others)
        names = _first_words(data, headers + 1, _word_ends(low, kind, headers + 1, header_ends))
        body_starts, body_ends = header_ends + 1, np.append(headers[1:], end)
        seq = gather(data, body_starts, body_ends - body_starts)
        line_ends = np.searchsorted(low, body_ends) - np.searchsorted(low, body_starts)
        seq = seq[seq > 32]
        if not sequence_ok(seq):
            raise Unsure  # not SAM's SEQ: reads.py's check names the record
        return names, seq, None, body_ends - body_starts - line_ends
