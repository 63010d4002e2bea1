agent guide
  tools [search]
  datasources [handbook]
  description "For every question, call search before answering. Answer only from the Northstar handbook. If search finds no answer, say so."

channel cli

datasource handbook
  kind "markdown"
  path "./docs"

trigger welcome
  on "startup"
  run show-welcome

trigger questions
  on "user_input"
  agent guide

journey show-welcome
  flow
    send({"channel": "cli", "message": "Northstar handbook assistant ready. Ask a question."})
    return ""
