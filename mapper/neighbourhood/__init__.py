"""The neighbourhood index with perfect hashing (MAROSE's; issue #8, docs/neighbourhood.md): `index` builds
and loads it, `hashing` is its per-block perfect hash, `lookup` the three look-ups, `seeding` the patterns and
their degenerated neighbourhoods, `mapping` plugs it into the mapping pipeline, `gpu` runs kernels/phf.cu."""
