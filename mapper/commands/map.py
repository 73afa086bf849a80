"""`gkmap map`: report every locus where each read aligns within e edits, as SAM."""
import logging
import shlex
import sys

from mapper.errors import UsageError
from mapper.index import beside_index_dir
from mapper.options import DEVICES, FILTERS, INDEX_KINDS, LOOKUPS, OUTPUT_FORMATS, MapOptions, parse_size
from mapper.outputs import check_outputs
from mapper.jobs import job_for
from mapper.runners import map_reads

FLAGS = {"sam": "-o", "unmapped": "--unmapped", "candidates": "--dump-candidates", "oea": "-o's OEA SAM",
         "divet": "-o's DIVET file"}   # how an error names each output (jobs.py's sink names)
HELP = "map reads to every locus within e edits (SAM output)"
log = logging.getLogger("gkmap")


def add_arguments(parser):
    d = MapOptions("", "")
    parser.add_argument("reference", metavar="REF.fa", help="reference FASTA; indexed first if it has no index")
    parser.add_argument("reads", metavar="READS.fq", nargs="+",
                        help="reads, FASTQ or FASTA, plain or gzip; '-' reads standard input; with --pe/--mp two "
                             "files, R1 and R2")
    parser.epilog = EXAMPLES
    g = parser.add_argument_group("mapping")
    g.add_argument("-e", type=int, default=d.e, metavar="E",
                   help="edit distance threshold for every read (default: ceil(0.04 x read length) per read)")
    g.add_argument("--ws", type=int, default=d.ws, help="k-mer size (default: the index's; 12 when building)")
    g.add_argument("--filter", choices=FILTERS, default=d.filter, help="pre-alignment filter")
    g.add_argument("--device", choices=DEVICES, default=d.device, help="backend")
    g.add_argument("--index", metavar="DIR", default=d.index_dir, help="index folder")
    g.add_argument("--batch-size", type=int, default=d.batch_size, help="reads per batch")
    g.add_argument("--gpu-memory", metavar="SIZE", default=None,
                   help="device memory the whole run may take, e.g. 20G: a fifth (at most 4G) for the batches, "
                        "0.5G for the CUDA context, the rest for the index, which is mapped in parts of whole contigs "
                        "when bigger, with the same output (default: the index takes what the GPU has free less 4G; "
                        "cuda backend)")
    g.add_argument("--memory", metavar="SIZE", default="2G",
                   help="host memory a batch's buffers may take on the cpu backend: reads that hit much are seeded "
                        "and verified in groups that fit (default: 2G, beside the index)")
    g.add_argument("-t", "--threads", type=int, default=d.threads, metavar="N",
                   help="host processes turning loci into SAM records (default: every core but one, at most 16), "
                        "and the cpu backend's mapping threads (default: every core); "
                        "with --gpus/--local-cluster/--scheduler, per worker (default 1: in the worker's task)")
    o = parser.add_argument_group("output")
    o.add_argument("-o", "--output", metavar="OUT.sam", default=d.output,
                   help="SAM, or BAM if it ends in .bam (default: stdout)")
    o.add_argument("--output-fmt", choices=OUTPUT_FORMATS, default=d.output_format,
                   help="sam or bam (default: by -o's extension, sam on stdout)")
    o.add_argument("--sort", action="store_true",
                   help="coordinate-sorted BAM, for samtools index (external merge within --sort-memory)")
    o.add_argument("--sort-memory", metavar="SIZE", default="768M",
                   help="records --sort holds in memory before it spills a sorted run to disk")
    o.add_argument("--unmapped", metavar="FILE", default=d.unmapped,
                   help="also write unmapped reads (FASTQ/FASTA; gzip-compressed when FILE ends in .gz)")
    o.add_argument("--dump-candidates", metavar="FILE", default=d.dump_candidates,
                   help="also write every candidate before the filter as a pair line '<reference segment>\\t<read>' "
                        "(gzip-compressed when FILE ends in .gz)")
    o.add_argument("-R", dest="read_group", metavar="RG_LINE", default=d.read_group,
                   help="read group header line, e.g. '@RG\\tID:x\\tSM:y' ('\\t' for tabs, one ID), as bwa's -R: "
                        "the @RG line goes into the header and RG:Z:ID onto every record")
    o.add_argument("--comment", metavar="TEXT", action="append", default=None,
                   help="add an @CO header line (repeatable; one line, no tabs)")
    o.add_argument("--no-secondary-seq", dest="secondary_seq", action="store_false",
                   help="SEQ and QUAL '*' on secondary records (FLAG 256), as bwa mem and minimap2 write them: "
                        "the read's primary record carries them; an all-mapping run's output is mostly "
                        "secondaries: 100 bp reads against a human-sized genome then write 0.4 of the bytes")
    o.add_argument("--best", action="store_true",
                   help="report only the loci with the fewest edits (the first primary, the others FLAG 256)")
    o.add_argument("-n", type=int, default=d.max_records, metavar="N",
                   help="at most N records per read (with --pe/--mp: at most N best pairs per read pair)")
    p = parser.add_argument_group("paired-end (docs/paired.md)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--pe", dest="paired", action="store_const", const="pe",
                      help="paired-end reads R1 R2, mates facing each other (FR)")
    mode.add_argument("--mp", dest="paired", action="store_const", const="mp",
                      help="mate-pair reads R1 R2, mates facing away (RF)")
    p.add_argument("--min", type=int, default=d.min_insert, metavar="MIN",
                   help="smallest TLEN of a concordant pair (default: estimated from the first pairs)")
    p.add_argument("--max", type=int, default=d.max_insert, metavar="MAX",
                   help="largest TLEN of a concordant pair (default: estimated from the first pairs)")
    p.add_argument("--maxoea", type=int, default=d.max_oea, help="anchors with more loci stay out of OUT_OEA.sam")
    p.add_argument("--maxdis", type=int, default=d.max_dis, help="at most this many OUT_DIVET.vh lines per pair")
    nb = parser.add_argument_group("neighbourhood index (docs/neighbourhood.md)")
    nb.add_argument("--index-kind", choices=INDEX_KINDS, default=d.index_kind,
                    help="k-mer index (FastHASH seeding) or neighbourhood index with perfect hashing (MAROSE)")
    nb.add_argument("--seed-len", type=int, default=d.seed_len, help="seed length ls (default: the index's; 8 when building)")
    nb.add_argument("--nb-len", type=int, default=d.nb_len, help="neighbourhood length ln (default: the index's; 7 when building)")
    nb.add_argument("--spaced", metavar="MASK", default=d.spaced, help="spaced seed mask, e.g. '######-##' (default: the index's)")
    nb.add_argument("--nb-errors", type=int, default=d.nb_errors, help="substitutions looked up in a neighbourhood, 0 to 2")
    nb.add_argument("--step", type=int, default=d.step, help="read offset delta between two patterns")
    nb.add_argument("--lookup", choices=LOOKUPS, default=d.lookup, help="look-up in a seed block")
    c = parser.add_argument_group("several GPUs and clusters (docs/cluster.md; needs gkmap[cluster])")
    where = c.add_mutually_exclusive_group()
    where.add_argument("--gpus", metavar="N|auto", default=d.gpus,
                       help="one worker process per GPU of this host, N GPUs or every visible one (one GPU: "
                            "this process maps on it, as without --gpus)")
    where.add_argument("--scheduler", metavar="ADDRESS", default=d.scheduler,
                       help="map on the workers of the Dask scheduler at ADDRESS (the index on a shared path)")
    where.add_argument("--local-cluster", type=int, metavar="N", default=d.local_cluster,
                       help="map on N local worker processes (each with the --device backend)")
    c.add_argument("--chunk-reads", type=int, metavar="N", default=d.chunk_reads,
                   help="reads per task (default: --batch-size)")


EXAMPLES = """examples:
  # single-end, every locus within e = ceil(0.04 x read length)
  gkmap map -o out.sam REF.fa reads.fq.gz
  # reads on standard input, only the loci with the fewest edits
  zcat reads.fq.gz | gkmap map -e 4 --best REF.fa - > out.sam
  # paired-end (also writes out_OEA.sam and out_DIVET.vh)
  gkmap map --pe -o out.sam REF.fa R1.fq.gz R2.fq.gz
  # a whole genome, every locus, secondary records without SEQ/QUAL (0.4 of the SAM's bytes at 3.1 Gbp)
  gkmap map --no-secondary-seq -o out.sam GRCh38.fa reads.fq.gz
  # coordinate-sorted BAM with a read group
  gkmap map --sort -R '@RG\\tID:run1\\tSM:NA12878\\tPL:ILLUMINA' -o out.bam REF.fa reads.fq.gz
  # BAM on standard output, into a pipeline
  gkmap map --output-fmt bam REF.fa reads.fq.gz | samtools sort -o sorted.bam
  # several GPUs: one worker per GPU of this host
  gkmap map --gpus auto -o out.sam REF.fa reads.fq.gz
"""


def run(args):
    wanted = 2 if args.paired else 1
    if len(args.reads) != wanted:
        raise UsageError(f"{len(args.reads)} reads files given, expected {wanted}"
                         + (f" (R1 and R2 with --{args.paired})" if args.paired else " (two need --pe or --mp)"))
    if args.reads.count("-") > 1:
        raise UsageError("'-' (standard input) can be only one of the reads files")
    opts = MapOptions(
        reference=args.reference, reads=args.reads[0], reads2=args.reads[1] if args.paired else None,
        paired=args.paired, min_insert=args.min, max_insert=args.max, max_oea=args.maxoea, max_dis=args.maxdis,
        e=args.e, ws=args.ws, filter=args.filter,
        device=args.device, output=args.output, unmapped=args.unmapped, dump_candidates=args.dump_candidates, best=args.best,
        max_records=args.n, index_dir=args.index, batch_size=args.batch_size,
        gpu_memory=parse_size(args.gpu_memory) if args.gpu_memory else None, memory=parse_size(args.memory, "--memory"),
        threads=args.threads, quiet=args.quiet,
        gpus=int(args.gpus) if args.gpus and args.gpus.isdigit() else args.gpus, scheduler=args.scheduler,
        local_cluster=args.local_cluster, chunk_reads=args.chunk_reads, index_kind=args.index_kind,
        seed_len=args.seed_len, nb_len=args.nb_len, spaced=args.spaced, nb_errors=args.nb_errors, step=args.step,
        lookup=args.lookup, read_group=args.read_group, secondary_seq=args.secondary_seq,
        comments=tuple(args.comment or ()),
        output_format=args.output_fmt, sort=args.sort, sort_memory=parse_size(args.sort_memory, "--sort-memory"),
        command_line=shlex.join(["gkmap"] + sys.argv[1:]) if sys.argv else "gkmap map",
    )
    outputs = job_for(opts.check()).outputs(opts)
    check_outputs({FLAGS[name]: path for name, path in outputs.items()}, [opts.reference, opts.reads, opts.reads2],
                  [_index_folder(args)])
    if opts.read_group is not None and "\tPL:" not in opts.read_group_line:
        log.warning("-R has no PL (platform) field: Picard and GATK refuse such a read group (e.g. add \\tPL:ILLUMINA)")
    map_reads(opts)
    return 0


def _index_folder(args):
    """The index folder outputs must stay out of: --index, or the one beside the FASTA (finding the cache
    folder of a FASTA in a read-only folder would hash it; no output can be written beside it anyway)."""
    if args.index:
        return args.index
    folder = beside_index_dir(args.reference)
    return folder.with_suffix(".nbx") if args.index_kind == "neighbourhood" else folder
