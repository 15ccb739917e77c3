#!/usr/bin/env bash
# OpenSSH's server, from the Debian package, for the tests that launch over real ssh
# (crates/cli/tests/ssh_hosts.rs, crates/phalanx/tests/mr_ssh.rs). Only installed here:
# no system-wide sshd is started (policy-rc.d forbids it during the install). Each test
# starts its own sshd inside the network namespaces it creates, with keys it generates,
# and stops them by PID (phalanx_netns::SshNet).
set -euo pipefail
[ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null && exit 0
export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod +x "$policy"
  made_policy=1
  trap 'rm -f "$policy"' EXIT
fi
apt-get install -y -q openssh-server openssh-client >/dev/null 2>&1 || {
  apt-get update -q >/dev/null
  apt-get install -y -q openssh-server openssh-client >/dev/null
}
[ -x /usr/sbin/sshd ] || { echo "ssh.sh: sshd missing after install" >&2; exit 1; }
[ "$made_policy" = 1 ] && rm -f "$policy"
exit 0
