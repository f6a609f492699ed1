"""``slime-trace-viewer``: the command line, one module per subcommand.

``command`` parses and dispatches (``view`` when no subcommand is named, so
``slime-trace-viewer rollout_0.pt`` stays slime's command); ``view``, ``convert``,
``collect``, ``live`` and ``demo`` are the subcommands, each with the arguments and steps it
alone uses; what several share sits in its own module: the argument types that refuse
bad values while parsing (``arguments``), the page cache (``cache``), the follow loop
(``follow``), the files written and where (``files``), the dumps' loading (``load``), the
OTLP options (``otlp_options``) and the page server (``server``).
"""

from .command import console, main
from .errors import CliError

__all__ = ["CliError", "console", "main"]
