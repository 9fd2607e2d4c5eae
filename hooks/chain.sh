#!/bin/sh
# grantguard hook stub: installed by `grantguard arm`, removed by `grantguard disarm`.
# Keeps a hook that was effective before arming: it runs unchanged.
# As git does: a missing hook is skipped, a non-executable one with a hint.
if [ ! -x @ORIGINAL@ ] || [ -d @ORIGINAL@ ]; then
  [ -e @ORIGINAL@ ] && echo "hint: The '"@ORIGINAL@"' hook was ignored because it's not set as executable." >&2
  exit 0
fi
exec @ORIGINAL@ "$@"
