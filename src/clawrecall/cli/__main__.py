"""`python -m clawrecall.cli`, the same as the `clawrecall` script."""

from . import main

main()
