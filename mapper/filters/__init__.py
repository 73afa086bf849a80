"""Pre-alignment filters: cheap tests between seeding and verification that reject candidate windows
which cannot hold an alignment within e edits.

Interface used by the mapper (pipeline.py): a filter is called on one group of candidates that share
read length L and threshold e, as

    accept, estimate = filt(reads, windows, e)

    reads    uint8 [n, L]      codes 0..3, 4 = N (mapper.alphabet), the read on the candidate's strand
    windows  uint8 [n, W]      W >= L; the reference window the verifier will search (semi-global:
                               the read may start at any offset 0..W-L of the window), code 4 = N
                               (reference N, or padding beyond the contig end)
    accept   bool  [n]
    estimate int16 [n]         a lower bound of the edit distance on accept, -1 on reject

`none` accepts everything. Improved GateKeeper must never reject a window in which edlib (HW mode, N
never matching) finds the read within e edits.
"""
