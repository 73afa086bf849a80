"""k-mer counting, SNCGPU style: 2-bit multi-word k-mers, bins, sort + run-length encoding, compressed
sorted runs and a per-bin merge (docs/kmers.md).

    reading.py  FASTA/FASTQ -> blocks (FASTA or FASTQ text, or codes);  fasta.py, fastq.py: text -> codes (numpy)
    encode.py   codes -> k-mer keys uint64 [C, n] (channels), canonical form
    binning.py  keys -> bins by most significant bits
    count.py    cpu sort + RLE;  codec.py: VLQ deltas for k-mers, Simple-8b for counts (numpy)
    layout.py   a run -> table bytes by kernels/kmer_codec.cu, on the GPU or compiled for the host
    backend.py  the cpu backend (extraction kernels compiled for the host, a thread pool over pieces and
                bins) and the choice of backend;
    gpu.py      the cuda backend: parsing, extraction, sort + RLE, encoding in kernels/kmer_*.cu
    store.py    the table file (write / read back)
    merge.py    per-bin merge of spilled runs;  counter.py: the two-phase pipeline within a memory budget
    text.py     dump, histo, query;  command.py: `gkmap kmers`
"""
from mapper.kmers.counter import count_kmers
from mapper.kmers.store import KmerTable

__all__ = ["count_kmers", "KmerTable"]
