# Serves the fault round's requests (Tests/IntegrationTests/Support/StackEnvironment.swift,
# FaultControl) for a stack launcher: scripts/compose-test and scripts/local-stack/run source it
# and pass the function that performs an action on their stack.
#   serve_faults DIR PERFORM &      until DIR/finished exists
# The suite writes DIR/N.request ("kill recordsd-1"); PERFORM is called with the action's words;
# DIR/N.done gets "ok", or "failed: " and the end of what PERFORM printed.
serve_faults() {
  local fault_dir=$1 perform=$2 request base action output
  while [ ! -e "$fault_dir/finished" ]; do
    for request in "$fault_dir"/*.request; do
      [ -e "$request" ] || continue
      base=${request%.request}
      action=$(cat "$request")
      rm -f "$request"
      echo "== fault: $action ($(date +%T))" >&2
      # shellcheck disable=SC2086  # the action's words are the function's arguments
      if output=$("$perform" $action 2>&1); then
        echo ok >"$base.done.tmp"
      else
        printf 'failed: %s\n' "$(printf '%s' "$output" | tail -n 3 | tr '\n' ' ')" >"$base.done.tmp"
        printf '%s\n' "$output" >&2
      fi
      chmod 644 "$base.done.tmp"
      mv "$base.done.tmp" "$base.done"
    done
    sleep 0.2
  done
}

# The balancer follows readiness: with PostgreSQL stopped, HAProxy marks both replicas DOWN
# (their /ready answers 503); with it started again, UP. Prints HAProxy's lines about them.
#   balancer_follows_readiness LOG STOP START    three commands: the balancer's log so far,
#                                                 stopping PostgreSQL, starting it
# It first waits for both replicas to be UP: a replica recreated just before (the fault round)
# may still be DOWN at its old address while the engine's DNS catches up, and a replica already
# DOWN reports no change when PostgreSQL stops. Each wait is bounded by time (60 s), not by a
# count of turns: reading the log through the engine's API takes a second or more a turn.
balancer_follows_readiness() {
  local log=$1 stop=$2 start=$3 from lines state n deadline
  state_of() {  # N: UP or DOWN, as the last of HAProxy's lines about recordsd-N says (UP if none)
    local last
    last=$(eval "$log" 2>&1 | grep -E "Server replicas/recordsd-$1 (is UP,|is DOWN|is going DOWN|was DOWN)" | tail -n 1 || true)
    case "$last" in *"is UP,"*|"") echo UP ;; *) echo DOWN ;; esac
  }
  seen() {  # STATE: both replicas reported in it since `from`
    lines=$(eval "$log" 2>&1 | tail -n +$((from + 1)) | grep -E 'Server replicas/recordsd-[12] is (DOWN|UP)' || true)
    printf '%s\n' "$lines" | grep -q "recordsd-1 is $1" && printf '%s\n' "$lines" | grep -q "recordsd-2 is $1"
  }
  deadline=$(( $(date +%s) + 60 ))
  for n in 1 2; do
    until [ "$(state_of $n)" = UP ] || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.5; done
  done
  from=$(eval "$log" 2>&1 | wc -l)
  for state in DOWN UP; do
    if [ $state = DOWN ]; then eval "$stop" >/dev/null || return 1; else eval "$start" >/dev/null || return 1; fi
    deadline=$(( $(date +%s) + 60 ))
    until seen $state || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.2; done
    if ! seen $state; then
      echo "the balancer did not mark both replicas $state within 60 s; it said:"
      printf '%s\n' "$lines"
      return 1
    fi
  done
  printf '%s\n' "$lines" | sed -E 's/^.*(Server replicas)/   \1/'
}
