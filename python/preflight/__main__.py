"""The ``preflight`` command (``python -m preflight``, and the console script pip installs):
the command line itself, run in this process with its stdout, stderr and exit status."""

import signal
import sys

from . import _preflight


def main():
    # Ctrl-C stops the command as it stops the binary, not by a KeyboardInterrupt that Python
    # could only raise once the command returned (`preflight serve` installs its own handler).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _preflight.run(["preflight", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
