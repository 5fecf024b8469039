"""``python -m governed_broker.docgen [--check]``."""

import sys

from governed_broker.docgen import main

sys.exit(main())
