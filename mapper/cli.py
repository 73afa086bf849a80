"""Command line: `gkmap SUBCOMMAND ...` and `python -m mapper SUBCOMMAND ...`.

Each subcommand lives in its own module, which provides `HELP` (one line), `add_arguments(parser)` and
`run(args) -> int`. This is the one place where exceptions become messages and exit codes:
2 usage, 1 input/format/index problems, 128 + the signal's number when a signal ended the run (130 for
SIGINT, 143 SIGTERM, 129 SIGHUP). A traceback is shown only with `--debug`.

It is also the one place where signals are handled: SIGTERM and SIGHUP (what `timeout`, SLURM, Kubernetes
and a closed terminal send) end a run as Ctrl-C does, by raising `Interrupted` (a KeyboardInterrupt) in the
main thread, so that every cleanup path (temporary outputs, render processes, temporary folders) runs.
"""
import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys

from mapper.version import __version__
from mapper.errors import GkmapError

# name -> module; the order is the order of `gkmap --help`.
COMMANDS = {
    "index": "mapper.commands.index",
    "map": "mapper.commands.map",
    "filter": "mapper.filters.command",
    "kmers": "mapper.kmers.command",
}

log = logging.getLogger("gkmap")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (exit 2), not the whole usage block."""

    def error(self, message):
        raise SystemExit(_fail(f"{self.prog}: {message} (see --help)", 2))


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each default shown once: "(default: X)" is added to an option's help only when the help does not
    already speak of its default and there is one to show (not None, and not a flag's: a --no-X flag's
    default is True); the description and the epilog (examples) keep their line breaks."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        flag = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
        if ("default" in text.lower() or default is None or flag or default is argparse.SUPPRESS
                or not (action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE))):
            return text
        return f"{text} (default: %(default)s)"


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A signal that ends the run (`signum`); a KeyboardInterrupt so that code already prepared for Ctrl-C
    treats SIGTERM and SIGHUP alike."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum, frame):
    """Raise Interrupted, once: later signals are ignored while the run cleans up (SIGKILL still ends it)."""
    for other in _SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)


def _handle_signals():
    """Install `_on_signal` for SIGINT, SIGTERM and SIGHUP, except where they are ignored (`nohup`, a
    background job's SIGINT) or gkmap runs in another thread than the main one (an embedding); returns the
    handlers replaced."""
    previous = {}
    for signum in _SIGNALS:
        handler = signal.getsignal(signum)
        if handler == signal.SIG_IGN:
            continue
        try:
            signal.signal(signum, _on_signal)
        except ValueError:  # not the main thread
            break
        previous[signum] = signal.SIG_DFL if handler is None else handler  # None: set outside Python
    return previous


def _fail(message, code):
    print(f"gkmap: error: {message}", file=sys.stderr)
    return code


def build_parser(argv=()):
    """The parser. When `argv` names a subcommand, only that subcommand's module is imported (the others
    get an empty parser): `gkmap kmers` does not pay for importing the mapper, and vice versa."""
    parser = _Parser(prog="gkmap", description="All-mapper for short DNA reads with a GateKeeper pre-alignment filter.")
    parser.add_argument("--version", action="version", version=f"gkmap {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, module_name in COMMANDS.items():
        if chosen in COMMANDS and name != chosen:
            sub.add_parser(name)
            continue
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP,
                           formatter_class=_HelpFormatter)
        module.add_arguments(p)
        p.add_argument("--quiet", action="store_true", help="no progress bar, warnings only")
        p.add_argument("--debug", action="store_true", help="show a traceback on error")
        p.set_defaults(_module=module)
    return parser


def main(argv=None):
    """Run gkmap with `argv` (default: sys.argv[1:]) and return the exit code; never raises for user errors.
    The signal handlers are in place from the start (parsing imports the command's modules) to the end,
    then the previous ones come back."""
    argv = sys.argv[1:] if argv is None else list(argv)
    previous = _handle_signals()
    try:
        return _run(argv)
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        return _fail(f"{'interrupted' if signum == signal.SIGINT else 'terminated'} by {signal.Signals(signum).name}",
                     128 + signum)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _run(argv):
    try:
        args = build_parser(argv).parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors
        return e.code if isinstance(e.code, int) else 2
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="gkmap: %(message)s", stream=sys.stderr, force=True)
    try:
        return args._module.run(args)
    except GkmapError as e:
        if args.debug:
            raise
        return _fail(str(e), e.exit_code)
    except BrokenPipeError:
        return 1
    except (MemoryError, OSError) as e:
        if args.debug:
            raise
        return _fail(f"{e.__class__.__name__}: {e}", 1)


def main_cli():
    """Console-script entry point. gkmap makes no BLAS call, so numpy's OpenBLAS gets one thread (unless the
    user chose): its pool of a thread per core, started when numpy is imported, spins for a while even
    unused, in the main process and in each render process (chr20, 10,000 reads, one core: 92 ms of
    CPU time, 6 % of the run's samples)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _leave(main())


def _leave(code):
    """End the process with `code`, skipping the interpreter's teardown. When `main` returns, every output is
    committed (renamed into place), every render process and Dask cluster stopped and every temporary item
    removed (tests/cli/test_safety.py checks a finished run); the teardown would only free what the kernel
    frees at exit anyway (the CUDA context with the resident index, the device pool, every module's objects).
    1,000,000 reads against chr20 on an H200: 2.51-2.63 s of wall time against 2.68-2.91 s with the teardown
    (no difference beyond the noise at 3.1 Gbp). Only the two standard streams may still hold text."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left (`| head`): as main() answers it
        code = code or 1
    with contextlib.suppress(OSError):
        sys.stderr.flush()
    os._exit(code)
