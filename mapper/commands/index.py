"""`gkmap index`: build the k-mer index of a reference (FASTA, plain, gzip or BGZF)."""
from mapper.index import DEFAULT_WS, build_index

HELP = "build the k-mer index of a reference FASTA"


def add_arguments(parser):
    parser.add_argument("reference", metavar="REF.fa", help="reference FASTA (plain, .gz or BGZF)")
    parser.add_argument("--ws", type=int, default=DEFAULT_WS, help="k-mer size of the index, 10 to 14")
    parser.add_argument("--index", metavar="DIR", help="index folder (default: REF.fa.gkx beside the FASTA, "
                        "or ~/.cache/gkmap/<checksum> when that folder is read-only)")


def run(args):
    build_index(args.reference, args.ws, args.index)
    return 0
