"""`python -m edgelite.cli COMMAND ...`, the same as `edgelite COMMAND ...`."""
import sys

from . import main

sys.exit(main())
