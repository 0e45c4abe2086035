#!/bin/sh
# A vendor binary that fails at once, before it says anything on stdout (the stand-in without a
# script does the same): what the run then tells its readers is under test.
echo "exits_at_once: no script for this vendor; giving up" >&2
exit 7
