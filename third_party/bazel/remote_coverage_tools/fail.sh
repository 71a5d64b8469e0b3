#!/bin/sh
echo "stackrec: coverage tools are not available offline (remote_coverage_tools is a stand-in)" >&2
exit 1
