#!/bin/sh
# grantguard hook stub: installed by `grantguard arm`, removed by `grantguard disarm`.
# Checks the repository grant at the moment of mutation, then runs the hook
# that was effective before arming, if any, with the same arguments and stdin.
@SETTLED@exec @GRANTGUARD@ hook @HOOK@ --hub @HUB@ @CHAIN@-- "$@"
