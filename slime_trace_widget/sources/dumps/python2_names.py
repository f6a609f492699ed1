"""Python 2 names in pickles, as today's names.

Pickle protocols 0-2 name some globals as Python 2 did: Python 3's pickler writes
``builtins.int`` as ``__builtin__.long`` and ``subprocess.Popen`` as
``commands.Popen`` at those protocols (``torch.save`` writes protocol 2), and its
unpickler renames them back. The restricted unpickler does the same renaming here,
so that the allowlist holds today's names only and a refused global is reported by
the name a reader knows. A Python 2 name missing here stays as the file wrote it:
the allowlist does not hold it, so it is refused under that name.
"""

from __future__ import annotations

import builtins

__all__ = ["python3_name"]

#: Python 2 modules whose names protocol 0-2 pickles write, renamed whole.
MODULES = {
    "__builtin__": "builtins",
    "copy_reg": "copyreg",
    "commands": "subprocess",
    "cPickle": "pickle",
    "thread": "_thread",
    "Queue": "queue",
    "repr": "reprlib",
    "httplib": "http.client",
    "urllib2": "urllib.request",
    "urlparse": "urllib.parse",
    "SocketServer": "socketserver",
    "xmlrpclib": "xmlrpc.client",
}

#: Single globals that moved to another name or module.
NAMES = {
    ("__builtin__", "basestring"): ("builtins", "str"),
    ("__builtin__", "unicode"): ("builtins", "str"),
    ("__builtin__", "long"): ("builtins", "int"),
    ("__builtin__", "xrange"): ("builtins", "range"),
    ("__builtin__", "unichr"): ("builtins", "chr"),
    ("__builtin__", "reduce"): ("functools", "reduce"),
    ("__builtin__", "intern"): ("sys", "intern"),
    ("itertools", "izip"): ("builtins", "zip"),
    ("itertools", "imap"): ("builtins", "map"),
    ("itertools", "ifilter"): ("builtins", "filter"),
    ("itertools", "ifilterfalse"): ("itertools", "filterfalse"),
    ("itertools", "izip_longest"): ("itertools", "zip_longest"),
    ("exceptions", "StandardError"): ("builtins", "Exception"),
}
#: Python 2's ``exceptions`` module, renamed name by name: its exception classes are
#: builtins now (``exceptions.ValueError``); any other name there stays as written.
EXCEPTIONS = frozenset(name for name, value in vars(builtins).items()
                       if isinstance(value, type) and issubclass(value, BaseException))


def python3_name(module: str, name: str) -> tuple[str, str]:
    """``(module, name)`` as Python 3 names the global a pickle named so."""
    if (module, name) in NAMES:
        return NAMES[module, name]
    if module == "exceptions" and name in EXCEPTIONS:
        return "builtins", name
    return MODULES.get(module, module), name
