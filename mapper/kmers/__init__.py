"""k-mer counting, SNCGPU style: 2-bit multi-word k-mers, bins, sort + run-length encoding, compressed
sorted runs and a per-bin merge (docs/kmers.md).

    encode.py   codes -> k-mer keys uint64 [C, n] (channels), canonical form
    binning.py  keys -> bins by most significant bits
    count.py    cpu sort + RLE;  gpu.py: the same on CUDA (kernels/kmer_sort.cu); backend.py picks one
    codec.py    VLQ deltas for k-mers, Simple-8b for counts
    store.py    the table file (write / read back)
    merge.py    per-bin merge of sorted runs;  counter.py: the two-phase pipeline within a memory budget
    reading.py  FASTA/FASTQ -> code chunks;  text.py: dump, histo, query;  command.py: `gkmap kmers`
"""
from mapper.kmers.counter import count_kmers
from mapper.kmers.store import KmerTable

__all__ = ["count_kmers", "KmerTable"]
