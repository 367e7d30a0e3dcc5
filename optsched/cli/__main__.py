"""``python -m optsched.cli ...``: the same as the ``optsched`` command."""

from optsched.cli import console_main

console_main()
