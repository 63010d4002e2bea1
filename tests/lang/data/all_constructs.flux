# every construct of spec §5.4 in one flow (issue 9 part 4: the highlighting snapshot)
goal "show every construct"
flow every_construct(ticket: Ticket, limit: Number) -> List<String>
  @effect(read)
  notes: String = read(path: "NOTES.md")
  memo cfg = load_config({"strict":true,"retries":3})
  size = len($notes) > 0 && $limit >= 2 || !$cfg.strict
  title = ticket.fields["summary"]?
  first = ticket.items[0]
  label = fmt("ticket {ticket.id}: {{literal}}")
  n = parse($limit, as: "f64")
  total = expr("price * qty", price: 2, qty: limit)
  owner = thing person name "ada"
  widget = thing custom "widget" key "w-1"
  peek cfg
  card = { ticket, title, tags: ["a", $label], note: """two
lines""" }
  raw = @json {"kind":"var","name":"notes"}
  when $size && $notes != 'none'
    do observe "size", $size
  else
    log(msg: "none")
  unless cfg.strict
    warn("lenient")
  each item in ticket.items -> flat found
    grep(pattern: item)
  repeat 3, until: done -> tries
    done = probe()
  loop for 1m, every: 5s, until: ready -> polled
    ready = poll()
  seq -> summary
    a = one()
  pipe -> cleaned
    fetch("u")
    clean()
  ctx pack
    purpose "review"
    budget 24000
    include notes, cfg
    exclude raw
  pack += card
  match ticket.kind
    case "bug"
      fix(ticket)
    default
      triage(ticket)
  route classify(ticket)
    case "docs"
      docs(ticket)
  fallback -> answer
    branch
      primary()
    branch
      secondary()
  parallel
    branch left
      l = one()
    branch right
      r = two()
  race 5s -> winner
    branch fast
      quick()
  timeout 30s -> timed
    slow()
  budget 5000 -> spent
    think()
  with_tools ["read", "grep"] -> scoped
    read(path: "a")
  retry 3, backoff: exponential, delay: 500ms -> fetched
    fetch("u")
  try
    risky()
  catch err
    log(err)
  scope conn = acquire_db()
    query(conn)
  finally
    close(conn)
  saga
    step
      charge()
    undo
      refund()
  confirm "Ship it?", risk: high
    ship()
  throttle "api", max: 5, per: 1m
    call_api()
  debounce "save", wait: 300ms
    save()
  assert $size, "size must be known"
  verify bash("cargo test") contains "ok": "tests failed"
  once "notify" -> sent
    notify("hi")
  checkpoint "phase-1"
  await reply: String = "reply", when: ready
  return [ $title, $label ]  # the answer
