"""`python -m podium_reference` runs the one reference benchmark there is, `podium_digits`."""

import sys

from podium_reference.digits import main

sys.exit(main())
