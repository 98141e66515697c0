"""Regression tests for issue 10: nothing a user types or a file says may destroy data, leak a key or hang a run."""
