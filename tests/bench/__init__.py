"""Tests of the measuring instruments in bench/: not timed tests, they check that the
instruments give the right answers."""
