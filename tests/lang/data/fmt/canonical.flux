# what this flow is for
flow triage(ticket: Ticket)
  # find the work
  hits = grep(pattern: "TODO", glob: "*.rs")  # author order, not alphabetical
  notify(hits)
  timeout 30s -> slow
    # inside a block
    slow_scan()
  retry 3, backoff: exponential, delay: 500ms -> out
    flaky()
  repeat 10, until: done -> c
    step()
  await sig = "webhook", when: ready
  return out
