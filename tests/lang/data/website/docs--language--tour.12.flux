flow handle-ticket(ticket: String)
  route classify(ticket)
    case "bug"
      file_bug(ticket)
    case "billing"
      file_billing(ticket)
    default
      triage(ticket)
