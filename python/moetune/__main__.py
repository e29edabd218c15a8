"""`python -m moetune`: library information, and the moetune CLI.

    python -m moetune info            library version, where it was loaded from, the GPU
    python -m moetune db show FILE    (and every other CLI command) runs the `moetune`
                                      binary found next to the library, or on PATH

May call: _lib, core, the moetune binary (exec). Called by: the user.
"""
import os
import shutil
import subprocess
import sys

from . import _lib
from .errors import MoetuneError

USAGE = """usage: python -m moetune info              (the library loaded, the GPU, the CLI found)
       python -m moetune COMMAND [ARGS...]   (forwarded to the moetune CLI: db, gen, tune,
                                             bench ...; `moetune --help`)"""

CLI_ENV = "MOETUNE_CLI"


def find_cli():
    """Path of the moetune binary: $MOETUNE_CLI, next to the loaded (or
    findable) library, next to the package, then PATH. None if absent."""
    env = os.environ.get(CLI_ENV)
    if env:
        return env if os.path.isfile(env) else None
    dirs = []
    libp = _lib.loaded_path()
    if libp is None:
        for _, p in _lib.candidate_paths():
            if p and os.path.sep in p and os.path.exists(p):
                libp = p
                break
    if libp and os.path.sep in libp:
        d = os.path.dirname(os.path.realpath(libp))
        dirs += [d, os.path.join(os.path.dirname(d), "bin")]
    dirs.append(os.path.dirname(os.path.abspath(__file__)))
    for d in dirs:
        p = os.path.join(d, "moetune")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("moetune")


def info(out=sys.stdout):
    from . import core
    try:
        _lib.load()
    except MoetuneError as e:
        print("libmoetune: not loaded\n%s" % e, file=out)
        return 1
    print("moetune (python) %s" % _version(), file=out)
    print("libmoetune %s loaded from %s" % (core.version(), _lib.loaded_path()), file=out)
    print("template hash %s" % core.template_hash(), file=out)
    try:
        ctx = core.Context()
        print("GPU 0: %s (%s)" % (ctx.device_name, ctx.arch), file=out)
        ctx.close()
    except MoetuneError as e:
        print("GPU: none (%s: %s)" % (type(e).__name__, e), file=out)
    cli = find_cli()
    print("moetune CLI: %s" % (cli or "not found (set %s or put it on PATH)" % CLI_ENV), file=out)
    return 0


def _version():
    from . import __version__
    return __version__


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    if argv == ["info"]:
        return info()
    cli = find_cli()
    if cli is None:
        env = os.environ.get(CLI_ENV)
        where = ("$%s is %s, which is not a file" % (CLI_ENV, env) if env else
                 "looked next to libmoetune, next to the package and on PATH; set %s" % CLI_ENV)
        print("python -m moetune: the moetune command-line tool was not found (%s). Build it "
              "with `cmake --build build --target moetune_cli`." % where, file=sys.stderr)
        return 3
    return subprocess.call([cli] + argv)


if __name__ == "__main__":
    sys.exit(main())
