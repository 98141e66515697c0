"""``python -m syntra_dspy.cli`` is the ``syntra`` command."""

from __future__ import annotations

import sys

from syntra_dspy.cli import main

sys.exit(main())
