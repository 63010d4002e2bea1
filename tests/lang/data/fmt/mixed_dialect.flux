# what this flow is for
flow triage(ticket: Ticket)
  # find the work
  $hits = grep({ pattern: "TODO", glob: "*.rs" })  # author order, not alphabetical
  do notify $hits
  timeout 30000 -> $slow
    # inside a block
    slow_scan()
  retry 3 backoff exponential delay 500 -> $out
    flaky()
  repeat 10 -> $c
    until $done
    step()
  await $sig = "webhook" when $ready
  return $out
