"""`gkmap index`: build the k-mer index (or, with --index-kind neighbourhood, the neighbourhood index) of a
reference (FASTA, plain, gzip or BGZF)."""
from mapper.device import DEVICES, resolve_device
from mapper.errors import UsageError
from mapper.index import DEFAULT_WS, build_index, check_index
from mapper.options import INDEX_KINDS

HELP = "build the k-mer index (or the neighbourhood index) of a reference FASTA"


def add_arguments(parser):
    parser.add_argument("reference", metavar="REF.fa", help="reference FASTA (plain, .gz or BGZF)")
    parser.add_argument("--ws", type=int, default=None, help=f"k-mer size of the index, 10 to 14 (default {DEFAULT_WS})")
    parser.add_argument("--index-kind", choices=INDEX_KINDS, default="kmer", help="k-mer or neighbourhood index")
    parser.add_argument("--seed-len", type=int, help="neighbourhood index: seed length ls (default 8)")
    parser.add_argument("--nb-len", type=int, help="neighbourhood index: neighbourhood length ln (default 7)")
    parser.add_argument("--spaced", metavar="MASK", help="neighbourhood index: spaced seed, e.g. '######-##'")
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="build the index on the host (cpu) or on the GPU (cuda; auto: when there is one); "
                             "the same index either way")
    parser.add_argument("--index", metavar="DIR", help="index folder (default: REF.fa.gkx beside the FASTA, "
                        "or ~/.cache/gkmap/<checksum> when that folder is read-only)")
    parser.add_argument("--check", action="store_true", help="check the existing k-mer index of REF.fa instead of "
                        "building one: every checksum and every position (exit 1 on damage)")


def run(args):
    if args.check:
        given = [f for f, v in (("--ws", args.ws), ("--seed-len", args.seed_len), ("--nb-len", args.nb_len),
                                ("--spaced", args.spaced)) if v is not None]
        if args.index_kind != "kmer" or given or args.device != "auto":
            raise UsageError("--check checks a k-mer index as it is: it takes only REF.fa and --index")
        check_index(args.reference, args.index)
        return 0
    nb_flags = [f for f, v in (("--seed-len", args.seed_len), ("--nb-len", args.nb_len), ("--spaced", args.spaced))
                if v is not None]
    if args.index_kind == "neighbourhood":
        if args.ws is not None:
            raise UsageError("--ws is the k-mer index's; the neighbourhood index takes --seed-len and --nb-len")
        from mapper.neighbourhood.index import DEFAULT_NB_LEN, build_index as build_neighbourhood, seed_mask
        mask = seed_mask(args.seed_len, args.spaced)
        build_neighbourhood(args.reference, mask, DEFAULT_NB_LEN if args.nb_len is None else args.nb_len, args.index,
                            resolve_device(args.device))
        return 0
    if nb_flags:
        raise UsageError(f"{nb_flags[0]} needs --index-kind neighbourhood")
    build_index(args.reference, DEFAULT_WS if args.ws is None else args.ws, args.index, resolve_device(args.device))
    return 0
