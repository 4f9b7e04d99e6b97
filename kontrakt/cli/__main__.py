"""``python -m kontrakt.cli``."""

from __future__ import annotations

import sys

from kontrakt.cli import main

sys.exit(main())
