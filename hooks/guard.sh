#!@INTERPRETER@
# grantguard hook stub: installed by `grantguard arm`, removed by `grantguard disarm`.
# Checks the repository grant at the moment of mutation, then runs the hook
# that was effective before arming, if any, with the same arguments and stdin.
# git executes this file, and the kernel starts grantguard from the first line
# without a shell; grantguard then does what the exec line below says. A
# client that runs this file with sh runs the same line.
@SETTLED@exec @GRANTGUARD@ hook @HOOK@ --hub @HUB@ @CHAIN@-- "$@"
