"""Node-local agents fawkes starts on a host over SSH.  Each is one stdlib-only file, so that it can be
shipped as it is (copied to the host and run with the host's ``python3``) without fawkes installed there."""
