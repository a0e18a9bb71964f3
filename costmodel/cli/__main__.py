"""`python -m costmodel.cli`: the `costmodel` command."""

import sys

from . import main


sys.exit(main())
