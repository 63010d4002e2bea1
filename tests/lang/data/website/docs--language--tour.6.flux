flow triage(ticket: Ticket)
  sev = ticket.severity
  match sev
    case "critical"
      page_oncall(ticket)
    case "low"
      backlog_add(ticket)
    default
      triage_queue(ticket)
