#!/bin/sh
# grantguard hook stub: installed by `grantguard arm`, removed by `grantguard disarm`.
# Keeps a hook that was effective before arming: it runs unchanged.
exec @ORIGINAL@ "$@"
