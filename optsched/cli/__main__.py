"""``python -m optsched.cli ...``: the same as the ``optsched`` command."""

import sys

from optsched.cli import main

sys.exit(main())
