"""Perfect hashing of the neighbourhoods of each seed block (the BDZ construction over a lookup2-style mix).

Input : keys uint32 [S] (2-bit packed neighbourhoods, <= 16 bases), grouped in blocks (`first` int64 [B+1]:
        block b owns keys first[b]:first[b+1], all distinct inside a block).
Output (`Phf`):
    seed_j   uint32 [B]       the hash family member J of each block (re-drawn until its hypergraph is acyclic)
    voff     int64  [B+1]     block b owns vertices voff[b]:voff[b+1], 3 thirds of r_b = (voff[b+1]-voff[b])/3
    g        uint8  [ceil(V/4)]  the assignment, 2 bits a vertex (vertex v: byte v >> 2, bits 2 (v & 3))
    vslot    int32  [V]       the key (slot) whose vertex v is, -1 for a vertex that is nobody's

Hash of a key k in a block with member J: Bob Jenkins' lookup2 hash of the key's 4 little-endian bytes, i.e.
a = 0x9e3779b9 + k, b = 0x9e3779b9, c = J + 4 (the byte count), then the 96-bit `mix(a, b, c)`; the three
words after the mix pick one vertex in each third: (a mod r, r + b mod r, 2r + c mod r). A block's keys are
the edges of a 3-partite 3-hypergraph; when it is acyclic (peelable) one can assign g so that for every key,
j = (g[v0] + g[v1] + g[v2]) mod 3 names the vertex v_j the key owns alone: phf(k) = v_j, a bijection from
the block's keys onto their owned vertices, checked by one comparison with the stored key (a non-key lands on
an arbitrary vertex). |V| >= 1.23 |E| (r = ceil((1.23 m + 2) / 3): small blocks get a little more room, since
two keys over three vertices are always cyclic).

Construction, vectorised over all blocks at once (no loop per block or per key):
1. peeling: synchronous rounds of "remove every edge that has a vertex of degree 1, freed by the first such
   vertex"; a vertex's incident edge is known from the sum of its alive edges' ids (exact in float64), so a
   degree-1 vertex names its edge directly. The rule fixes g bit for bit, which lets the GPU build
   (gpu_build.py) reproduce this build exactly.
2. blocks with an edge left over get J + 1 and are redone alone (in a compact vertex space).
3. assignment in reverse peeling order, a round at a time: the edge peeled in round t owns the vertex u
   that freed it; g[u] = (position of u - the other two g) mod 3. Edges of one round cannot touch each other's
   free vertex (it had degree 1), and later rounds' free vertices are not in earlier edges, so the other two
   g are final when a round is assigned.
"""
from dataclasses import dataclass

import numpy as np

from mapper.seeding import ragged_arange

GOLDEN = np.uint32(0x9E3779B9)
MAX_ATTEMPTS = 64  # re-draws of J before a block is declared impossible (never seen: each try fails rarely)


def mix(a, b, c):
    """lookup2's 96-bit mix of three uint32 arrays (new arrays; wraps modulo 2**32)."""
    a, b, c = (np.asarray(x, dtype=np.uint32).copy() for x in (a, b, c))
    for sa, sb, sc in ((13, 8, 13), (12, 16, 5), (3, 10, 15)):
        a -= b; a -= c; a ^= c >> np.uint32(sa)  # noqa: E702 (the three lines of a round read as one)
        b -= c; b -= a; b ^= a << np.uint32(sb)  # noqa: E702
        c -= a; c -= b; c ^= b >> np.uint32(sc)  # noqa: E702
    return a, b, c


def key_vertices(keys, seed_j, r):
    """int64 [n, 3]: the three block-local vertices of each key (uint32) under members seed_j and sizes r."""
    keys = np.asarray(keys, dtype=np.uint32)
    a, b, c = mix(GOLDEN + keys, np.full_like(keys, GOLDEN), np.asarray(seed_j, dtype=np.uint32) + np.uint32(4))
    r = np.asarray(r, dtype=np.int64)
    return np.stack([a % r, r + b % r, 2 * r + c % r], axis=1) if len(keys) else np.zeros((0, 3), np.int64)


def third_sizes(m):
    """r per block of m keys: 3r >= 1.23 m + 2 (0 for an empty block)."""
    m = np.asarray(m, dtype=np.int64)
    return np.where(m > 0, (123 * m + 200 + 299) // 300, 0)


@dataclass
class Phf:
    seed_j: np.ndarray
    voff: np.ndarray
    g: np.ndarray
    vslot: np.ndarray

    def assignment(self, vertices):
        """g (0..2) of global vertices."""
        return (self.g[vertices >> 2] >> (2 * (vertices & 3)).astype(np.uint8)) & 3


def peel(edges, n_vertices):
    """Peel a 3-hypergraph, a synchronous round at a time. edges int64 [m, 3] (vertex ids < n_vertices, three
    distinct per edge). Round t removes every edge that has a vertex of degree 1 at the start of the round, and
    its free vertex is the first (lowest position) such vertex: a rule that does not depend on the order in
    which degree-1 vertices are visited, so kernels/phf.cu's pb_peel (a thread walking one block's queue)
    gives the same rounds and free vertices, hence the same g, bit for bit.
    Returns (round int64 [m] (-1: never peeled, a cycle), free int8 [m]: position 0..2 of the freeing vertex)."""
    m = len(edges)
    flat = edges.ravel()
    degree = np.bincount(flat, minlength=n_vertices).astype(np.int64)
    id_sum = np.bincount(flat, weights=np.repeat(np.arange(m, dtype=np.float64), 3), minlength=n_vertices)
    peel_round = np.full(m, -1, dtype=np.int64)
    free = np.zeros(m, dtype=np.int8)
    todo = np.flatnonzero(degree == 1)
    t = 0
    while len(todo):
        todo = todo[degree[todo] == 1]  # every vertex of degree 1 now (the others were touched last round)
        edge = np.unique(id_sum[todo].astype(np.int64))
        ends = edges[edge]
        peel_round[edge] = t
        free[edge] = np.argmax(degree[ends] == 1, axis=1)
        touched = ends.ravel()
        np.subtract.at(degree, touched, 1)
        np.subtract.at(id_sum, touched, np.repeat(edge.astype(np.float64), 3))
        todo = touched[degree[touched] == 1]
        t += 1
    return peel_round, free


def _assign(edges, peel_round, free, g):
    """Fill g (uint8, one value a vertex) for peeled edges, in reverse peeling order (module docstring)."""
    order = np.argsort(peel_round, kind="stable")
    rounds = peel_round[order]
    bounds = np.flatnonzero(np.diff(rounds)) + 1
    for group in reversed(np.split(order, bounds)):
        own = edges[group, free[group]]
        others = g[edges[group]].sum(axis=1, dtype=np.int64) - g[own]
        g[own] = (free[group] - others) % 3


def build_phf(keys, first):
    """The `Phf` of every block (module docstring); keys uint32 [S], first int64 [B+1]."""
    m = np.diff(first)
    r = third_sizes(m)
    voff = np.zeros(len(m) + 1, dtype=np.int64)
    np.cumsum(3 * r, out=voff[1:])
    n_vertices = int(voff[-1])
    seed_j = np.zeros(len(m), dtype=np.uint32)
    g = np.zeros(n_vertices, dtype=np.uint8)
    vslot = np.full(n_vertices, -1, dtype=np.int32)
    todo = np.flatnonzero(m > 0)  # blocks still to build
    for _ in range(MAX_ATTEMPTS):
        if not len(todo):
            break
        # the blocks of this attempt, laid out compactly: local vertex = global - voff[b] + loff[b]
        loff = np.zeros(len(m), dtype=np.int64)
        loff[todo] = np.cumsum(3 * r[todo]) - 3 * r[todo]
        owner, within = ragged_arange(m[todo])
        slots = first[todo][owner] + within
        blocks = todo[owner]
        local = key_vertices(keys[slots], seed_j[blocks], r[blocks]) + loff[blocks][:, None]
        peel_round, free = peel(local, int((3 * r[todo]).sum()))
        failed = np.unique(blocks[peel_round < 0])
        ok = ~np.isin(blocks, failed)
        glob = local[ok] - loff[blocks[ok]][:, None] + voff[blocks[ok]][:, None]
        _assign(glob, peel_round[ok], free[ok], g)
        vslot[glob[np.arange(len(glob)), free[ok]]] = slots[ok]
        seed_j[failed] += 1
        todo = failed
    if len(todo):
        raise RuntimeError(f"no acyclic hypergraph for {len(todo)} neighbourhood blocks in {MAX_ATTEMPTS} tries")
    packed = np.zeros(-(-n_vertices // 4) * 4, dtype=np.uint8)
    packed[:n_vertices] = g
    packed = packed.reshape(-1, 4)
    packed = packed[:, 0] | (packed[:, 1] << 2) | (packed[:, 2] << 4) | (packed[:, 3] << 6)
    return Phf(seed_j, voff, packed.astype(np.uint8), vslot)


def phf_slots(phf, nbkeys, block, key):
    """Slot of each (block, key) query through the perfect hash, -1 when the key is not in the block."""
    lo = phf.voff[block]
    r = (phf.voff[block + 1] - lo) // 3
    slot = np.full(len(block), -1, dtype=np.int64)
    live = np.flatnonzero(r > 0)
    if not len(live):
        return slot
    v = key_vertices(key[live], phf.seed_j[block[live]], r[live]) + lo[live][:, None]
    j = phf.assignment(v).sum(axis=1, dtype=np.int64) % 3
    s = phf.vslot[v[np.arange(len(live)), j]].astype(np.int64)
    hit = s >= 0
    hit[hit] = nbkeys[s[hit]] == key[live][hit]
    slot[live[hit]] = s[hit]
    return slot
