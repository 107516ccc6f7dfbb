"""preflight: what is this checkpoint, is it fully understood, and what will it take to serve it.

    >>> import preflight
    >>> v = preflight.plan("hf://Qwen/Qwen3-8B", devices="h100-80gb:1", context="32k")
    >>> v["admissible"], v["memory"]["fits"]

``plan`` is ``preflight plan --json`` in this process: the same options, the same staging
and cache, the same document, returned as a dict. It raises ``PreflightError`` where the
command exits 2 or 3 (nothing was planned); a checkpoint that is inadmissible or does not
fit is an answer, not an error. The ``preflight`` command installed beside this module is
the command line itself.
"""

import json
import os

from . import _preflight

__all__ = ["PreflightError", "plan"]
__version__ = _preflight.__version__

# `plan`'s flags by their Python name (`--kv-dtype` -> `kv_dtype`), each with whether it takes
# a value; read from the command line's own definition.
_FLAGS = {name.replace("-", "_"): takes_value for name, takes_value in _preflight.plan_flags()}


class PreflightError(Exception):
    """Nothing was planned: bad usage or input (``exit_code`` 2) or a source that could not
    be read (3). ``code`` is the error document's code, the service's (``repo_not_found``,
    ``gated``, ``invalid_options``, ...); ``message`` says what happened."""

    def __init__(self, code, message, exit_code):
        super().__init__(message)
        self.code = code
        self.message = message
        self.exit_code = exit_code

    def __str__(self):
        return f"{self.code}: {self.message}"


def plan(*sources, **options):
    """Plan SOURCES as one system and return the verdict document (``preflight plan --json``)
    as a dict.

    A source is what the command line takes: ``hf://ORG/NAME[@REV][/file.gguf]``, a model
    page URL, a checkpoint directory, a ``.safetensors`` or ``.gguf`` file (str or path).
    Each keyword is the ``plan`` flag of the same name, ``_`` for ``-``: ``devices="l4:2"``
    is ``--devices l4:2``, ``context="32k"`` (or ``32768``) is ``--context 32k``,
    ``include_mtp=True`` is ``--include-mtp``, ``no_cache=True`` is ``--no-cache``; ``None``
    and ``False`` leave a flag out. With ``compare=`` the document is the comparison. Hub
    access reads the environment as the command does (``HF_ENDPOINT``, ``HF_TOKEN``,
    ``HF_HUB_OFFLINE``). The GIL is released while it stages and plans.

    Raises ``PreflightError`` (with ``.code`` and ``.exit_code``) when nothing was planned,
    ``TypeError`` for a keyword that is no ``plan`` flag. The flags:

    """
    args = []
    for name, value in options.items():
        if name not in _FLAGS:
            raise TypeError(f"plan() got an unexpected keyword argument {name!r}")
        flag, takes_value = "--" + name.replace("_", "-"), _FLAGS[name]
        if value is None:
            continue
        if not takes_value:
            if not isinstance(value, bool):
                raise TypeError(f"plan() argument {name!r} is a switch: True, False or None")
            if value:
                args.append(flag)
        elif isinstance(value, bool):
            # The one flag with a yes/no value, --flash-attn on|off.
            args.append(f"{flag}={'on' if value else 'off'}")
        else:
            args.append(f"{flag}={value}")
    # Sources after `--`: a path that starts with `-` is still a source.
    args.append("--")
    args.extend(os.fspath(source) for source in sources)
    exit_code, failed, document = _preflight.plan_json(args)
    answer = json.loads(document)
    if failed:
        error = answer["error"]
        raise PreflightError(error["code"], error["message"], exit_code)
    return answer


if plan.__doc__:  # not under python -OO
    plan.__doc__ += "\n".join("    " + line for line in _preflight.plan_help().splitlines())
