flow route-ticket(ticket: String)
  route classify(ticket)
    case "bug"
      queue = "engineering"
    case "billing"
      queue = "finance"
    default
      queue = "support"
  msg = fmt("routed to {queue}")
  return msg
