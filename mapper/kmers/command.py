"""`gkmap kmers count|dump|histo|query`: k-mer counting (the SNCGPU sort-and-compress design).

    gkmap kmers count -k K [--canonical] [--min-count N] [--device auto|cpu|cuda] [--memory GB]
                      [--gpu-memory SIZE] [--tmp DIR] [-t N] -o OUT INPUT...
    gkmap kmers dump [-o FILE] OUT          KMER<TAB>COUNT lines, sorted
    gkmap kmers histo [-l LOW] [--high HIGH] [-i INC] [-f] OUT     as `jellyfish histo`
    gkmap kmers query OUT KMER...           KMER<TAB>COUNT per k-mer asked (0 when absent), as jellyfish

The table format is in mapper/kmers/store.py and docs/kmers.md.
"""
import argparse
import logging
import os
import sys

from mapper.errors import UsageError
from mapper.options import parse_size
from mapper.kmers import backend, text, workers
from mapper.kmers.counter import MAX_BLOCK_BYTES, count_kmers
from mapper.kmers.encode import MAX_K
from mapper.kmers.store import KmerTable
from mapper.outputs import atomic_output, check_outputs

HELP = "count k-mers (any k up to 256) into a sorted, compressed table; dump, histogram and query it"

log = logging.getLogger("gkmap")


def add_arguments(parser):
    actions = parser.add_subparsers(dest="kmers_command", metavar="ACTION", parser_class=type(parser))
    actions.required = True

    def action(name, help_text):
        p = actions.add_parser(name, help=help_text, description=help_text,
                               formatter_class=parser.formatter_class)  # the command line's: defaults once
        # accepted after the action too; the `kmers` parser owns the defaults
        p.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        return p

    p = action("count", "count the k-mers of FASTA/FASTQ files (plain or gzip) into a table")
    p.add_argument("-k", type=int, required=True, help=f"k-mer length, 1 to {MAX_K}")
    p.add_argument("-C", "--canonical", action="store_true",
                   help="count a k-mer and its reverse complement as one (the smaller), like jellyfish -C")
    p.add_argument("--min-count", type=int, default=1, metavar="N", help="leave out k-mers seen fewer times")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where to sort: auto = cuda when a GPU and pycuda are present")
    p.add_argument("--memory", type=float, default=2.0, metavar="GB",
                   help="host memory for k-mer buffers (the cpu backend's: beyond it sorted runs are spilled "
                        "to --tmp) and, on cuda, for the spilled runs a merge reads back")
    p.add_argument("--gpu-memory", metavar="SIZE",
                   help="device memory the cuda backend may take in all, CUDA context included, e.g. 20G "
                        "(default: 80%% of the GPU memory free at the start)")
    p.add_argument("--tmp", metavar="DIR", help="folder for spilled runs (default: OUT's folder)")
    p.add_argument("-t", "--threads", type=int, default=0, metavar="N",
                   help="host threads (parsing, the cpu backend's work); 0 = every core")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="the table to write")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="FASTA or FASTQ files, plain or gzip")

    p = action("dump", "print a table as KMER<TAB>COUNT lines in lexicographic order")
    p.add_argument("table", metavar="OUT", help="a table written by `gkmap kmers count`")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")

    p = action("histo", "print the histogram of counts, in `jellyfish histo` format")
    p.add_argument("table", metavar="OUT", help="a table written by `gkmap kmers count`")
    p.add_argument("-l", "--low", type=int, default=1, help="low count value of the histogram")
    p.add_argument("--high", type=int, default=10000, help="high count value (the last bucket catches all above)")
    p.add_argument("-i", "--increment", type=int, default=1, help="bucket width")
    p.add_argument("-f", "--full", action="store_true", help="also print empty buckets")

    p = action("query", "print the count of each k-mer given (0 when absent)")
    p.add_argument("table", metavar="OUT", help="a table written by `gkmap kmers count`")
    p.add_argument("kmers", nargs="+", metavar="KMER", help="k-mers of the table's k (A, C, G, T)")


def _count(args):
    if not 1 <= args.k <= MAX_K:
        raise UsageError(f"-k must be between 1 and {MAX_K}, got {args.k}")
    if args.min_count < 1:
        raise UsageError(f"--min-count must be at least 1, got {args.min_count}")
    if not args.memory > 0:
        raise UsageError(f"--memory must be a positive number of GB, got {args.memory}")
    gpu_memory = None if args.gpu_memory is None else parse_size(args.gpu_memory)
    check_outputs({"-o": args.output}, args.inputs)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise UsageError(f"-o {args.output}: folder {out_dir} does not exist")
    tmp = args.tmp or out_dir
    if not os.path.isdir(tmp):
        raise UsageError(f"--tmp {args.tmp}: not a folder")
    if args.threads < 0:
        raise UsageError(f"-t must be 0 (every core) or more, got {args.threads}")
    workers.set_threads(args.threads)
    make_backend, device = backend.select(args.device)
    host_memory = int(args.memory * 2 ** 30)
    if device == "cuda":
        memory = make_backend.device_budget(gpu_memory, MAX_BLOCK_BYTES)
        budget = f"{memory / 2 ** 30:.1f} GB of GPU buffers{' by default' if gpu_memory is None else ''}"
    elif gpu_memory is not None:
        raise UsageError("--gpu-memory is for the cuda backend, not --device cpu")
    else:
        memory, budget = host_memory, f"{host_memory / 2 ** 30:.1f} GB of buffers"
    stats = count_kmers(args.inputs, args.output, args.k, args.canonical, args.min_count, make_backend, memory, tmp,
                        host_memory)
    phases = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in stats.phases.items())
    log.info("%s: %d k-mers, %d distinct written (k=%d%s, %s, %s, %d runs spilled) in %.2f s (%s)",
             args.output, stats.occurrences, stats.distinct, args.k, ", canonical" if args.canonical else "",
             device, budget, stats.runs_spilled, stats.seconds, phases)
    return 0


def _dump(args):
    check_outputs({"-o": args.output}, [args.table])
    with KmerTable(args.table) as table:
        with atomic_output(args.output, "wb") as out:
            text.dump(table, out)
            out.flush()
    return 0


def _histo(args):
    if args.low < 0 or args.increment < 1:
        raise UsageError("--low must be >= 0 and --increment >= 1")
    if args.high < args.low:
        raise UsageError(f"--high ({args.high}) must be >= --low ({args.low})")
    with KmerTable(args.table) as table:
        sys.stdout.write(text.histogram_lines(table, args.low, args.high, args.increment, args.full))
    return 0


def _query(args):
    with KmerTable(args.table) as table:
        try:
            keys, counts = text.query(table, args.kmers)
        except ValueError as e:
            raise UsageError(f"query: {e}") from None
        sys.stdout.buffer.write(text.dump_lines(keys, counts, table.layout))
    sys.stdout.flush()
    return 0


def run(args):
    return {"count": _count, "dump": _dump, "histo": _histo, "query": _query}[args.kmers_command](args)

