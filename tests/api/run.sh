#!/bin/sh
# The HTTP layer over real sockets: http-smoke starts http-echo (both ASan
# builds) and runs its tests against it. Prints PASS/FAIL lines.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
exec "$top/build/tests/http-smoke" "$top/build/tests/http-echo"
