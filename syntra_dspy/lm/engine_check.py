"""``python -m syntra_dspy.lm.engine_check``, the documented command, kept for scripts that call it: the check now
lives in :mod:`syntra_dspy.lm.llamacpp.engine_check`."""

from __future__ import annotations

import sys

from syntra_dspy.lm.llamacpp.engine_check import main

if __name__ == "__main__":
    sys.exit(main())
